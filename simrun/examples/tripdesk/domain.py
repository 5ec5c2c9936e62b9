"""The trip domain: records, operations, and the dry run that guards every offer.

A `Store` holds one session's records and its event log. Every operation goes through
`validate` (the dry run: would the domain accept this now?) before `apply` commits it, and the
runtime calls `validate` on each next step before offering it. Nothing here reads messages or
writes replies; that keeps the rules the runtime promises in one place.
"""

from __future__ import annotations

import datetime as dt
import pickle
from dataclasses import dataclass
from typing import Any, TypeVar

# operation -> the arguments it needs before it can run. `trip` is resolved from the
# conversation (focus, a named trip, an offer); the rest are asked for when missing.
REQUIRED: dict[str, tuple[str, ...]] = {
    "open_trip": ("traveler", "destination"),
    "name_trip": ("trip", "name"),
    "add_bag": ("trip",),
    "remove_bag": ("trip",),
    "rebook": ("trip", "segment", "date"),
    "cancel_trip": ("trip",),
    # Only reached by correcting a trip just opened; never offered as a next step.
    "change_destination": ("trip", "destination"),
    "change_traveler": ("trip", "traveler"),
}
# Operations that change a booking are confirmed on a card before they commit.
CONFIRMED = {"rebook", "cancel_trip"}
SEGMENTS = ("outbound", "return")
DEFAULT_TODAY = dt.date(2026, 12, 1)



T = TypeVar("T")


def copied(value: T) -> T:
    """A deep copy of plain data: a pickle round trip gives what copy.deepcopy gives, in a fifth
    of the time, and a snapshot is copied after every turn."""
    copy: T = pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    return copy

class SetupError(ValueError):
    """The fixtures handed to `start` do not describe a valid store."""


