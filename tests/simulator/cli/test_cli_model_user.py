"""`simrun --user openai:<model>` end to end: the real SDK against a local fake API server."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from typer.testing import CliRunner

from simrun.cli._main import app
from simrun.scoring.store._database import Store
from simrun.scoring.store._model_calls import user_check
from simrun.simulator.adapters._process import free_port
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
    assert re.search(r"plan estimated \$[\d.]+–\$[\d.]+ \(p50–p90\) for this matrix; "
                     r"actual \$[\d.]+ \([+-]\d+% of the p50", result.output)
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


def serve_fake(monkeypatch, api: FakeModelAPI, **kw):
    port = free_port()
    server = serve(api, port, **kw)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return server


def set_toml(project, **run):
    toml = project / "simrun.toml"
    text = toml.read_text()
    for key, value in run.items():
        text = text.replace("[run]\n", f"[run]\n{key} = {value!r}\n".replace("'", '"'), 1)
    toml.write_text(text)


def test_a_refused_form_stops_the_run_early_with_the_servers_words_and_exit_2(small_project, monkeypatch):
    """The issue's llama.cpp run: json_schema asked for, 500 "Input should be 'text' or
    'json_object'" every time. Not retried, not played for the whole matrix."""
    api = FakeModelAPI(dialect="llamacpp")
    server = serve_fake(monkeypatch, api)
    try:
        set_toml(small_project, user_output="json_schema")
        result = CliRunner().invoke(app, ["--user", "openai:gpt-4.1-mini", "-n", "5", "--concurrency", "1"])
    finally:
        server.should_exit = True
    assert result.exit_code == 2, result.output
    assert "failed the same way in 3 conversations in a row, so the run stopped" in result.output
    assert "Input should be 'text' or 'json_object'" in result.output
    assert re.search(r"first provider error \(\S+, turn 1\): .*Input should be 'text'", result.output)
    assert "every guarantee held" not in result.output
    assert len(api.requests) == 3                      # one request per conversation: never retried
    with Store(small_project / "simrun.duckdb", create=False) as store:
        run = store.run("latest")
        assert run["status"] == "stopped" and run["conversations_planned"] == 20
        assert store.con.execute("SELECT count(*) FROM conversations").fetchone() == (3,)


def test_auto_finds_the_form_llama_cpp_speaks_and_says_so(small_project, monkeypatch):
    api = FakeModelAPI(dialect="llamacpp")
    server = serve_fake(monkeypatch, api)
    try:
        result = CliRunner().invoke(app, ["--user", "openai:gpt-4.1-mini", "-n", "1"])
    finally:
        server.should_exit = True
    assert result.exit_code in (0, 1), result.output
    line = next(row for row in result.output.splitlines() if row.startswith("user output form: "))
    assert line.startswith("user output form: json_object (json_schema refused: 1 validation error: ")
    assert "Input should be 'text' or 'json_object'" in line and "File \"" not in result.output   # one line
    with Store(small_project / "simrun.duckdb", create=False) as store:
        assert store.run("latest")["user_output"] == "json_object"


def test_a_run_that_judged_no_conversation_never_exits_0(fake_api, small_project):
    set_toml(small_project, user_output="json_schema")     # no probe: the budget is too small for any call
    result = CliRunner().invoke(app, ["--user", "openai:gpt-4.1-mini", "-n", "1", "--budget", "0.0001usd"])
    assert result.exit_code == 2, result.output
    assert "no conversation was judged" in result.output and "budget_cut" in result.output


