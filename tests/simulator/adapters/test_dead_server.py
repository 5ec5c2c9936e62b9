"""A dead server is reported as it was (issue 38, rule 8).

The runtime (tests/fixtures/dying_runtime.py) exits on one conversation's turn while three more
have a turn under way. Each of the four says so ("the server exited while 4 conversations were in
flight; this was one of them"), with the stderr lines the runtime marked with its own session
(and the server's own last words), never another conversation's; only the one whose session's
lines name an exception carries it in its message. The checks that could not run because the
runtime was gone say that: not "the runtime keeps no audit stream", not "it was never asked".
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from simrun.scoring.dataset._files import load_dataset
from simrun.scoring.store._database import Store
from simrun.simulator.adapters._http import HttpRuntime
from simrun.simulator.adapters._process import ManagedProcess
from simrun.simulator.adapters._stdio import StdioRuntime
from tests.conftest import ROOT
from tests.fixtures.processes import leftovers
from tests.simulator.adapters.test_transports import stored

DYING = str(ROOT / "tests" / "fixtures" / "dying_runtime.py")
GOAL = "open-and-ask-date"           # its question is asked after the turn the server dies on
CONVERSATIONS = ("a-die", "b-fine", "c-fine", "d-fine")

pytestmark = pytest.mark.usefixtures("tagged")


def dataset(tmp_path: Path):
    personas, goals = tmp_path / "personas", tmp_path / "goals"
    personas.mkdir(parents=True)
    goals.mkdir()
    shutil.copy(ROOT / "personas" / "plain-paula.yaml", personas)
    text = (ROOT / "goals" / f"{GOAL}.yaml").read_text()
    for name in CONVERSATIONS:
        (goals / f"{name}.yaml").write_text(text.replace(f"id: {GOAL}", f"id: {name}"))
    return load_dataset(personas, goals)


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_each_conversation_in_flight_when_the_server_exits_says_so_with_its_own_stderr(tmp_path, transport):
    # Over stdio the others' turns wait in simrun for the one stream, in flight all the same.
    flags = ["--in-flight", "3" if transport == "http" else "0", "--die-turn", "2"]
    runtime = (HttpRuntime(command=[sys.executable, DYING, "http", "--port", "{port}", *flags], concurrency=4)
               if transport == "http" else StdioRuntime([sys.executable, DYING, "stdio", *flags]))
    _, _, ends, errors = stored(tmp_path / "d.duckdb", dataset(tmp_path), runtime, 1, 4)
    assert set(ends.values()) == {"runtime_error"} and len(ends) == 4
    sessions = {}
    for cid, raw in errors.items():
        error = json.loads(raw)
        assert error["turn"] == 2, error
        assert "4 conversations were in flight; this was one of them" in error["message"], error["message"]
        assert "while answering" not in error["message"]
        marked = set(re.findall(r"\[session (s-\d+)\]", error["stderr"]))
        assert len(marked) == 1, error["stderr"]              # its own lines, no other conversation's
        sessions[cid] = marked.pop()
        assert "dying-runtime: exiting with status 3" in error["stderr"]      # the server's own last words
        dying = cid.endswith("a-die/0")
        assert ("MemoryError: the planner ran out of memory" in error["message"]) == dying, error["message"]
        assert ("MemoryError" in error["stderr"]) == dying
    assert len(set(sessions.values())) == 4
    assert not leftovers(DYING)


def test_checks_that_could_not_run_because_the_runtime_was_gone_say_so(tmp_path):
    flags = ["--in-flight", "3", "--die-turn", "2"]
    runtime = HttpRuntime(command=[sys.executable, DYING, "http", "--port", "{port}", *flags], concurrency=4)
    stored(tmp_path / "d.duckdb", dataset(tmp_path), runtime, 1, 4)
    with Store(tmp_path / "d.duckdb") as store:
        run_id = store.run()["run_id"]
        audits = store.con.execute("SELECT reason FROM checks WHERE run_id = ? AND class = 'audit_gap'",
                                   [run_id]).fetchall()
        goals = store.con.execute("SELECT goal_detail FROM conversations WHERE run_id = ?", [run_id]).fetchall()
        reasons = [r for (r,) in store.con.execute("SELECT reason FROM checks WHERE run_id = ? AND reason IS NOT NULL",
                                                    [run_id]).fetchall()]
    assert len(audits) == 4 and len(goals) == 4
    # No check blames a feature the runtime may well have: it was gone (no store, no audit read).
    assert not [r for r in reasons if "exposes no store" in r or "keeps no" in r], reasons
    for (reason,) in audits:
        assert "keeps no audit stream" not in reason
        assert reason.startswith("no audit stream was read: the runtime was gone at turn 2 (turn: the server "
                                 "exited (status 3) while 4 conversations were in flight"), reason
    for (detail,) in goals:
        assert "it was never asked: the runtime was gone at turn 2" in detail, detail


def test_a_session_s_stderr_is_its_own_lines_and_the_server_s_never_another_session_s():
    process = ManagedProcess([sys.executable, "-c", "pass"])
    for sid in ("s-1", "s-10", "s-2"):
        process.session(sid)
    text = ("[session s-1] turn one\n[session s-10] turn ten\ns-2: KeyError: 'trip'\n"
            "server: shutting down\n[session s-1] ValueError: bad date\n")
    assert process.stderr_of("s-1", text) == "[session s-1] turn one\nserver: shutting down\n" \
                                            "[session s-1] ValueError: bad date\n"
    assert process.stderr_of("s-10", text) == "[session s-10] turn ten\nserver: shutting down\n"
    assert process.said_for("s-1", text) == "; its stderr says: ValueError: bad date"
    assert process.said_for("s-2", text) == "; its stderr says: KeyError: 'trip'"
    assert process.said_for("s-10", text) == "; its stderr says: server: shutting down"
    assert process.stderr_of(None, "only the server's\n") == "only the server's\n"
