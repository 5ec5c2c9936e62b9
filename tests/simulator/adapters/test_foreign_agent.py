"""Any assistant: the suite's own foreign agent (tests/fixtures/foreign_agent.py), a tool-calling
agent on the openai SDK with no protocol code, judged through configuration only, from the tool
spans it exports over OTLP. Its faults are planted, and found exactly where they were planted."""

from __future__ import annotations

import asyncio
import json
import sys
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from simrun.examples.tripdesk import TripDesk
from simrun.scoring.dataset._files import load_dataset
from simrun.scoring.store._database import Store
from simrun.simulator._conformance import check_runtime
from simrun.simulator._ledger import Ledger
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._callable import CallableRuntime
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.adapters._spans import Tool
from simrun.simulator.adapters._template import ChatRuntime
from simrun.simulator.users._model import ModelUser
from simrun.simulator.users._providers import OpenAIProvider
from simrun.simulator.users._scripted import ScriptedUser
from tests.conftest import ROOT
from tests.fixtures import foreign_agent
from tests.fixtures.minimal_runtime import OnlyReplies
from tests.fixtures.model_api import FakeModelAPI

FOREIGN = ROOT / "tests" / "fixtures" / "foreign"
TOOLS = {"change_date": Tool("booking_id"), "add_guests": Tool("booking_id"), "cancel_booking": Tool("booking_id"),
         "get_booking": Tool(read_only=True)}
# The wait ends when the agent's own span for the turn arrives; a long bound keeps a loaded
# machine's slow exporter from leaving a turn's events out of the store read after it.
TRACE_WAIT_S = 15.0
AGENT = [sys.executable, "-m", "tests.fixtures.foreign_agent", "--port", "{port}"]
# What the agent gives no data for, and why each of these classes is UNVERIFIABLE.
REASONS = {"not_understood": "the runtime does not say whether it understood a message (understood)",
           "phantom_receipt": "the runtime gives no receipts as data",
           "card_not_actionable": "the runtime gives no mentions as data",
           "refusal_with_hedge": "the runtime gives no refusal and hedge verdicts as data",
           "audit_gap": "the runtime keeps no audit stream"}

pytestmark = pytest.mark.usefixtures("tagged")


@pytest.fixture(scope="module")
def foreign():
    return load_dataset(FOREIGN / "personas", FOREIGN / "goals")


def judged(db: Path, dataset, runtime, user, repetitions: int) -> dict:
    """Run the matrix; each conversation's end, goal, session, error, wrong_record turns, check
    statuses and reasons, and the agent's own store (the records the state hook read, if any)."""
    with Store(db) as store:
        run_id = asyncio.run(run_matrix(dataset, runtime, user, store, repetitions=repetitions, seed=5,
                                        budget=Decimal(1), concurrency=4)).run_id
        got = {cid: {"end": end, "reached": reached, "session": session, "goal": cid.split("/")[1],
                     "error": json.loads(error) if error else None, "wrong": set(), "checks": {},
                     "records": (json.loads(final) or {}).get("records") if final else None,
                     "writes": sum(1 for e in ((json.loads(final) or {}).get("events") or []) if final
                                   and e["operation"] in foreign_agent.WRITES)}
               for cid, end, reached, session, error, final in store.con.execute(
                   "SELECT conversation_id, end_reason, goal_reached, session_id, error, final_state "
                   "FROM conversations WHERE run_id = ?", [run_id]).fetchall()}
        for cid, turn in store.con.execute("SELECT conversation_id, turn FROM findings WHERE run_id = ? AND "
                                           "class = 'wrong_record'", [run_id]).fetchall():
            got[cid]["wrong"].add(turn)
        for cid, cls, status, reason in store.con.execute(
                "SELECT conversation_id, class, status, reason FROM checks WHERE run_id = ?", [run_id]).fetchall():
            got[cid]["checks"][cls] = (status, reason)
    return got


def planted(log: Path) -> set[tuple[str, int]]:
    if not log.exists():
        return set()
    return {(line.split()[0], int(line.split()[1])) for line in log.read_text().splitlines()}


