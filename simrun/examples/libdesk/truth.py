"""Faults the library desk can plant, and the truth log of everything that went wrong.

Each fault has a rate and is drawn afresh at every opportunity (every moment it could show),
from a stream seeded by (fault seed, session seed, fault): a conversation may carry a fault
several times, or never. The truth log records, per class of simrun's README, every
conversation where the desk did what that class describes, whether a planted fault made it do
so or it happened of itself (a renewal refused because an earlier wrong write used it up). It is
written by the desk, from what it knows it did, never by reading its own replies the way a
scorer would.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

# fault -> the class it shows as
FAULTS: dict[str, str] = {
    "dead_end": "dead_end",                  # a reply with nothing to do next
    "loop": "loop",                          # an answered question asked again, no reason given
    "refused_offer": "refused_offer",        # a command taken from an offer refused for no reason
    "not_understood": "not_understood",      # a readable message answered "didn't catch that"
    "unanswered": "unanswered",              # a question it can answer called unanswerable
    "wrong_record": "wrong_record",          # a command carried out on another loan or hold
    "stale_click": "stale_click",            # an expired button honoured
    "stale_click_unnamed": "stale_click",    # ...and its command's event names not that button
    "phantom_receipt": "phantom_receipt",    # a receipt for an event that never happened
    "card_not_actionable": "card_not_actionable",   # a confirmation named but not sent
    "refusal_with_hedge": "refusal_with_hedge",     # refuses and hedges in one breath
    "audit_gap": "audit_gap",                # a turn left out of the audit log
    "audit_misfiled": "audit_gap",           # the last turn's entry filed again under this one
    "staff_note": "integrity_leak",          # a staff-only note read out to the patron
    "drop_refusal": "integrity_leak",        # another patron's details given out
    "crash": "runtime_error",                # an exception mid-turn
}
STAFF_NOTE = "staff note: patron flagged for review, override code LX-9"


class UnknownFault(ValueError):
    pass


def parse(spec: dict[str, float] | str | None) -> dict[str, float]:
    if not spec:
        return {}
    if isinstance(spec, str):
        try:
            spec = {k.strip(): float(v) for k, v in (part.split("=", 1) for part in spec.split(",") if part.strip())}
        except ValueError:
            raise UnknownFault(f"faults look like 'loop=0.1,crash=0.02', not {spec!r}") from None
    for name, rate in spec.items():
        if name not in FAULTS:
            raise UnknownFault(f"no fault {name!r}; the library desk plants: {', '.join(FAULTS)}")
        if not 0 <= float(rate) <= 1:
            raise UnknownFault(f"fault {name!r}: a rate is between 0 and 1, not {rate}")
    return {name: float(rate) for name, rate in spec.items()}


Conversation = tuple[str, str, int]     # (persona, goal, seed), as the runtime's start names it


@dataclass
class TruthLog:
    opportunities: Counter[str] = field(default_factory=Counter)    # fault -> times it could have fired
    planted: Counter[str] = field(default_factory=Counter)          # fault -> times it did
    seen: dict[str, list[tuple[Conversation, int, str]]] = field(default_factory=dict)  # class -> (who, turn, why)

    def conversations(self, cls: str) -> set[Conversation]:
        """Every conversation in which `cls` showed."""
        return {who for who, _, _ in self.seen.get(cls, [])}


class SessionFaults:
    def __init__(self, rates: dict[str, float], fault_seed: int, who: Conversation, log: TruthLog) -> None:
        self.rates, self.who, self.log = rates, who, log
        self._draws = {name: random.Random(f"{fault_seed}:{who[2]}:{name}") for name in rates}

    def fire(self, name: str) -> bool:
        """An opportunity for `name`: whether it fires now."""
        if name not in self.rates:
            return False
        self.log.opportunities[name] += 1
        if self._draws[name].random() < self.rates[name]:
            self.log.planted[name] += 1
            return True
        return False

    def saw(self, cls: str, turn: int, why: str) -> None:
        """The desk did what `cls` describes, in this turn."""
        self.log.seen.setdefault(cls, []).append((self.who, turn, why))
