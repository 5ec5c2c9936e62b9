"""The step summary of GitHub Actions: where a verdict is written for the people reading a CI job."""

from __future__ import annotations

import os

from simrun._writing import append_file


def write_step_summary(text: str) -> None:
    """Append `text` to $GITHUB_STEP_SUMMARY, when GitHub Actions gives one."""
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        append_file(summary_file, text + "\n", what="the step summary")
