"""Usage errors are never tracebacks: a file simrun cannot write, a database it cannot read, a
flag it cannot use, each is one line and exit 2 (exit 1 stays "a guarantee broke" or "the gate
failed", so that CI can tell the cases apart)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.conftest import one_line_error

SIMRUN = str(Path(sys.executable).with_name("simrun"))
NOWHERE = "/proc/simrun-cannot-write-here"      # refused even to root


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("usage")
    root = Path(__file__).parents[2]
    done = subprocess.run([SIMRUN, "--personas", str(root / "personas"), "--goals", str(root / "goals"), "-n", "1"],
                          cwd=folder, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.parametrize("args", [
    ["export", "latest", "--out", f"{NOWHERE}/b.json"],
    ["baseline", "bless", "latest", "--out", f"{NOWHERE}.json"],
    ["report", "latest", "--reports", NOWHERE],
    ["gate", "--baseline", "latest", "--candidate", "latest", "--markdown", f"{NOWHERE}/g.md"],
    ["show", "latest", "no/such/conversation"],
    ["runs", "--db", "/etc/hostname"],
    ["--budget", "5usd", "--db", f"{NOWHERE}/x.duckdb"],
])
def test_a_command_that_cannot_do_its_job_says_why_in_one_line(stored_run, args):
    done = subprocess.run([SIMRUN, *args], cwd=stored_run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    one_line_error(done.stderr)
    assert "Traceback" not in done.stdout + done.stderr
