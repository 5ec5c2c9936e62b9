"""A reading of the user's message set against the session: which trip it names, which values
it gives an operation, which answer it gives a pending ask, and which offer on screen it takes.

`reading.py` reads a message on its own; this is where what it read meets the store and what
was offered. A date given without a year is completed here, as the next such day.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from simrun.examples.tripdesk.domain import Store
from simrun.examples.tripdesk.offers import Offer
from simrun.examples.tripdesk.reading import PartialDate, Reading, capitalised_phrase, clean_value, core_sentence
from simrun.examples.tripdesk.state import SessionState


def trip_named(store: Store, r: Reading) -> str | None:
    """The trip whose name or destination the message says (the longest such match)."""
    text = r.text.lower()
    hits = []
    for rid in store.trips():
        rec = store.records[rid]
        for label in (rec.get("name"), rec.get("destination")):
            if label and label.lower() in text:
                hits.append((len(label), rid))
    return max(hits)[1] if hits else None


def complete_date(store: Store, date: PartialDate) -> dt.date | None:
    if date.year is not None:
        return date.complete(date.year)
    # A date given without a year, outside a correction, is the next such day.
    guess = date.complete(store.today.year)
    if guess is not None and guess < store.today:
        guess = date.complete(store.today.year + 1)
    return guess


def values(s: SessionState, r: Reading, op: str) -> dict[str, Any]:
    """The arguments of `op` the message gives; a trip it names becomes the focus."""
    found: dict[str, Any] = {}
    trip = trip_named(s.store, r)
    if trip and op != "open_trip":
        found["trip"] = trip
        s.focus = trip
    if r.date is not None:
        found["date"] = complete_date(s.store, r.date)
    for arg in ("segment", "name", "traveler", "destination"):
        if getattr(r, arg):
            found[arg] = getattr(r, arg)
    if op in ("add_bag", "remove_bag"):
        found["count"] = r.count or 1
    if op == "name_trip" and trip and "name" in found:
        # "call the Porto visit trip Porto kickoff": the trip named is not the new name.
        rec = s.store.records[trip]
        patterns = [rf"^(?:the\s+)?{re.escape(rec['destination'])}\s+trip\s+"]
        if rec.get("name"):
            patterns.insert(0, rf"^(?:the\s+)?{re.escape(rec['name'])}(?:\s+trip)?\s+")
        for pattern in patterns:
            stripped = re.sub(pattern, "", found["name"], flags=re.I)
            if stripped != found["name"]:
                found["name"] = stripped
                break
        if not found["name"] or found["name"].lower() == (rec.get("name") or "").lower():
            found.pop("name")
    return found


def fill(store: Store, wanted: list[str], r: Reading) -> dict[str, Any]:
    """The values the message gives for the arguments a pending ask wants."""
    core = core_sentence(r.text)
    filled: dict[str, Any] = {}
    for arg in wanted:
        if arg == "date" and r.date is not None:
            filled["date"] = complete_date(store, r.date)
        elif arg == "segment" and r.segment:
            filled["segment"] = r.segment
        elif arg == "name" and core and not r.confirm and r.intent != "question":
            filled["name"] = r.name or clean_value(core) or None
        elif arg == "destination" and r.destination:
            filled["destination"] = r.destination
        elif arg == "traveler":
            skip = {w.lower() for w in (r.destination or "").split()}
            filled["traveler"] = r.traveler or capitalised_phrase(core, skip=skip)
        elif arg == "trip":
            filled["trip"] = trip_named(store, r)
    return {k: v for k, v in filled.items() if v}


def match_offer(s: SessionState, r: Reading) -> Offer | None:
    """The one next step on screen that the message asks for in words, if exactly one fits."""
    trip = trip_named(s.store, r)
    matches = [o for o in s.offers.values()
               if o.kind == "step" and o.operation == r.intent
               and (trip is None or o.record == trip)
               and (r.segment is None or o.arguments.get("segment") in (None, r.segment))]
    return matches[0] if len(matches) == 1 else None
