"""The ledger is exact on every path: `runs.spent` equals the sum of `model_calls` after Ctrl-C,
SIGTERM, a budget cut, and kill -9 followed by `resume`. Every call that was paid for is stored,
also when its conversation was cut off. Real processes, a fake model API on 127.0.0.1."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from tests.fixtures.model_api import FakeModelAPI

SIMRUN = str(Path(sys.executable).with_name("simrun"))
USER = "openai:gpt-4.1-mini"


@pytest.fixture()
def project(project):
    """Three personas x four goals: 48 conversations at -n 4, a few model calls each."""
    for path in (project / "personas").glob("*.yaml"):
        if path.stem not in ("plain-paula", "terse-tom", "wordy-wendy"):
            path.unlink()
    for path in (project / "goals").glob("*.yaml"):
        if path.stem not in ("single-add-bag", "cancel-trip", "new-trip-full", "rename-trip"):
            path.unlink()
    return project


def ledger(db: Path) -> dict:
    con = duckdb.connect(str(db), read_only=True)
    try:
        spent, status = con.execute("SELECT spent_usd, status FROM runs").fetchone()
        calls, total = con.execute("SELECT count(*), coalesce(sum(cost_usd), 0) FROM model_calls").fetchone()
        cut_off = con.execute("SELECT count(*) FROM model_calls m WHERE conversation_id <> '(output probe)' AND "
                              "NOT EXISTS (SELECT 1 FROM conversations c WHERE c.run_id = m.run_id AND "
                              "c.conversation_id = m.conversation_id)").fetchone()[0]
        ids = [r[0] for r in con.execute("SELECT conversation_id FROM conversations").fetchall()]
        runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        con.close()
    return {"spent": Decimal(spent), "calls": calls, "sum": Decimal(total), "status": status,
            "calls_of_cut_conversations": cut_off, "conversations": ids, "runs": runs}


def start(project: Path, env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([SIMRUN, "--user", USER, "-n", "4", "--concurrency", "4", *args], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def after_calls(api: FakeModelAPI, n: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while api.served < n and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be stopped: " + proc.stdout.read()


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 130)])
def test_an_interrupted_run_stores_every_call_it_paid_for(project, slow_api, sig, code):
    api, env = slow_api
    proc = start(project, env)
    after_calls(api, 25, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    state = ledger(project / "simrun.duckdb")
    assert state["status"] == "interrupted" and state["spent"] > 0
    assert state["spent"] == state["sum"]
    # Conversations cut off in flight left their calls: stored, without a conversation row.
    assert state["calls_of_cut_conversations"] > 0


def test_a_budget_cut_run_stores_every_call_it_paid_for(project, slow_api):
    api, env = slow_api
    proc = start(project, env, "--budget", "0.02usd")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (1, 4), out + err          # cut short: never a pass (incomplete, or failed)
    state = ledger(project / "simrun.duckdb")
    assert state["status"] == "budget_spent" and Decimal("0") < state["spent"] <= Decimal("0.02")
    assert state["spent"] == state["sum"] and state["calls"] == api.served


def test_kill_9_then_resume_leaves_spent_equal_to_the_stored_calls(project, slow_api):
    api, env = slow_api
    api.hold_from = 40                     # the run holds after 40 calls...
    proc = start(project, env)
    deadline = time.monotonic() + 60
    while not api.held:
        assert time.monotonic() < deadline and proc.poll() is None, "the run never made its 41st call"
        time.sleep(0.05)
    # ...until a periodic flush (every FLUSH_S) has written after the hold: on a loaded machine the
    # writer thread may take longer than a fixed sleep, so the database's files are watched.
    held_at = time.time()
    files = [project / "simrun.duckdb", project / "simrun.duckdb.wal"]
    while not any(f.exists() and f.stat().st_mtime > held_at + 0.05 for f in files):
        assert time.monotonic() < deadline + 60 and proc.poll() is None, "no flush after the hold"
        time.sleep(0.05)
    time.sleep(0.5)                        # the flush's transaction ends after its first write
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    api.hold_from = None
    killed = ledger(project / "simrun.duckdb")
    assert killed["status"] == "running" and killed["calls"] > 0   # paid calls stored before the kill
    finish = subprocess.run([SIMRUN, "resume"], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert finish.returncode in (0, 1), finish.stdout + finish.stderr
    state = ledger(project / "simrun.duckdb")
    assert state["status"] == "finished" and state["runs"] == 1
    assert state["spent"] == state["sum"] and state["calls"] >= killed["calls"]
    assert len(state["conversations"]) == len(set(state["conversations"])) == 3 * 4 * 4
