"""The names of the classes a conversation is judged on (CLASSES.md), in the order every table shows them.

The judge (`simrun.scoring.checks`) holds the checks behind these names; the store counts their
rates, the gate tests them, and the settings (`simrun._settings`) name them in
budgets.toml's release ceilings. The names live here, at the bottom, so that the settings are
checked against them without importing the judge; tests/scoring/test_classes.py holds the
judge's checks to exactly these names.
"""

from __future__ import annotations

from typing import Literal, get_args

# The conversation made no progress: the checks of simrun.scoring.checks._progress, then the
# simulated user's own failure (simrun.scoring.checks._simulated_user).
ProgressClass = Literal["dead_end", "loop", "refused_offer", "not_understood", "unanswered", "simulator_error"]
# What must never happen, not even once: the checks of simrun.scoring.checks._guarantees.
Guarantee = Literal["wrong_record", "stale_click", "phantom_receipt", "card_not_actionable", "refusal_with_hedge",
                    "audit_gap", "integrity_leak"]
# What a release criterion may put a ceiling on: every judged class, and the runtime's own failure.
CeilingClass = Literal[ProgressClass, Guarantee, "runtime_error"]

PROGRESS_CLASSES: tuple[str, ...] = get_args(ProgressClass)
GUARANTEES: tuple[str, ...] = get_args(Guarantee)
ALL_CLASSES: tuple[str, ...] = (*PROGRESS_CLASSES, *GUARANTEES)
CEILING_CLASSES: tuple[str, ...] = get_args(CeilingClass)
