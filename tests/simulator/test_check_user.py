"""check-user has a run's ledger and interruption rules: stopped by SIGTERM against a slow model
server, it keeps every call it made and the conversations it finished, says so, and the same
command finishes it, with a plan that says how long from the server's measured pace. A real
process, a fake model API on 127.0.0.1, stopped at a known point (the fake holds the next call)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import duckdb

SIMRUN = str(Path(sys.executable).with_name("simrun"))
USER = "openai:gpt-4.1-mini"
CHECK = [SIMRUN, "check-user", "--user", USER, "--budget", "1usd", "--concurrency", "2"]
HOLD_FROM = 16           # the server answers 16 calls, then holds the next ones


def read(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_a_check_stopped_by_sigterm_keeps_its_calls_and_conversations_and_resumes(project, slow_api):
    api, env = slow_api
    api.hold_from = HOLD_FROM
    proc = subprocess.Popen(CHECK, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    # Both conversations in flight wait on a held call: every call before them was answered.
    while api.held < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "the check never made its 17th call"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    answered = api.served
    api.hold_from = None

    checks = project / "simrun.check-user.duckdb"
    (run_id, status, spent), = read(checks, "SELECT run_id, status, spent_usd FROM runs")
    calls, total = read(checks, "SELECT count(*), coalesce(sum(cost_usd), 0) FROM model_calls")[0]
    finished = read(checks, "SELECT count(*) FROM conversations")[0][0]
    assert status == "interrupted" and calls == answered == HOLD_FROM       # every call answered is kept
    assert Decimal(spent) == Decimal(total) > 0 and 1 <= finished < 20
    said = re.search(r"interrupted: (\d+) finished conversation\(s\) and (\d+) model call\(s\) \(\$([\d.]+)\) of "
                     rf"{USER} are kept in \S*simrun.check-user.duckdb \(run {run_id}\); run the same command again "
                     "to finish it", err)
    assert said and (int(said.group(1)), int(said.group(2))) == (finished, calls), err
    assert Decimal(said.group(3)) == Decimal(total).quantize(Decimal("0.000001"))
    project_db = project / "simrun.duckdb"
    assert read(project_db, "SELECT count(*) FROM user_checks") == [(0,)]    # no measure of half a check

    done = subprocess.run(CHECK, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    plan = done.stdout.splitlines()[0]
    assert f"finishing run {run_id} ({finished} conversations stored)" in plan
    assert re.search(rf"about \d+ calls, about [\d ]+(s|min) at the server's measured pace \([\d.]+s a call over "
                     rf"{calls} calls\)", plan), plan
    assert re.search(r"^\[\d+/\d+\] goal reached", done.stdout, re.M)          # the run's progress lines
    runs = read(checks, "SELECT run_id, status FROM runs")
    assert runs == [(run_id, "finished")]
    ids = [r[0] for r in read(checks, "SELECT conversation_id FROM conversations")]
    assert len(ids) == len(set(ids)) == 20
    # Every call answered, but the two held ones: answered after the stopped check had gone.
    assert read(checks, "SELECT count(*) FROM model_calls")[0][0] == api.served - 2
    (conversations, cost), = read(project_db, "SELECT conversations, cost_usd FROM user_checks")
    assert conversations == 20 and Decimal(cost) > 0
    assert read(project_db, "SELECT count(*) FROM runs") == [(0,)]     # the check is no run of the project
