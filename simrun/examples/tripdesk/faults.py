"""Named faults planted in the reference runtime, so that the scorer can be proven right.

Each fault breaks exactly one class or guarantee of CLASSES.md. A fault has a rate: at the start
of a session a seeded draw (fault seed × session seed × fault name) decides whether this
conversation carries it, and if so it fires once, at the first turn where it can show. Nothing
else is random in the runtime, so until that turn a faulted conversation is byte-for-byte the
clean one. That is what lets a test say *exactly which* conversations must be reported.

The runtime logs, per fault, every conversation where the fault could have shown (`eligible`)
and every one where it did (`planted`), whether or not the fault was drawn; and, per class of the
README, every conversation where it did what the class describes (`manifested`), planted or
arising of itself (faults that meet in one conversation can do that): the ground truth the scorer
is checked against.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

FAULTS: dict[str, str] = {
    "dead_end": "dead_end: a reply with no ask, no next step, no card, not ending on a question",
    "loop": "loop: the answered ask is asked again, with no repeat_reason",
    "refused_offer": "refused_offer: a next step offered without a dry run, refused when taken",
    "not_understood": "not_understood: a readable message answered by a stub turn",
    "unanswered": "unanswered: a question the store can answer is answered 'unavailable'",
    "wrong_record": "wrong_record: a committed write lands on another trip than the addressed one",
    "stale_click": "stale_click: a click on an offer from an earlier turn is carried out",
    "stale_click_ask": "stale_click: a click on an expired offer is honoured through an ask: which trip "
                       "(and what else it lacks), even while another ask is pending; it commits when "
                       "answered, the event naming no offer",
    "phantom_receipt": "phantom_receipt: the reply reports an event the store does not hold",
    "card_not_actionable": "card_not_actionable: the reply names a card it does not send",
    "refusal_with_hedge": "refusal_with_hedge: a turn both refuses and hedges",
    "audit_gap": "audit_gap: a turn leaves no turn event in the audit stream",
    "audit_misfiled": "audit_gap: turn k-1's turn event filed again under k, and turn k's own left out",
    "forbidden_phrase": "integrity_leak: a reply says an internal note the goal forbids",
    "drop_refusal": "integrity_leak: a refusal the goal requires is not given",
    "crash": "runtime_error: the runtime raises mid-turn",
}

FORBIDDEN_NOTE = "internal note: fare basis YLOWUS, waiver code W-77"


class UnknownFault(ValueError):
    pass


def parse_faults(spec: dict[str, float] | str | None) -> dict[str, float]:
    """`{"loop": 0.2}` or `"loop=0.2,crash=0.05"` -> validated rates."""
    if not spec:
        return {}
    if not isinstance(spec, (str, dict)):
        raise UnknownFault(f"faults must be a string like 'loop=0.2,crash=0.05' or a table, got {spec!r}")
    if isinstance(spec, str):
        pairs = [item.split("=", 1) for item in spec.split(",") if item.strip()]
        try:
            spec = {name.strip(): float(rate) for name, rate in pairs}
        except ValueError as exc:
            raise UnknownFault(f"faults must look like 'loop=0.2,crash=0.05', got {spec!r}") from exc
    for name, rate in spec.items():
        if name not in FAULTS:
            raise UnknownFault(f"unknown fault {name!r}; known faults: {', '.join(FAULTS)}")
        if not isinstance(rate, (int, float)) or not 0.0 <= float(rate) <= 1.0:
            raise UnknownFault(f"fault {name!r}: rate must be between 0 and 1, got {rate}")
    return {name: float(rate) for name, rate in spec.items()}


@dataclass
class FaultLog:
    """Ground truth: which conversations drew each fault, could show it, and did."""

    eligible: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    planted: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    drawn: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    manifested: dict[str, list[dict[str, Any]]] = field(default_factory=dict)   # by class, not by fault

    def keys(self, fault: str, which: str = "planted") -> set[tuple[str, str, int]]:
        """The conversations of a fault (or, `which="manifested"`, of a class)."""
        rows = getattr(self, which).get(fault, [])
        return {(row["persona"], row["goal"], row["seed"]) for row in rows}


@dataclass
class SessionFaults:
    """The faults drawn for one conversation; each fires at most once."""

    rates: dict[str, float]
    seed: int
    session_seed: int
    persona: str
    goal: str
    log: FaultLog
    drawn: set[str] = field(init=False)
    seen: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.drawn = {
            name for name, rate in self.rates.items()
            if random.Random(f"{self.seed}:{self.session_seed}:{name}").random() < rate
        }
        for name in self.drawn:
            self.log.drawn.setdefault(name, []).append(
                {"persona": self.persona, "goal": self.goal, "seed": self.session_seed, "turn": None})

    def saw(self, cls: str, turn: int, why: str) -> None:
        """The runtime did what class `cls` describes, in this turn, planted or not."""
        self.log.manifested.setdefault(cls, []).append(
            {"persona": self.persona, "goal": self.goal, "seed": self.session_seed, "turn": turn, "why": why})

    def fires(self, name: str, turn: int) -> bool:
        """Called where `name` could show at this turn; True means act on it now."""
        if name in self.seen or name not in self.rates:
            return False
        self.seen.add(name)
        row = {"persona": self.persona, "goal": self.goal, "seed": self.session_seed, "turn": turn}
        self.log.eligible.setdefault(name, []).append(row)
        if name in self.drawn:
            self.log.planted.setdefault(name, []).append(row)
            return True
        return False
