"""A run's git commit, as recorded and as shown: `git describe --dirty` marks a work tree that
differs from its commit, and so does simrun, so that a run is never credited to a commit whose
tree it did not test."""

from __future__ import annotations

DIRTY = "-dirty"


def recorded_commit(commit: str, dirty: bool) -> str:
    """The commit a run records: `<sha>-dirty` when the work tree's tracked files differ from it."""
    return commit + DIRTY if dirty else commit


def short_commit(commit: str | None, length: int) -> str | None:
    """The first `length` characters of a recorded commit, keeping its `-dirty` mark."""
    if not commit:
        return None
    dirty = commit.endswith(DIRTY)
    sha = commit.removesuffix(DIRTY) if dirty else commit
    return sha[:length] + (DIRTY if dirty else "")
