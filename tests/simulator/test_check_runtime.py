"""`simrun check-runtime`: what a runtime supplies, what that leaves UNVERIFIABLE, and violations."""

from __future__ import annotations

import asyncio
import re
import sys
from decimal import Decimal

import pytest
from typer.testing import CliRunner

from simrun.cli._main import app
from simrun.scoring.store import _rates as R
from simrun.scoring.store._database import Store
from simrun.simulator._conformance import NEEDS, check_runtime
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser
from tests.conftest import ROOT

PY = sys.executable
# A user's own runtime file, as they would point simrun.toml at it.
MINIMAL = (ROOT / "tests" / "fixtures" / "minimal_runtime.py").read_text()
SLOPPY = '''
from simrun.examples.tripdesk import TripDesk
class Sloppy(TripDesk):
    def turn(self, session, request):
        result = super().turn(session, request)
        return {**result, "understood": "yes", "receipts": "e-1"}
'''


@pytest.fixture()
def cli(project, monkeypatch):
    monkeypatch.chdir(project)
    return lambda *args: CliRunner().invoke(app, list(args))


def use_runtime(project, source: str, target: str) -> None:
    (project / "mine.py").write_text(source)
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace('target = "simrun.examples.tripdesk:TripDesk"',
                                             f'target = "mine.py:{target}"'))


@pytest.mark.parametrize("flags", [
    [], ["--transport", "stdio", "--runtime-command", f"{PY} -m simrun.examples.tripdesk.stdio"],
    ["--transport", "http", "--runtime-command", f"{PY} -m simrun.examples.tripdesk.server --port {{port}}"]])
def test_the_reference_runtime_passes_over_every_transport(cli, flags):
    result = cli("check-runtime", *flags)
    assert result.exit_code == 0, result.output
    assert "every class and guarantee can be checked" in result.output and "protocol 1 kept" in result.output


def test_a_reply_only_runtime_is_told_what_it_lacks(cli, project):
    use_runtime(project, MINIMAL, "OnlyReplies")
    result = cli("check-runtime")
    assert result.exit_code == 0, result.output     # lacking fields is allowed; it is not a violation
    for field in ("understood", "next_steps", "mentions", "receipts", "verdicts"):
        assert re.search(rf"{field}\s+│\s+0/\d", result.output), field
    for op in ("state", "audit"):
        assert re.search(rf"{op}\s+│ not supported", result.output), op
    for cls in ("dead_end", "phantom_receipt", "audit_gap", "goal_reached", "card_not_actionable"):
        assert f"  {cls}: needs" in result.output


def test_a_reply_only_runtimes_run_is_unverifiable_never_passed(tmp_path, demo, project):
    use_runtime(project, MINIMAL, "OnlyReplies")
    from simrun.simulator.adapters._python import load_target

    runtime = PythonRuntime(load_target(f"{project / 'mine.py'}:OnlyReplies"))
    report = asyncio.run(check_runtime(PythonRuntime(load_target(f"{project / 'mine.py'}:OnlyReplies")),
                                       demo.goal("single-add-bag")))
    with Store(tmp_path / "m.duckdb") as store:
        run_id = asyncio.run(run_matrix(demo, runtime, ScriptedUser(), store, repetitions=1, seed=1,
                                        budget=Decimal(0))).run_id
        rates = {r.cls: r for r in R.class_rates(store, run_id)}
        outcome = R.outcome(store, run_id)
    n = len(demo.personas) * len(demo.goals)
    for cls in report.unverifiable():
        if cls == "goal_reached":
            assert outcome.goal_unverifiable == n and outcome.goal_reached == 0
        elif cls not in ("integrity_leak", "unanswered", "refused_offer", "wrong_record", "stale_click"):
            # (those need a refusal, a question, an offer or a write to check in the first place)
            # Every conversation where the class had a turn to look at is UNVERIFIABLE; the only
            # ones scored are those with no such turn at all (a loop needs two turns).
            assert rates[cls].occurrences == 0 and rates[cls].unverifiable > 0, cls
            if cls != "loop":
                assert rates[cls].scored == 0, cls
    assert set(report.unverifiable()) >= {"phantom_receipt", "audit_gap", "goal_reached", "not_understood"}
    assert set(NEEDS) >= set(report.unverifiable())


def test_violations_are_shown_with_their_json_and_fail(cli, project):
    use_runtime(project, SLOPPY, "Sloppy")
    result = cli("check-runtime")
    assert result.exit_code == 1
    assert "VIOLATION at turn 1: understood: Input should be a valid boolean" in result.output
    assert "receipts: Input should be a valid list" in result.output
    assert '"understood": "yes"' in result.output


