"""What the user can press: next steps, and the two actions of a confirmation card.

An `Offer` is kept for as long as it is on screen (and, once gone, in the session's history, so
that an expired click is told from an unknown one). `next_steps` keeps one guarantee: every step
is dry-run against the store before it is offered, so a step the domain would refuse now is
never shown.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simrun.examples.tripdesk.domain import Store


@dataclass
class Offer:
    id: str
    kind: str                       # step | confirm | decline
    operation: str
    record: str | None
    arguments: dict[str, Any]
    label: str

    def as_step(self) -> dict[str, Any]:
        return {"id": self.id, "operation": self.operation, "record": self.record,
                "arguments": jsonable(self.arguments), "label": self.label}


def jsonable(args: dict[str, Any]) -> dict[str, Any]:
    """An operation's arguments as the protocol carries them: dates in ISO form, the trip left out
    (it travels as the record)."""
    return {k: v.isoformat() if isinstance(v, dt.date) else v for k, v in args.items()
            if k != "trip"}


def card_offer(card: dict[str, Any], kind: str) -> Offer:
    """The card's confirm or decline action, as an offer the user can take by click or in words."""
    return Offer(card[kind], kind, card["operation"], card["args"]["trip"], card["args"],
                 "Confirm" if kind == "confirm" else "Keep as it is")


def next_steps(store: Store, focus: str | None, new_id: Callable[[str], str]) -> list[Offer]:
    """The steps to offer after this turn: on the trip in focus if it is open, else on every open
    trip, and opening a new one."""
    if focus and store.records[focus]["status"] == "open":
        trips = [focus]
    else:
        trips = store.trips(open_only=True)
    candidates: list[tuple[str, str | None, dict[str, Any], str]] = []
    for trip in trips:
        label = store.label(trip)
        named = store.records[trip]["name"]
        candidates += [
            ("name_trip", trip, {}, f"Rename {label}" if named else f"Name {label}"),
            ("add_bag", trip, {"count": 1}, f"Add a bag to {label}"),
            ("remove_bag", trip, {"count": 1}, f"Remove a bag from {label}"),
            ("rebook", trip, {"segment": "outbound"}, f"Rebook the outbound of {label}"),
            ("rebook", trip, {"segment": "return"}, f"Rebook the return of {label}"),
            ("cancel_trip", trip, {}, f"Cancel {label}"),
        ]
    candidates.append(("open_trip", None, {}, "Open a new trip"))
    # The dry run: a step the domain would refuse now is never offered.
    return [Offer(new_id("o"), "step", op, rec, args, label)
            for op, rec, args, label in candidates
            if store.validate(op, {**args, "trip": rec}) is None]
