"""Scoring one conversation: every class and guarantee of CLASSES.md, as pure functions.

No I/O, no model calls: the same transcript always gives the same scorecard, which is what
lets a stored run be rescored later and compared across scorer versions.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from simrun import _secrets as secrets
from simrun._classes import ALL_CLASSES as ALL_CLASSES
from simrun._classes import GUARANTEES as GUARANTEES
from simrun._classes import PROGRESS_CLASSES as PROGRESS_CLASSES
from simrun._transcript import CheckResult, Scorecard, Transcript
from simrun.scoring.checks._goal import goal_status
from simrun.scoring.checks._guarantees import GUARANTEE_CHECKS
from simrun.scoring.checks._offers import follow
from simrun.scoring.checks._progress import PROGRESS_CHECKS
from simrun.scoring.checks._simulated_user import simulator_error
from simrun.scoring.dataset import Goal, Persona

# ALL_CLASSES, GUARANTEES and PROGRESS_CLASSES, imported above: the classes' names live at the
# bottom layer (simrun._classes), where the settings name them too, and the judge exports
# them as its own (tests/scoring/test_classes.py holds its checks to exactly these names).

# The checks that read every take of an offer (`follow`), given it by the scorer as `takes`.
_READS_TAKES = frozenset(name for name, check in {**PROGRESS_CHECKS, **GUARANTEE_CHECKS}.items()
                         if "takes" in inspect.signature(check).parameters)

# Bump when a check's meaning changes: runs scored by different versions are not compared.
SCORER_VERSION = "4"


def score(transcript: Transcript, goal: Goal, persona: Persona) -> Scorecard:
    """The scorecard of one conversation, from the transcript alone, whoever scores it.

    No answer of the conversation loop is taken in (its goal checks, its user-turn checks): the
    loop may keep what it works out around the judge, never pass it through. What is worth
    keeping between the loop's checks and these is kept by value at the judge's own boundaries:
    a success query's answer (`sql_holds`: the query and a digest of the store's content), a
    message's reading (`user_turn_fault`: its text), what a goal alone gives (`per_goal`)."""
    reached, why = goal_status(goal, transcript, transcript.final_state)
    checks: dict[str, CheckResult] = {}
    failed: list[str] = []
    try:
        shared = {"takes": follow(transcript)}     # read by three checks: worked out once, here
    except Exception:
        shared = {}     # a shape it cannot read: each check that reads it fails on it, in its own guard
    for name, check in {**PROGRESS_CHECKS, **GUARANTEE_CHECKS}.items():
        checks[name] = _guarded(name, failed, check, transcript, goal, persona,
                                **(shared if name in _READS_TAKES else {}))
    checks["simulator_error"] = _guarded("simulator_error", failed, simulator_error, transcript, goal, persona,
                                         reached)
    if failed:
        why += "; UNVERIFIABLE, the check failed on this transcript: " + "; ".join(failed)
    if not any(turn.result is not None for turn in transcript.turns):
        reached, why, checks = _nothing_observed(transcript, checks)
    end = transcript.end
    # A user that broke its brief taints the conversation, however it ended, unless the runtime
    # failed first (that stays the runtime's). The loop catches most such faults at once; a few
    # (a contradiction never corrected) show only over the whole transcript.
    if checks["simulator_error"].findings and end not in ("runtime_error", "provider_error", "budget_cut"):
        end = "simulator_error"
    return Scorecard(goal_reached=reached, goal_detail=why, turns=len(transcript.turns),
                     end=end, checks=checks)


def _nothing_observed(transcript: Transcript, checks: dict[str, CheckResult]
                      ) -> tuple[None, str, dict[str, CheckResult]]:
    """A conversation in which the runtime answered no turn decides nothing: every class it did
    not see fire, and its goal, are UNVERIFIABLE with the reason. A check finds no fault in turns
    that never happened, and "clean" would claim it looked; a store the runtime never answered
    over says nothing about what a conversation reached. What did fire (the runtime's failure is
    its end, the user's own fault its simulator_error) stays fired: that was observed."""
    sent = len(transcript.turns)
    why = (f"no turn completed: the conversation ended ({transcript.end}) before the runtime answered "
           f"any of its {sent} turn(s), so nothing was observed to decide it" if sent else
           f"no turn completed: the conversation ended ({transcript.end}) before a turn was sent, "
           "so nothing was observed to decide it")
    return None, f"UNVERIFIABLE: {why}", {
        name: check if check.findings else CheckResult(name, unverifiable_turns=max(1, sent), reason=why)
        for name, check in checks.items()}


def _guarded(name: str, failed: list[str], check: Callable[..., CheckResult], transcript: Transcript,
             *args: Any, **kwargs: Any) -> CheckResult:
    """A check that cannot read a transcript (a shape no test foresaw) makes its class
    UNVERIFIABLE for this conversation, never a pass, and says so; the other checks still run."""
    try:
        return check(transcript, *args, **kwargs)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {secrets.cut(str(exc), 200)}")
        return CheckResult(name, unverifiable_turns=max(1, len(transcript.turns)),
                           reason=f"the check failed on this transcript: {type(exc).__name__}")


def kind_of(cls: str) -> str:
    if cls == "simulator_error":
        return "simulator"
    return "guarantee" if cls in GUARANTEE_CHECKS else "progress"
