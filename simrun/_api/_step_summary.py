"""The step summary of GitHub Actions: where a verdict is written for the people reading a CI job.

Only when asked: `simrun.run()` and `simrun.gate()` never write it by themselves; the command
line does, after each run and gate, and so may a caller's own script."""

from __future__ import annotations

import os
from pathlib import Path

from simrun._writing import append_file
from simrun.scoring.gate import RunVerdict, markdown


def write_step_summary(verdict: RunVerdict) -> Path | None:
    """Append the verdict, as Markdown, to $GITHUB_STEP_SUMMARY when GitHub Actions gives one;
    the file written, or None."""
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary_file:
        return None
    return append_file(summary_file, markdown(verdict) + "\n", what="the step summary")