STALE = '''
from simrun.examples.tripdesk import TripDesk

class Stale(TripDesk):
    def turn(self, session, request):
        result = super().turn(session, request)
        # Well formed, but not its store: an event the store does not hold.
        made_up = {"id": "e-99", "turn": 1, "operation": "add_bag", "status": "committed"}
        return {**result, "state": {**result["state"], "events": [*result["state"]["events"], made_up]}}
'''


STARTS_STALE = '''
from simrun.examples.tripdesk import TripDesk

class StartsStale(TripDesk):
    def start(self, request):
        reply = super().start(request)
        # Well formed, but not its store: a record the store does not hold.
        return {**reply, "state": {**reply["state"], "records": {**reply["state"]["records"], "trip:T-0": {}}}}
'''


def test_a_store_sent_with_the_start_reply_that_is_not_the_store_is_a_violation(cli, project):
    use_runtime(project, STARTS_STALE, "StartsStale")
    result = cli("check-runtime")
    assert result.exit_code == 1
    assert "the store sent with the start reply is not what the state operation answers" in result.output


def test_a_store_sent_with_a_turn_that_is_not_the_store_after_it_is_a_violation(cli, project):
    use_runtime(project, STALE, "Stale")
    result = cli("check-runtime")
    assert result.exit_code == 1
    assert "the store sent with the turn is not what the state operation answers" in result.output


def test_an_unreachable_runtime_is_a_usage_error(cli):
    result = cli("check-runtime", "--url", "http://127.0.0.1:9")
    assert result.exit_code == 2 and "127.0.0.1:9" in result.output



CRASHY = '''
from simrun.examples.tripdesk import TripDesk
class Crashy(TripDesk):
    def turn(self, session, request):
        raise ZeroDivisionError("the fare table is empty")
'''


def test_a_crash_is_named_and_the_routes_are_still_read_when_the_runtime_answers(cli, project):
    use_runtime(project, CRASHY, "Crashy")
    result = cli("check-runtime")
    assert result.exit_code == 1
    assert "CRASH in turn 1 (crash): the runtime raised in turn: ZeroDivisionError: the fare table is empty" \
        in result.output
    assert "ZeroDivisionError" in result.output.split("CRASH", 1)[1].split("turn-result fields")[0]
    for op in ("state", "audit"):
        assert re.search(rf"{op}\s+│ supplied", result.output), op
    assert "not supported" not in result.output


def test_after_a_server_dies_no_route_is_called_not_supported(cli, project):
    goal = (project / "goals" / "single-add-bag.yaml").read_text().replace("id: single-add-bag", "id: odd-crash")
    (project / "goals" / "zz-odd-crash.yaml").write_text(goal)
    odd = ROOT / "tests" / "fixtures" / "odd_runtime.py"
    result = cli("check-runtime", "--goal", "odd-crash", "--transport", "http",
                 "--runtime-command", f"{PY} {odd} http --port {{port}}")
    assert result.exit_code == 1
    assert "CRASH in turn 1 (connection)" in result.output and "crashing on purpose" in result.output
    for op in ("state", "audit"):
        assert re.search(rf"{op}\s+│ not called: the runtime was gone after turn 1", result.output), op
    assert "not supported" not in result.output


CLOSES_STALE = '''
import sys
import uvicorn
from simrun.examples.tripdesk import TripDesk
from simrun.examples.tripdesk.server import create_app

class ClosesStale(TripDesk):
    def close(self, session):
        reply = super().close(session)
        # Well formed, but not its audit: the last turn event dropped.
        return {"audit": {"turns": reply["audit"]["turns"][:-1]}} if "audit" in reply else reply

uvicorn.run(create_app(ClosesStale()), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
'''


def test_an_audit_sent_with_the_close_answer_that_is_not_the_audit_is_a_violation(tmp_path):
    from simrun.simulator.adapters._http import HttpRuntime

    server = tmp_path / "closes_stale.py"
    server.write_text(CLOSES_STALE)
    honest = asyncio.run(check_runtime(HttpRuntime(
        command=[sys.executable, "-m", "simrun.examples.tripdesk.server", "--port", "{port}"], cwd=str(ROOT))))
    stale = asyncio.run(check_runtime(HttpRuntime(command=[sys.executable, str(server), "{port}"], cwd=str(ROOT),
                                                  env={"PYTHONPATH": str(ROOT)})))
    said = "the audit sent with the close answer is not what the audit operation answered right before it"
    assert honest.ok and not any(said in v.problem for v in honest.violations)
    assert [v.where for v in stale.violations if said in v.problem] == ["close"]
