"""What the security tests share: how a usage error must look."""

from __future__ import annotations


def one_line_error(output: str) -> str:
    """The single `error: ...` line a usage error prints; fails if there is more (a traceback)."""
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0]
