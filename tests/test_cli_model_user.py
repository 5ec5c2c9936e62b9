"""`simrun --user openai:<model>` end to end: the real SDK against a local fake API server."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from simulator.adapters.process import free_port
from simulator.cli import app

from tests.fixtures.model_api import FakeModelAPI, serve

KEY = "sk-cli-planted-77aa"


@pytest.fixture()
def fake_api(monkeypatch):
    api = FakeModelAPI()
    port = free_port()
    server = serve(api, port)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    yield api
    server.should_exit = True


@pytest.fixture()
def small_project(project, monkeypatch):
    for path in (project / "personas").glob("*.yaml"):
        if path.stem not in ("plain-paula", "terse-tom"):
            path.unlink()
    for path in (project / "goals").glob("*.yaml"):
        if path.stem not in ("single-add-bag", "cancel-trip"):
            path.unlink()
    monkeypatch.chdir(project)
    return project


@pytest.mark.parametrize("backend", ["openai:gpt-4.1-mini", "anthropic:claude-haiku-4-5"])
def test_a_paid_run_reports_its_exact_spend_and_the_plan_beside_it(fake_api, small_project, backend):
    result = CliRunner().invoke(app, ["--budget", "1usd", "--user", backend, "-n", "2"])
    assert result.exit_code == 0, result.output
    spent = re.search(r"spent \$\S+ \(exactly \$([\d.]+), the sum of its calls\) of \$1\.00", result.output)
    assert spent and float(spent.group(1)) > 0
    assert "the budget allowed 8 of 8 conversations" in result.output
    assert re.search(r"plan estimated \$[\d.]+–\$[\d.]+ \(p50–p90\) for this matrix; actual \$[\d.]+ \([+-]\d+% of the p50", result.output)
    requests = len(fake_api.requests)

    replay = CliRunner().invoke(app, ["--replay", "latest", "--replay-only"])
    assert replay.exit_code == 0, replay.output
    assert "exactly $0.000000" in replay.output and len(fake_api.requests) == requests
    assert re.search(r"replay: \d+ answers from the recorded run, 0 not in it", replay.output)


def test_plan_prices_every_backend_before_spending(fake_api, small_project):
    result = CliRunner().invoke(app, ["plan", "--budget", "0.001usd"])
    assert result.exit_code == 0, result.output
    assert "openai:gpt-4.1-mini" in result.output and "anthropic:claude-haiku-4-5" in result.output
    assert fake_api.requests == []
    assert re.search(r"\d+ \(\d+%\)", result.output)


def test_without_a_key_nothing_runs(small_project, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = CliRunner().invoke(app, ["--user", "openai:gpt-4.1-mini"])
    assert result.exit_code == 2 and "set OPENAI_API_KEY" in result.output
    assert not (small_project / "simrun.duckdb").exists()


def test_an_unpriced_model_refuses_to_start(fake_api, small_project):
    result = CliRunner().invoke(app, ["--user", "openai:gpt-unpriced"])
    assert result.exit_code == 2 and '[prices."openai:gpt-unpriced"]' in result.output
