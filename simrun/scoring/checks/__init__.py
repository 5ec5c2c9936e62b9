"""The judge: every class and guarantee of CLASSES.md, as pure functions of the evidence.

    scorer          score(transcript, goal, persona) -> Scorecard: every check, one verdict each
    goal            was the goal reached? decided on the store's state
    progress        the ways a conversation stops moving forward (dead_end, loop, unanswered, ...)
    guarantees      what must never happen (wrong_record, phantom_receipt, integrity_leak, ...)
    stale           stale_click: what a click on an expired offer caused, in any later turn
    audit           audit_gap: every turn leaves its own turn event in the audit stream
    simulated_user  simulator_error: the simulated user broke its brief, kept apart
    offers          following an offer to the events it led to
    answers         does a reply carry a value from the store, in the words people write?
    evidence        reading turn results and store snapshots, absent fields kept absent
    goal_names      goals that name fields, types or operations no store held (the goal's problem)

Imports: the shared vocabulary of `simrun.scoring` and `simrun.scoring.dataset`, nothing else.
No I/O and no model calls: the judge imports neither the simulator, nor the store, the gate or
the pages, so a transcript scores the same wherever it is scored.
"""

from __future__ import annotations

from simrun.scoring.checks._evidence import MISSING, get, relates, shown
from simrun.scoring.checks._goal import goal_status
from simrun.scoring.checks._goal_names import Seen, goal_problems
from simrun.scoring.checks._scorer import ALL_CLASSES, GUARANTEES, SCORER_VERSION, kind_of, score
from simrun.scoring.checks._simulated_user import user_turn_fault

__all__ = [
    "ALL_CLASSES",
    "GUARANTEES",
    "MISSING",
    "SCORER_VERSION",
    "Seen",
    "get",
    "goal_problems",
    "goal_status",
    "kind_of",
    "relates",
    "score",
    "shown",
    "user_turn_fault",
]

if __name__ != "simrun.scoring.checks":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.scoring.checks; import it as `simrun.scoring.checks`, not `{__name__}`")
