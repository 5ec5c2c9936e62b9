"""Agents on real frameworks, traced the way their teams trace them, judged by `simrun` in a folder
with a simrun.toml and nothing else (no PYTHONPATH for the agent: its module sits beside the
config), in a process of its own: the refill desk of tests/fixtures/refill_desk.py on the OpenAI
Agents SDK traced by OpenInference's instrumentor, and on LangGraph traced by OpenInference's
LangChain instrumentor or by OpenLLMetry's, each with planted wrong records and a truth log.

wrong_record and goal reached must be exact against the truth. With its spans unreadable (a
convention of the team's own, or no spans at all) the same agent's checks over events and its
goals are UNVERIFIABLE, never clean: unread is not "none"."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from simrun.scoring.store._database import Store
from tests.conftest import ROOT
from tests.fixtures.processes import cli_command
from tests.fixtures.refill_desk import TOOLS_TOML

pytest.importorskip("agents")
pytest.importorskip("langgraph")

REFILL = ROOT / "tests" / "fixtures" / "refill"
GOALS = {"refill": ("refill_prescription", "RX-1", None), "move-pickup": ("move_pickup", "RX-2", "2027-01-20"),
         "no-refills": ("refill_prescription", "RX-9", None)}


def config(module: str, tracing: str) -> str:
    # With no spans at all, each turn would wait the default 6 s for its own span to arrive; the
    # verdict is the same at a quarter of a second (nothing ever comes: that the turn waits is
    # what is tested, not how long), and the twelve conversations wait at once, not eight at a time.
    at_once, wait = ("concurrency = 12\n", "trace_wait_s = 0.25\n") if tracing == "none" else ("", "")
    return f"""
[run]
personas = "{REFILL / 'personas'}"
goals = "{REFILL / 'goals'}"
repetitions = 4
user = "scripted"
{at_once}
[runtime]
transport = "callable"
target = "agent.py:reply"
state = "agent.py:records"
{wait}{TOOLS_TOML}"""


def environment(folder, tracing: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "TRACELOOP_"))},
            # the suite's own modules (tests.fixtures), as an installed package would be; the agent's
            # module itself is found beside simrun.toml
            "PYTHONPATH": str(ROOT), "REFILL_TRACING": tracing, "REFILL_WRONG_RECORD": "0.25",
            "REFILL_PLANTED_LOG": str(folder / "planted.txt"), "REFILL_TRUTH_LOG": str(folder / "truth.jsonl"),
            "OPENAI_API_KEY": "not-a-key"}


def run_traced(folder, tracing: str, *args: str) -> str:
    done = subprocess.run([*cli_command(), *args], cwd=folder, env=environment(folder, tracing), capture_output=True,
                          text=True, timeout=300)
    return done.stdout + done.stderr


def judge(folder, module: str, tracing: str) -> dict:
    """`simrun` over the agent `module` (tests/fixtures/NAME.py), copied beside simrun.toml as
    agent.py, traced as `tracing` says; what the store and the agent's logs say."""
    (folder / "simrun.toml").write_text(config(module, tracing))
    (folder / "agent.py").write_text(f"from tests.fixtures.{module} import reply, records  # noqa: F401\n")
    planted_log, truth_log = folder / "planted.txt", folder / "truth.jsonl"
    output = run_traced(folder, tracing)
    assert "report:" in output, output
    with Store(folder / "simrun.duckdb") as store:
        rows = store.con.execute("SELECT conversation_id, session_id, goal_reached, final_state "
                                 "FROM conversations").fetchall()
        found = {cid: {"session": session, "reached": reached, "wrong": set(), "checks": {},
                       "state": json.loads(final) if final else None}
                 for cid, session, reached, final in rows}
        for cid, turn in store.con.execute("SELECT conversation_id, turn FROM findings "
                                           "WHERE class = 'wrong_record'").fetchall():
            found[cid]["wrong"].add(turn)
        for cid, cls, status, reason in store.con.execute("SELECT conversation_id, class, status, reason "
                                                          "FROM checks").fetchall():
            found[cid]["checks"][cls] = (status, reason)
    planted = ({(line.split()[0], int(line.split()[1])) for line in planted_log.read_text().splitlines()}
               if planted_log.exists() else set())
    truth = [json.loads(line) for line in truth_log.read_text().splitlines()] if truth_log.exists() else []
    return {"conversations": found, "planted": planted, "truth": truth, "output": output}


