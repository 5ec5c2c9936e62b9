"""The step summary of GitHub Actions: where a verdict is written for the people reading a CI job."""

from __future__ import annotations

import os


def write_step_summary(text: str) -> None:
    """Append `text` to $GITHUB_STEP_SUMMARY, when GitHub Actions gives one."""
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
