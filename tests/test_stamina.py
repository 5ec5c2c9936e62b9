"""Stamina: resume after kill -9, sharded runs merged, two writers on one file."""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from simrun.cli._main import app
from tests.conftest import ROOT
from tests.fixtures.gated_runtime import gate

SIMRUN = str(Path(sys.executable).with_name("simrun"))
FAULTS = 'faults = "loop=0.2,phantom_receipt=0.1,dead_end=0.1"'


def with_faults(project: Path) -> None:
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace('# faults = "loop=0.2,phantom_receipt=0.1"', FAULTS))


def snapshot(db: Path) -> tuple:
    """Each conversation's transcript and findings, by conversation id: what must not depend on
    how the run was cut up."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        run_id, = con.execute("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()
        rows = lambda sql: con.execute(sql, [run_id]).fetchall()  # noqa: E731
        return (
            rows("SELECT conversation_id, end_reason, goal_reached, turns FROM conversations "
                 "WHERE run_id = ? ORDER BY 1"),
            rows("SELECT conversation_id, turn, user_turn, result, state FROM turns WHERE run_id = ? ORDER BY 1, 2"),
            rows("SELECT conversation_id, turn, class, detail FROM findings WHERE run_id = ? ORDER BY 1, 2, 3, 4"),
            rows("SELECT conversation_id, class, status, occurrences FROM checks WHERE run_id = ? ORDER BY 1, 2"),
        )
    finally:
        con.close()


def test_kill_9_at_random_points_then_resume_keeps_each_conversation_once(project, monkeypatch):
    with_faults(project)
    monkeypatch.chdir(project)
    cli = CliRunner()
    args = ["-n", "4", "--concurrency", "4"]     # a run of a second or two: the first kills fall in it
    rng = random.Random(7)
    kills = mid_run = 0
    finished = False
    for _ in range(4):
        proc = subprocess.Popen([SIMRUN, *args], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.readline()              # the banner: the run has begun
        time.sleep(rng.uniform(0.05, 0.8))  # then a random point in it
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        if (project / "simrun.duckdb").exists():
            listing = cli.invoke(app, ["runs"])
            assert "running" not in listing.output, listing.output     # killed, it says so
            mid_run += killed and "killed" in listing.output
            # A resumed run can finish before the next kill (the harness is quick): then it is
            # done, and running the same again would be a new run, not this one resumed.
            finished = " finished " in listing.output
            if finished:
                break
    assert kills >= 1 and mid_run >= 1, (kills, mid_run)     # a resume of a killed run is what is tested
    # Finished, and run again uninterrupted, in this process: what is tested is the killed
    # process's, not these two's start.
    if not finished:
        finish = cli.invoke(app, args)
        assert finish.exit_code in (0, 1), finish.output
    con = duckdb.connect(str(project / "simrun.duckdb"), read_only=True)
    runs = con.execute("SELECT run_id, status FROM runs").fetchall()
    ids = con.execute("SELECT conversation_id FROM conversations").fetchall()
    con.close()
    assert len(runs) == 1 and runs[0][1] == "finished"         # one run, resumed, never restarted
    assert len(ids) == len(set(ids)) == 7 * 10 * 4              # each cell exactly once
    resumed = snapshot(project / "simrun.duckdb")

    fresh = project / "fresh"
    fresh.mkdir()
    cli.invoke(app, [*args, "--db", str(fresh / "u.duckdb"), "--reports", str(fresh)])
    assert snapshot(fresh / "u.duckdb") == resumed             # the same findings as an uninterrupted run


def test_sharded_then_merged_equals_unsharded(project, monkeypatch):
    with_faults(project)
    cli = CliRunner()
    monkeypatch.chdir(project)
    whole = cli.invoke(app, ["-n", "2", "--db", "whole.duckdb"])
    assert whole.exit_code in (0, 1)
    for i in range(3):
        shard = cli.invoke(app, ["-n", "2", "--shard", f"{i}/3", "--db", f"shard{i}.duckdb"])
        assert shard.exit_code in (0, 1), shard.output
    merged = cli.invoke(app, ["merge", "shard0.duckdb", "shard1.duckdb", "shard2.duckdb", "--out", "merged.duckdb"])
    assert merged.exit_code == whole.exit_code, merged.output
    assert snapshot(project / "merged.duckdb") == snapshot(project / "whole.duckdb")
    bad = cli.invoke(app, ["merge", "shard0.duckdb", "shard1.duckdb", "--out", "partial.duckdb"])
    assert bad.exit_code == 2 and "expected shards 0..2 of 3" in bad.output
    con = duckdb.connect(str(project / "shard2.duckdb"))
    con.execute("UPDATE runs SET status = 'running'")    # as a shard killed mid-run leaves it
    con.close()
    unfinished = cli.invoke(app, ["merge", "shard0.duckdb", "shard1.duckdb", "shard2.duckdb", "--out", "u.duckdb"])
    assert unfinished.exit_code == 2 and "shard2.duckdb: shard 2/3" in unfinished.output
    assert "simrun resume --db shard2.duckdb" in unfinished.output and "--partial" in unfinished.output
    joined = cli.invoke(app, ["merge", "shard0.duckdb", "shard1.duckdb", "shard2.duckdb", "--out", "p.duckdb",
                              "--partial"])
    assert joined.exit_code in (0, 1), joined.output
    con = duckdb.connect(str(project / "p.duckdb"), read_only=True)
    assert con.execute("SELECT status, conversations_planned FROM runs").fetchone() == ("interrupted", 7 * 10 * 2)


@pytest.mark.parametrize("text", ["3/3", "a/b", "-1/2", "1/0"])
def test_bad_shards_are_refused(project, monkeypatch, text):
    monkeypatch.chdir(project)
    result = CliRunner().invoke(app, ["--shard", text])
    assert result.exit_code == 2 and "--shard" in result.output


def holds_the_lock(db: Path) -> bool:
    try:
        duckdb.connect(str(db), read_only=True).close()
    except duckdb.Error as exc:
        return "lock" in str(exc).lower()
    return False


GATED = ROOT / "tests" / "fixtures" / "gated_runtime.py"


def interrupted_at_the_gate(args: list[str], project: Path) -> subprocess.Popen:
    """A run stopped by Ctrl-C while its next conversations wait at the gate, then the gate
    released, so that the same command finishes it."""
    proc = subprocess.Popen(args, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (project / "waiting").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the run never reached the gate"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    (project / "release").touch()
    return proc


def test_a_second_writer_gets_a_clear_message_and_nothing_is_corrupted(project):
    # The first run holds the file until the second has tried it: its runtime starts no
    # conversation until then, rather than the run being long enough to outlast the second
    # one's start on a busy machine.
    gate(project, open=0)
    first = subprocess.Popen([SIMRUN, "-n", "2"], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    first.stdout.readline()   # the banner: the run begins
    deadline = time.monotonic() + 30
    while not holds_the_lock(project / "simrun.duckdb"):
        assert time.monotonic() < deadline and first.poll() is None, "the first run never opened its database"
        time.sleep(0.05)
    second = subprocess.run([SIMRUN, "-n", "1"], cwd=project, capture_output=True, text=True, timeout=60)
    (project / "release").touch()
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert second.returncode == 2 and "another process is writing to it" in second.stderr
    con = duckdb.connect(str(project / "simrun.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM conversations").fetchone()[0] == 7 * 10 * 2
    assert con.execute("SELECT status FROM runs").fetchall() == [("finished",)]


def test_resume_command_finishes_an_interrupted_run(project):
    gate(project, open=40)
    assert interrupted_at_the_gate([SIMRUN, "-n", "2"], project).returncode == 130
    result = subprocess.run([SIMRUN, "resume"], cwd=project, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert re.search(r"resumed run r\S+: \d+ conversations were stored already", result.stdout), result.stdout
    con = duckdb.connect(str(project / "simrun.duckdb"), read_only=True)
    assert con.execute("SELECT count(DISTINCT conversation_id), count(*) FROM conversations").fetchone() == (140, 140)


def test_a_run_over_http_that_simrun_started_resumes_though_its_server_got_a_new_port(project):
    server = f"{sys.executable} {GATED} --port {{port}} --open 40"
    http = ["--transport", "http", "--runtime-command", server, "-n", "2"]
    assert interrupted_at_the_gate([SIMRUN, *http], project).returncode == 130
    again = subprocess.run([SIMRUN, *http], cwd=project, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "resumed run" in again.stdout
    con = duckdb.connect(str(project / "simrun.duckdb"), read_only=True)
    assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM runs").fetchone() == (1, 1)
    assert con.execute("SELECT count(DISTINCT conversation_id), count(*) FROM conversations").fetchone() == (140, 140)


def test_resume_finishes_the_run_it_is_given_or_says_why_it_cannot(project):
    gate(project, open=40)
    interrupted_at_the_gate([SIMRUN, "-n", "2"], project)
    done = subprocess.run([SIMRUN, "-n", "1"], cwd=project, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0      # a finished run, newer than the interrupted one
    con = duckdb.connect(str(project / "simrun.duckdb"), read_only=True)
    interrupted, = con.execute("SELECT run_id FROM runs WHERE status = 'interrupted'").fetchone()
    con.close()
    # The newest run is finished: bare `resume` finishes the newest unfinished one instead.
    result = subprocess.run([SIMRUN, "resume"], cwd=project, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and f"resumed run {interrupted}" in result.stdout, result.stderr
    again = subprocess.run([SIMRUN, "resume"], cwd=project, capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "every run in it is finished" in again.stderr
