"""What the security tests share: how a usage error must look, a finished run to attack, and a
secret file that must never be read."""

from __future__ import annotations

from pathlib import Path

import pytest

# What the secret file holds: a test looks for it anywhere simrun writes or prints (it must never land).
SECRET = "TOP-SECRET-9f2c41"


def one_line_error(output: str) -> str:
    """The single `error: ...` line a usage error prints; fails if there is more (a traceback)."""
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0]


@pytest.fixture()
def one_run(after, project) -> Path:
    """A finished demo run (one repetition) in project/simrun.duckdb."""
    run, = after(("--budget", "5usd", "-n", "1"))
    assert run.exit_code == 0, run.output
    return project / "simrun.duckdb"


@pytest.fixture()
def secret_file(tmp_path: Path) -> Path:
    """A file outside the project holding SECRET: what a hostile query or store would read."""
    path = tmp_path / "secret.txt"
    path.write_text(SECRET + "\n")
    return path
