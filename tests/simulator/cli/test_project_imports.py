"""A team's assistant imports as its own project's code: `module:function` from the folder of
simrun.toml (as uvicorn's `--app-dir` does), a file target with its sibling imports, with no
PYTHONPATH, from whatever folder simrun is run in, and never in place of simrun's own modules."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from simrun._errors import RuntimeUnavailable
from simrun.simulator.adapters._python import load_attribute
from tests.fixtures.processes import cli_command

DESK = '''
from helpers import greeting          # a sibling module of the project


def reply(messages, session):
    return greeting(messages[-1]["content"])


def records(session):
    return {"RX-1": {"type": "prescription", "seen": session}}
'''
HELPERS = '''
def greeting(said):
    return f"You said: {said}. What is the RX number?"
'''


def project(folder, target: str, state: str) -> None:
    (folder / "pharmacy.py").write_text(DESK)
    (folder / "helpers.py").write_text(HELPERS)
    (folder / "goals").mkdir()
    (folder / "personas").mkdir()
    (folder / "personas" / "pat.yaml").write_text("id: pat\nname: Pat\ndescription: A patient.\n")
    (folder / "goals" / "refill.yaml").write_text(textwrap.dedent("""
        id: refill
        title: Refill RX-1
        instructions: Have RX-1 refilled.
        steps:
          - record: RX-1
            operation: refill_prescription
            say: ["Please refill RX-1."]
        success:
          records:
            - id: RX-1
              match: {type: prescription}
        max_turns: 2
        """))
    (folder / "simrun.toml").write_text(textwrap.dedent(f"""
        [run]
        repetitions = 1
        user = "scripted"

        [runtime]
        transport = "callable"
        target = "{target}"
        state = "{state}"
        """))


@pytest.mark.parametrize(("target", "state"), [("pharmacy:reply", "pharmacy:records"),
                                               ("pharmacy.py:reply", "pharmacy.py:records")])
def test_a_callable_beside_simrun_toml_imports_with_its_siblings_and_no_pythonpath(tmp_path, target, state):
    folder = tmp_path / "desk"
    folder.mkdir()
    project(folder, target, state)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("OTEL_")}
    done = subprocess.run([*cli_command(), "check-runtime", "--config", str(folder / "simrun.toml")], cwd=elsewhere,
                          env=env, capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert "cannot import" not in output and "No module named" not in output, output
    assert "runtime callable:" in output, output
    assert "state" in output and "supplied" in output, output


def test_a_file_named_like_a_module_already_imported_is_refused_never_shadowing_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))      # the project's folder goes on it: this test's only
    (tmp_path / "simrun.py").write_text("def reply(messages, session):\n    return 'mine'\n")
    (tmp_path / "json.py").write_text("def reply(messages, session):\n    return 'mine'\n")
    import json

    import simrun

    for name, module in (("simrun", simrun), ("json", json)):
        with pytest.raises(RuntimeUnavailable, match=f"has the name of the module '{name}' already imported"):
            load_attribute(f"{name}.py:reply", folder=tmp_path)
        assert sys.modules[name] is module
    # A module target from the project's folder: simrun's own package is the one already imported.
    assert load_attribute("simrun:__version__", folder=tmp_path) == simrun.__version__


def test_the_target_and_its_state_hook_in_one_file_share_one_module(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "shared_desk_40.py").write_text("STORE = {}\ndef reply(m, s):\n    return 'x'\n"
                                                "def records(s):\n    return STORE\n")
    try:
        reply = load_attribute("shared_desk_40.py:reply", folder=tmp_path)
        records = load_attribute("shared_desk_40.py:records", folder=tmp_path)
        assert reply.__globals__ is records.__globals__
    finally:
        sys.modules.pop("shared_desk_40", None)


def test_a_module_that_cannot_be_imported_names_the_folder_it_was_looked_for_in(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(RuntimeUnavailable, match=f"imported from {tmp_path.resolve()}"):
        load_attribute("no_such_desk_40:reply", folder=tmp_path)
    assert sys.path[0] == str(tmp_path.resolve())     # first, as uvicorn's --app-dir puts it
