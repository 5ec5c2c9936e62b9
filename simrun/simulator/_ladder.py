"""The evidence ladder: what a runtime gives as data, and which classes that lets simrun check.

Each rung adds evidence to the one below it:

    0 reply only               the reply's text
    1 tool events              committed and refused commands: the protocol's state events, or tool
                               spans read from the runtime's OpenTelemetry traces
    2 records                  the records of its store: the protocol's state, or a state hook
    3 asks, offers and cards   the turn result's protocol fields (ask, next_steps, card, taken_offer,
                               understood, mentions, receipts, answer, verdicts)
    4 audit                    the runtime's own turn log

A runtime is at the highest rung whose evidence, and every lower rung's, it gives. A class is
checked in full once the evidence it needs (NEEDS) is given; some are decided in part lower down
(PARTLY), and the rest of their turns are UNVERIFIABLE, each with its reason, never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOL_FIELDS = ("ask", "next_steps", "card", "taken_offer", "understood", "mentions", "receipts", "answer",
                   "verdicts")
LADDER: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("reply only", ("reply",), "answer each turn with a reply"),
    ("tool events", ("events",),
     "send the tool calls' OpenTelemetry spans (GenAI execute_tool, OpenInference or OpenLLMetry tool spans) "
     "to simrun's receiver and name the write tools' record argument in [runtime.tools]; or give events "
     "through the protocol's state"),
    ("records", ("records",), "give the session's records: a state hook (runtime.state), or the protocol's state"),
    ("asks, offers and cards", PROTOCOL_FIELDS,
     "return a turn-result object with ask, next_steps, card and the other protocol fields (docs/protocol.md)"),
    ("audit", ("audit",), "keep a turn log and answer the protocol's audit operation"),
)

# The evidence each check reads in full (CLASSES.md). wrong_record needs only events: the record
# a turn addressed comes from the goal step the user's turn serves when nothing else names it.
NEEDS: dict[str, tuple[str, ...]] = {
    "dead_end": ("ask", "next_steps", "card"),
    "loop": ("ask",),
    "refused_offer": ("taken_offer", "next_steps", "card", "events"),
    "not_understood": ("understood",),
    "unanswered": ("answer", "records"),
    "wrong_record": ("events",),
    "stale_click": ("next_steps", "card", "events"),
    "phantom_receipt": ("receipts", "events"),
    "card_not_actionable": ("mentions", "card", "next_steps"),
    "refusal_with_hedge": ("verdicts",),
    "audit_gap": ("audit",),
    "integrity_leak": ("verdicts",),
    "goal_reached": ("events", "records"),
}
# Classes decided in part below the rung that checks them in full: (rung, what is decided there).
PARTLY: dict[str, tuple[int, str]] = {
    "integrity_leak": (0, "forbidden phrases, from the reply's text (a required refusal needs verdicts)"),
    "dead_end": (0, "a reply that ends in a question is a way forward"),
    "goal_reached": (1, "success.sql over events (success.records needs records)"),
    "unanswered": (2, "a reply that carries the store's value answered"),
}


@dataclass(frozen=True)
class Rung:
    level: int
    name: str
    given: bool                  # the runtime gives all of this rung's evidence
    lacking: tuple[str, ...]     # what of it the runtime does not give
    checks: tuple[str, ...]      # classes checked in full from this rung up
    partly: tuple[str, ...]      # "class: what", decided in part from this rung
    how: str                     # what a runtime does to give it


def rungs(given: set[str]) -> list[Rung]:
    """Every rung, with what `given` (names of evidence the runtime gives) makes of it."""
    found: list[Rung] = []
    below: set[str] = set()
    for level, (name, evidence, how) in enumerate(LADDER):
        upto = below | set(evidence)
        checks = tuple(cls for cls, needs in NEEDS.items() if set(needs) <= upto and not set(needs) <= below)
        partly = tuple(f"{cls}: {what}" for cls, (at, what) in PARTLY.items() if at == level)
        found.append(Rung(level, name, set(evidence) <= given, tuple(e for e in evidence if e not in given),
                          checks, partly, how))
        below = upto
    return found


def level_of(given: set[str]) -> int:
    """The highest rung reached with every rung below it."""
    level = 0
    for rung in rungs(given)[1:]:
        if not rung.given:
            break
        level = rung.level
    return level