def test_check_user_measures_stores_and_every_report_of_that_model_shows_it(fake_api, small_project):
    check = CliRunner().invoke(app, ["check-user", "--user", "openai:gpt-4.1-mini", "--budget", "1usd"])
    assert check.exit_code == 0, check.output
    first = check.output.splitlines()[0]
    assert first.startswith("check-user openai:gpt-4.1-mini: 20 conversations against the reference runtime")
    assert re.search(r"estimated \$[\d.]+–\$[\d.]+ \(p50–p90; prior", first)      # the estimate comes first
    assert "user output form: json_schema" in check.output
    assert re.search(r"simulator errors by kind: .*; provider errors: 0", check.output)
    assert re.search(r"turns per reached goal: [\d.]+; cost per conversation: \$[\d.]+ .* output form: json_schema",
                     check.output)
    reached = re.search(r"reached (\d+)% of the reference runtime's goals \((\d+)/(\d+)", check.output)
    assert reached and int(reached.group(3)) == 20
    with Store(small_project / "simrun.duckdb", create=False) as store:
        stored = user_check(store, "openai:gpt-4.1-mini")
        assert stored["conversations"] == 20 and stored["goal_reached"] == int(reached.group(2))
        assert store.con.execute("SELECT count(*) FROM runs").fetchone() == (0,)   # the check is no run
    # The fake user reaches few goals: below 80%, the warning comes with every run of that model.
    assert int(reached.group(1)) < 80 and "the runtime's rates may mostly measure the user" in check.output
    plan = CliRunner().invoke(app, ["plan", "--user", "openai:gpt-4.1-mini"])
    assert "openai:gpt-4.1-mini: check-user of" in plan.output, plan.output
    run = CliRunner().invoke(app, ["--user", "openai:gpt-4.1-mini", "-n", "1"])
    assert "reached " + reached.group(1) + "% of the reference runtime's goals" in run.output
    assert "WARNING: this user model reaches fewer than 80%" in run.output
    html = (small_project / re.search(r"report: (\S+)", run.output).group(1)).read_text()
    assert 'id="competence"' in html and f"{int(reached.group(1))}.0%" in html and 'id="competence-warning"' in html
    cost = html.split('id="cost-table"', 1)[1].split("</table>", 1)[0]
    assert "json_schema" in cost and re.search(r"\$\d\.\d{3,}", cost)
    assert "hit " in html.split('id="cost-table"', 1)[1] or "miss " in html.split('id="cost-table"', 1)[1]


def test_a_run_with_an_unmeasured_model_says_how_to_measure_it(fake_api, small_project):
    run = CliRunner().invoke(app, ["--user", "openai:gpt-4.1-mini", "-n", "1"])
    assert "no check-user result for openai:gpt-4.1-mini: `simrun check-user --user openai:gpt-4.1-mini`" in run.output


def test_a_run_its_budget_cuts_short_is_warned_before_the_start_and_judged_incomplete(fake_api, small_project):
    """A run is complete, or its verdict says it is not: a budget the plan says is too small is
    said before anything is spent, and the run it cuts short is `incomplete` (exit 4), never a
    pass, its first reason the conversations it never ran."""
    set_toml(small_project, user_output="json_schema")
    full = CliRunner().invoke(app, ["--user", "openai:gpt-4.1-mini", "-n", "4", "--db", "full.duckdb"])
    spent = Decimal(re.search(r"exactly \$([\d.]+)", full.output).group(1))
    budget = f"{spent * 3 / 5:.6f}usd"      # three fifths of what the whole matrix cost
    result = CliRunner().invoke(app, ["--user", "openai:gpt-4.1-mini", "-n", "4", "--budget", budget])
    assert result.exit_code == 4, result.output
    warned = result.output.index("warning: the plan's median estimate")
    assert warned < result.output.index("verdict: ")
    assert "the budget buys about" in result.output and "judged incomplete (exit 4)" in result.output
    reasons = [line for line in result.output.splitlines() if line.startswith("INCOMPLETE: ")]
    assert reasons and "conversations planned were never run (the budget ran out)" in reasons[0], result.output
    # Resumed with a budget for the whole matrix, the run completes and is judged whole: the
    # conversations it ran before and after, nothing said never run.
    resumed = CliRunner().invoke(app, ["resume", "--budget", "5usd"])
    assert resumed.exit_code == 0, resumed.output
    assert "never run" not in resumed.output and "INCOMPLETE" not in resumed.output
    with Store(small_project / "simrun.duckdb", create=False) as store:
        run = store.run("latest")
        assert run["status"] == "finished"
        assert store.con.execute("SELECT count(*) FROM conversations WHERE run_id = ?",
                                 [run["run_id"]]).fetchone() == (run["conversations_planned"],)
