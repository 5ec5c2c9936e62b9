"""Docs are tests: the README's commands are the ones CI runs, and every knob is documented."""

from __future__ import annotations

import re

from simulator.cli.main import app
from simulator.config import Budgets, Project
from scoring.dataset.models import Goal, MANNERS, Persona, Step
from libdesk.truth import FAULTS as LIBDESK_FAULTS
from tripdesk.faults import FAULTS

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def setup_commands() -> list[str]:
    section = README.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_two_setup_commands_and_ci_runs_the_second():
    commands = setup_commands()
    assert len(commands) == 2
    assert commands[0].endswith("simrun --budget 5usd")
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci.splitlines()


def test_every_command_is_documented():
    names = {c.name or c.callback.__name__ for c in app.registered_commands}
    for name in names:
        assert f"`simrun {name}" in README, name


def test_every_setting_is_documented():
    for section, model in Project.model_fields.items():
        for key in model.annotation.model_fields:
            assert f"`{section}.{key}`" in README, f"simrun.toml {section}.{key}"
    for section in ("budget", "gate", "release"):
        for key in Budgets.model_fields[section].annotation.model_fields:
            assert f"`{section}.{key}`" in README, f"budgets.toml {section}.{key}"


def test_every_manner_fault_and_field_is_documented():
    for manner in MANNERS:
        assert f"| `{manner}` |" in README, manner
    for fault in (*FAULTS, *LIBDESK_FAULTS):
        assert f"| `{fault}` |" in README, fault
    for model in (Persona, Goal, Step):
        for field in model.model_fields:
            assert f"`{field}`" in README, f"{model.__name__}.{field}"
