"""A second foreign assistant (tests/fixtures/clinic_agent.py), unlike the suite's first in every
way simrun could lean on: OpenTelemetry set up at import with the SDK's defaults (global provider,
a 5 s batch delay, gzip), tool spans nested under chat spans, reads without arguments, a failed
call retried, one tool called twice in a turn, and questions in its own words. simrun judges it
the way a user would: `simrun` in a folder with a simrun.toml and nothing else, in its own process."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from simrun.scoring.store._database import Store
from tests.conftest import ROOT
from tests.fixtures.processes import cli_command

CLINIC = ROOT / "tests" / "fixtures" / "clinic"
CONFIG = f"""
[run]
personas = "{CLINIC / 'personas'}"
goals = "{CLINIC / 'goals'}"
repetitions = 5
user = "scripted"

[runtime]
transport = "callable"
target = "tests.fixtures.clinic_agent:answer"
state = "tests.fixtures.clinic_agent:records"

[runtime.tools.reschedule]
record = "appointment_ref"
[runtime.tools.add_note]
record = "appointment_ref"
[runtime.tools.find_appointment]
read_only = true
"""


def simrun_apart(folder, **env: str) -> str:
    """`simrun` in `folder`, in a process of its own as a user runs it (no OpenTelemetry settings of
    this process's), with `env` added; its output, which must end with a report."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    for name in [n for n in env if n.startswith("OTEL_")]:
        del env[name]
    done = subprocess.run(cli_command(), cwd=folder, env=env, capture_output=True, text=True, timeout=240)
    output = done.stdout + done.stderr
    assert "report:" in output, output
    return output


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """One run of the matrix, as `simrun` in its own process; (conversations, planted, output)."""
    folder = tmp_path_factory.mktemp("clinic")
    (folder / "simrun.toml").write_text(CONFIG)
    log = folder / "planted.txt"
    output = simrun_apart(folder, CLINIC_WRONG_RECORD="0.2", CLINIC_PLANTED_LOG=str(log))
    with Store(folder / "simrun.duckdb") as store:
        rows = store.con.execute("SELECT conversation_id, session_id, end_reason, goal_reached, final_state "
                                 "FROM conversations").fetchall()
        conversations = {cid: {"session": session, "end": end, "reached": reached, "wrong": set(), "checks": {},
                               "state": json.loads(final) if final else None}
                          for cid, session, end, reached, final in rows}
        for cid, turn in store.con.execute("SELECT conversation_id, turn FROM findings "
                                           "WHERE class = 'wrong_record'").fetchall():
            conversations[cid]["wrong"].add(turn)
        for cid, cls, status, reason in store.con.execute("SELECT conversation_id, class, status, reason "
                                                          "FROM checks").fetchall():
            conversations[cid]["checks"][cls] = (status, reason)
    planted = ({(line.split()[0], int(line.split()[1])) for line in log.read_text().splitlines()}
               if log.exists() else set())
    return conversations, planted, output


def test_its_goals_are_decided_from_its_spans_and_its_questions_answered(judged):
    conversations, planted, output = judged
    assert len(conversations) == 20, output
    for cid, c in conversations.items():
        events = c["state"]["events"]          # every conversation's spans were heard, none lost
        wrote = [e for e in events if e["status"] == "committed"]
        # Reached exactly when a committed write landed where the goal wanted it, as its spans say.
        if "/move-visit/" in cid:
            right = any(e["record"] == "A-7" and e["arguments"] == {"appointment_ref": "A-7", "day": "2027-05-02"}
                        for e in wrote)
        else:
            right = sum(e["record"] == "A-9" and e["operation"] == "add_note" for e in wrote) == 2
        assert c["reached"] == right, (cid, events)
        assert c["end"] in ("goal_reached", "user_stopped"), (cid, c["end"])
    # Each move was asked for with neither reference nor day; the user answered both questions.
    assert sum(c["reached"] for c in conversations.values()) >= 14, output


def test_a_retried_call_is_one_refused_event_then_one_committed(judged):
    conversations, _, _ = judged
    retried = [e for c in conversations.values() for e in c["state"]["events"] if e["id"].endswith("-again")]
    assert retried, "every third reschedule fails once"
    for event in retried:
        events = next(c["state"]["events"] for c in conversations.values() if event in c["state"]["events"])
        first = next(e for e in events if e["id"] == event["id"].removesuffix("-again"))
        assert (first["status"], first["reason"], event["status"]) == ("refused", "TimeoutError", "committed")
    reads = [e for c in conversations.values() for e in c["state"]["events"] if e["operation"] == "find_appointment"]
    assert reads == []        # a read-only tool's calls are no events


def test_its_planted_wrong_records_are_found_exactly_where_planted(judged):
    conversations, planted, _ = judged
    found = {(c["session"], turn) for c in conversations.values() for turn in c["wrong"]}
    assert found == planted and found
    writes = sum(1 for c in conversations.values() for e in c["state"]["events"]
                 if e["operation"] in ("reschedule", "add_note") and not e["id"].endswith("-again"))
    assert len(found) == writes // 5


def test_what_it_gives_no_data_for_is_unverifiable_with_its_reason(judged):
    conversations, _, _ = judged
    for c in conversations.values():
        assert c["checks"]["audit_gap"] == ("unverifiable", "the runtime keeps no audit stream")
        assert c["checks"]["phantom_receipt"] == ("unverifiable", "the runtime gives no receipts as data")
        assert c["checks"]["wrong_record"][0] in ("clean", "fired")