def assert_exact(judged: dict) -> None:
    conversations, planted, truth = judged["conversations"], judged["planted"], judged["truth"]
    assert len(conversations) == 12, judged["output"]
    assert planted, "every fourth write names the other prescription"
    # wrong_record: found exactly at the turns where a write was planted.
    found = {(c["session"], turn) for c in conversations.values() for turn in c["wrong"]}
    assert found == planted, judged["output"]
    for c in conversations.values():
        assert c["checks"]["wrong_record"][0] in ("clean", "fired"), c["checks"]["wrong_record"]
    # Goal reached: exactly when the desk itself committed the goal's write, as its truth log says.
    for cid, c in conversations.items():
        tool, rx, date = GOALS[cid.split("/")[1]]
        right = any(t["session"] == c["session"] and t["tool"] == tool and t["rx"] == rx and t["committed"]
                    and t.get("date") == date for t in truth)
        assert c["reached"] is right, (cid, c["state"], [t for t in truth if t["session"] == c["session"]])
    reached = sum(c["reached"] for c in conversations.values())
    assert 0 < reached < 12, judged["output"]       # the planted faults and RX-9 cost some goals, not all


def assert_unverifiable(judged: dict, *, seen: str) -> None:
    conversations = judged["conversations"]
    assert len(conversations) == 12, judged["output"]
    assert judged["truth"] and judged["planted"], "the agent did write, wrong records too"
    for cid, c in conversations.items():
        status, reason = c["checks"]["wrong_record"]
        assert status == "unverifiable", (cid, status, reason)
        assert c["reached"] is None, (cid, c["state"])
        assert "events" not in c["state"] and seen in c["state"]["events_unknown"], c["state"]
    assert not any(c["wrong"] for c in conversations.values())
    assert "held: every guarantee held" not in judged["output"]


@pytest.mark.parametrize(("module", "tracing"), [("refill_openai_agents", "openinference"),
                                                 ("refill_langgraph", "openinference"),
                                                 ("refill_langgraph", "openllmetry")])
def test_its_wrong_records_and_goals_are_exact_against_the_truth(tmp_path, module, tracing):
    judged = judge(tmp_path, module, tracing)
    assert_exact(judged)
    assert_tool_calls_shown(tmp_path, judged)
    # check-runtime names the convention it read, and the tool calls it read from it.
    checked = run_traced(tmp_path, tracing, "check-runtime", "--goal", "refill")
    convention = {"openinference": "OpenInference", "openllmetry": "OpenLLMetry"}[tracing]
    assert re.search(rf"traces: {convention}: \d+ spans, [1-9]\d* tool calls read", checked), checked
    assert "receipts (phantom_receipt): the tool call ids of the writes a reply claims" in checked, checked
    assert "404" not in checked and "evidence: level 2 of 4" in checked, checked


def assert_tool_calls_shown(folder, judged: dict) -> None:
    """`simrun show` and the report list each turn's tool calls: name, record, status, arguments."""
    cid, c = next((cid, c) for cid, c in sorted(judged["conversations"].items()) if c["wrong"])
    shown = subprocess.run([*cli_command(), "show", "latest", cid], cwd=folder, capture_output=True, text=True,
                           timeout=120).stdout
    for e in c["state"]["events"]:
        assert f"tool {e['operation']} {e['record']} {e['status']}" in shown, shown
    assert '"rx_id": "RX-' in shown, shown
    report = next((folder / "reports").glob("r*.html")).read_text()
    assert "tool <code>refill_prescription</code>" in report or "tool <code>move_pickup</code>" in report


@pytest.mark.parametrize(("module", "tracing", "seen"), [
    ("refill_openai_agents", "plain", "of no convention simrun reads (attributes pharmacy.*)"),
    ("refill_langgraph", "none", "no span of this conversation arrived")])
def test_with_its_spans_unreadable_it_is_unverifiable_never_clean(tmp_path, module, tracing, seen):
    assert_unverifiable(judge(tmp_path, module, tracing), seen=seen)
    checked = run_traced(tmp_path, tracing, "check-runtime", "--goal", "refill")
    assert "evidence: level 0 of 4" in checked, checked       # no tool events: the level is not reached
    if tracing == "plain":
        assert re.search(r"traces: \d+ spans of no convention simrun reads \(attributes pharmacy\.\*\)", checked)