@dataclass
class Store:
    today: dt.date
    records: dict[str, dict[str, Any]]
    events: list[dict[str, Any]]

    @classmethod
    def from_setup(cls, setup: dict[str, Any] | None) -> Store:
        setup = setup or {}
        today = setup.get("today", DEFAULT_TODAY)
        if isinstance(today, str):
            try:
                today = dt.date.fromisoformat(today)
            except ValueError as exc:
                raise SetupError(f"setup.today: {today!r} is not an ISO date") from exc
        records = copied(setup.get("records") or {})
        for rid, rec in records.items():
            kind = rid.split(":", 1)[0]
            if rec.get("type") != kind:
                raise SetupError(f"setup.records.{rid}: type must be {kind!r}")
            if kind == "trip":
                rec.setdefault("name", None)
                rec.setdefault("bags", 0)
                rec.setdefault("status", "open")
                segments = rec.setdefault("segments", {})
                for seg in SEGMENTS:
                    date = (segments.get(seg) or {}).get("date")
                    if date is None:
                        raise SetupError(f"setup.records.{rid}.segments.{seg}.date is missing")
                    segments[seg] = {"date": str(date)}
        return cls(today=today, records=records, events=[])

    # --- queries -------------------------------------------------------------------------

    def trips(self, *, open_only: bool = False) -> list[str]:
        return [
            rid for rid, rec in self.records.items()
            if rec["type"] == "trip" and (not open_only or rec["status"] == "open")
        ]

    def traveler_named(self, name: str) -> str | None:
        for rid, rec in self.records.items():
            if rec["type"] == "traveler" and rec["name"].lower() == name.lower():
                return rid
        return None

    def label(self, trip: str) -> str:
        rec = self.records[trip]
        return rec["name"] or f"the {rec['destination']} trip"

    def snapshot(self) -> dict[str, Any]:
        return copied({"records": self.records, "events": self.events})

    def _next_id(self, kind: str) -> str:
        prefix = {"trip": "T", "traveler": "P"}[kind]
        taken = {rid for rid in self.records if rid.startswith(f"{kind}:")}
        n = len(taken) + 1
        while f"{kind}:{prefix}-{n}" in taken:
            n += 1
        return f"{kind}:{prefix}-{n}"

    # --- the dry run -----------------------------------------------------------------------

    def validate(self, operation: str, args: dict[str, Any]) -> str | None:
        """Why the domain would refuse `operation` with `args` now, or None if it accepts.

        Arguments that are still missing are not a refusal: a next step may be offered before
        its date is known, as long as everything known so far is acceptable.
        """
        if operation == "open_trip":
            return None
        trip = self.records.get(args.get("trip") or "")
        if trip is None or trip["type"] != "trip":
            return "no such trip"
        if trip["status"] != "open":
            return "the trip is cancelled"
        if operation == "remove_bag" and trip["bags"] < int(args.get("count", 1)):
            return "there is no bag to remove"
        if operation in ("add_bag", "remove_bag") and int(args.get("count", 1)) < 1:
            return "the number of bags must be at least one"
        if operation == "rebook":
            segment = args.get("segment")
            if segment is not None and segment not in SEGMENTS:
                return f"there is no {segment} segment"
            date = args.get("date")
            if date is not None and segment is not None:
                if date < self.today:
                    return "that date is in the past"
                other = dt.date.fromisoformat(
                    trip["segments"]["return" if segment == "outbound" else "outbound"]["date"])
                if segment == "outbound" and date > other:
                    return "the outbound would leave after the return"
                if segment == "return" and date < other:
                    return "the return would leave before the outbound"
        return None

    # --- commit ------------------------------------------------------------------------------

    def apply(self, operation: str, args: dict[str, Any], *, turn: int, offer: str | None,
              record: str | None = None) -> dict[str, Any]:
        """Run `operation`; return its event (committed, or refused with the reason).

        `record` overrides where the write lands. Only the wrong_record fault passes it.
        """
        reason = self.validate(operation, args)
        target = record or args.get("trip")
        if reason is None:
            target = self._commit(operation, args, target)
        return self._log(operation, args, turn=turn, offer=offer, record=target,
                         status="committed" if reason is None else "refused", reason=reason)

    def refuse(self, operation: str, args: dict[str, Any], *, turn: int, offer: str | None,
               reason: str) -> dict[str, Any]:
        return self._log(operation, args, turn=turn, offer=offer, record=args.get("trip"), status="refused",
                         reason=reason)

    def _log(self, operation: str, args: dict[str, Any], *, turn: int, offer: str | None, record: str | None,
             status: str, reason: str | None) -> dict[str, Any]:
        event = {
            "id": f"e-{len(self.events) + 1}", "turn": turn, "operation": operation, "record": record,
            "status": status, "offer": offer, "reason": reason,
            "arguments": {k: str(v) for k, v in args.items() if k != "trip"},
        }
        self.events.append(event)
        return event

    def _commit(self, operation: str, args: dict[str, Any], target: str | None) -> str:
        if operation == "open_trip":
            traveler = self._traveler(args["traveler"])
            target = self._next_id("trip")
            self.records[target] = {
                "type": "trip", "traveler": traveler, "destination": args["destination"],
                "name": None, "bags": 0, "status": "open",
                "segments": {
                    "outbound": {"date": (self.today + dt.timedelta(days=30)).isoformat()},
                    "return": {"date": (self.today + dt.timedelta(days=120)).isoformat()},
                },
            }
            return target
        # Every other operation was checked to name a trip that exists before it commits.
        assert target is not None
        trip = self.records[target]
        if operation == "name_trip":
            trip["name"] = args["name"]
        elif operation == "add_bag":
            trip["bags"] += int(args.get("count", 1))
        elif operation == "remove_bag":
            trip["bags"] = max(0, trip["bags"] - int(args.get("count", 1)))
        elif operation == "rebook":
            trip["segments"][args["segment"]]["date"] = args["date"].isoformat()
        elif operation == "cancel_trip":
            trip["status"] = "cancelled"
        elif operation == "change_destination":
            trip["destination"] = args["destination"]
        elif operation == "change_traveler":
            trip["traveler"] = self._traveler(args["traveler"])
        return target

    def _traveler(self, name: str) -> str:
        """The traveler record with this name, created if there is none."""
        traveler = self.traveler_named(name)
        if traveler is None:
            traveler = self._next_id("traveler")
            self.records[traveler] = {"type": "traveler", "name": name}
        return traveler