def assert_judged_as_planted(got: dict, log: Path) -> None:
    """wrong_record exactly where the agent planted it; a crash as runtime_error with its
    evidence; the goal decided from spans in every other conversation; the classes the agent
    gives no evidence for UNVERIFIABLE, each with its reason."""
    found = {(c["session"], turn) for c in got.values() for turn in c["wrong"]}
    assert found == planted(log) and found, (found, planted(log))
    # Exactly a fifth of the write calls (each one a store event, from its span).
    assert len(found) == sum(c["writes"] for c in got.values()) // 5
    crashed = [c for c in got.values() if c["end"] == "runtime_error"]
    unplanned = [(c["goal"], c["error"]) for c in crashed if c["goal"] != "cancel-broken"]
    assert crashed and not unplanned, unplanned
    for c in got.values():
        if c["end"] != "runtime_error":
            assert c["reached"] is not None, c
        if c["goal"] == "move-booking" and c["records"] is not None:   # the agent's own store agrees
            assert c["reached"] == (c["records"]["B-1"]["date"] == "2027-03-14"), c
        if c["end"] == "goal_reached":
            assert not c["wrong"] or c["goal"] != "cancel-broken"
        answered = not (c["end"] == "runtime_error" and c["error"]["turn"] == 1)
        for cls, reason in REASONS.items():
            if answered:
                assert c["checks"][cls] == ("unverifiable", reason), (cls, c)
            else:       # nothing observed decides nothing: a crash on the first turn decides no class
                status, why = c["checks"][cls]
                assert status == "unverifiable" and why.startswith("no turn completed: "), (cls, c)
    assert any(c["end"] == "goal_reached" for c in got.values())
    return crashed


def test_a_tool_calling_agent_is_judged_from_its_spans_as_a_callable(tmp_path, foreign, desk_env):
    runtime = CallableRuntime("tests.fixtures.foreign_agent:reply", tools=TOOLS, traces=True,
                              trace_wait_s=TRACE_WAIT_S)
    got = judged(tmp_path / "c.duckdb", foreign, runtime, ScriptedUser(), repetitions=4)
    desk = next(d for key, d in foreign_agent._desks.items() if key[-1] == str(desk_env))
    for c in got.values():     # the agent's own store, to check the goal decided from its spans against
        c["records"] = desk.domains.get(c["session"])
    for c in assert_judged_as_planted(got, desk_env):
        assert c["error"]["kind"] == "crash" and "KeyError: 'B-404'" in c["error"]["message"]
        assert "foreign_agent.py" in c["error"]["traceback"]
    # The terse persona leaves the date out; the agent asks for it by name, in words only, and
    # the scripted user answers from the step's `answers`.
    assert any(c["end"] == "goal_reached" for cid, c in got.items() if cid.startswith("terse-tess/move-booking"))


def test_the_same_agent_over_an_openai_compatible_endpoint_with_a_model_user(tmp_path, foreign, desk_env,
                                                                              desk_model_url, api_keys):
    api, ledger = FakeModelAPI(), Ledger(Decimal(1))
    user = ModelUser("openai:m", OpenAIProvider("m", http_client=api.client(httpx)), _price(), ledger,
                     output="json_schema")
    runtime = ChatRuntime(url="http://127.0.0.1:{port}/v1", model="desk", command=AGENT, cwd=str(ROOT),
                          env={"FOREIGN_MODEL_URL": desk_model_url, "FOREIGN_WRONG_RECORD": "0.2",
                               "FOREIGN_PLANTED_LOG": str(desk_env)},
                          tools=TOOLS, traces=True, trace_wait_s=TRACE_WAIT_S,
                          state="http://127.0.0.1:{port}/state/{session}")
    got = judged(tmp_path / "e.duckdb", foreign, runtime, user, repetitions=4)
    for c in assert_judged_as_planted(got, desk_env):
        # The endpoint answered 500 with its traceback (as Starlette's debug mode writes it).
        assert c["error"]["kind"] == "http_status" and c["error"]["status"] == 500
        assert c["error"]["body"].startswith("Traceback (most recent call last):")
    assert all(c["records"] is not None for c in got.values() if c["end"] != "runtime_error")


def _price():
    from simrun._settings import Price

    return Price(input_per_mtok=Decimal("1"), output_per_mtok=Decimal("1"))


@pytest.mark.parametrize("runtime, level", [
    (lambda: PythonRuntime(OnlyReplies()), 0),
    (lambda: CallableRuntime("tests.fixtures.foreign_agent:reply", tools=TOOLS, traces=True), 1),
    (lambda: CallableRuntime("tests.fixtures.foreign_agent:reply", tools=TOOLS, traces=True,
                             state="tests.fixtures.foreign_agent:records"), 2),
    (lambda: PythonRuntime(TripDesk()), 4)], ids=["reply-only", "agent", "agent-with-records", "tripdesk"])
def test_check_runtime_names_the_rung_each_runtime_reaches(foreign, demo, desk_env, runtime, level):
    goal = demo.goal("single-add-bag") if level in (0, 4) else foreign.goal("move-booking")
    report = asyncio.run(check_runtime(runtime(), goal))
    assert report.ok, report.violations
    assert report.level() == level
    ladder = report.ladder()
    assert [r.level for r in ladder if r.given] == list(range(level + 1))
    unverifiable = report.unverifiable()
    assert ("wrong_record" in unverifiable) == (level < 1)
    assert ("goal_reached" in unverifiable) == (level < 2)
    assert ("audit_gap" in unverifiable) == (level < 4)
