"""What the security tests share: the `simrun` CLI in a copy of the demo project."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from simulator.cli import app


@pytest.fixture()
def cli(project, monkeypatch):
    """`simrun ARGS` in the project folder: (exit code, output as one string)."""
    monkeypatch.chdir(project)
    runner = CliRunner()

    def invoke(*args: str):
        result = runner.invoke(app, list(args))
        return result.exit_code, result.output

    return invoke


def one_line_error(output: str) -> str:
    """The single `error: ...` line a usage error prints; fails if there is more (a traceback)."""
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0]
