"""The library's records and the commands that change them: loans, holds, renewals, pickups.

`Catalogue` is one session's store: records keyed `type:ID` (`member:M-1`, `loan:L-2`,
`hold:H-1`) and the event log. `check` says why the library would refuse a command now;
`execute` runs it and logs its event, committed or refused. Unlike a desk that dry-runs every
offer, this one offers what a patron may ask for and lets the library say no when it must
(a loan with no renewals left): that refusal is the domain speaking, not a fault.
"""

from __future__ import annotations

import datetime as dt
import pickle
from dataclasses import dataclass, field
from typing import Any, TypeVar

BRANCHES = ("Central", "Riverside", "Hillcrest", "Northgate")
# command -> what it needs, in the order the desk asks for it ("record" is the loan or hold)
NEEDS: dict[str, tuple[str, ...]] = {
    "renew": ("record", "weeks"),
    "place_hold": ("title", "branch"),
    "move_pickup": ("record", "branch"),
    "cancel_hold": ("record",),
}
KIND_OF = {"renew": "loan", "move_pickup": "hold", "cancel_hold": "hold", "place_hold": "hold"}
MAX_WEEKS = 4



T = TypeVar("T")


def copied(value: T) -> T:
    """A deep copy of plain data: a pickle round trip gives what copy.deepcopy gives, in a fifth
    of the time, and a snapshot is copied after every turn."""
    copy: T = pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    return copy

class BadSetup(ValueError):
    """The fixtures given to `start` are not a library."""


@dataclass
class Catalogue:
    today: dt.date
    records: dict[str, dict[str, Any]]
    events: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_setup(cls, setup: dict[str, Any] | None) -> Catalogue:
        setup = setup or {}
        try:
            today = dt.date.fromisoformat(str(setup.get("today", "2026-12-01")))
        except ValueError as exc:
            raise BadSetup(f"setup.today is not a date: {setup.get('today')!r}") from exc
        records = copied(setup.get("records") or {})
        for rid, rec in records.items():
            kind = rid.split(":", 1)[0]
            if not isinstance(rec, dict) or rec.get("type") != kind:
                raise BadSetup(f"setup.records.{rid} needs type: {kind}")
            if kind == "loan":
                rec.setdefault("renewals_left", 2)
                rec.setdefault("status", "out")
                rec["due"] = str(rec["due"])
            elif kind == "hold":
                rec.setdefault("status", "waiting")
                if "ready_on" in rec:
                    rec["ready_on"] = str(rec["ready_on"])
        return cls(today, records)

    # --- reading ----------------------------------------------------------------------------

    def of_kind(self, kind: str, *, active: bool = True) -> list[str]:
        return [rid for rid, rec in self.records.items() if rec["type"] == kind
                and (not active or rec.get("status") not in ("cancelled", "returned"))]

    def titled(self, kind: str, title: str) -> str | None:
        return next((rid for rid in self.of_kind(kind) if self.records[rid]["title"].lower() == title.lower()), None)

    def snapshot(self) -> dict[str, Any]:
        return copied({"records": self.records, "events": self.events})

    # --- commands -------------------------------------------------------------------------------

    def check(self, command: str, args: dict[str, Any]) -> str | None:
        """Why the library refuses `command` now, or None when it would carry it out."""
        rec = self.records.get(args.get("record") or "")
        if command == "place_hold":
            if self.titled("hold", args["title"]) or self.titled("loan", args["title"]):
                return f"you already have {args['title']} on hold or on loan"
            return None
        if rec is None or rec["type"] != KIND_OF[command]:
            return f"there is no such {KIND_OF[command]}"
        if command == "renew":
            if rec["renewals_left"] < 1:
                return f"{rec['title']} has been renewed as often as it can be"
            if not 1 <= int(args["weeks"]) <= MAX_WEEKS:
                return f"a renewal is for one to {MAX_WEEKS} weeks"
        if command in ("move_pickup", "cancel_hold") and rec["status"] == "cancelled":
            return "that hold is cancelled"
        if command == "move_pickup" and rec["branch"] == args["branch"]:
            return f"{rec['title']} is already to be collected at {rec['branch']}"
        return None

    def execute(self, command: str, args: dict[str, Any], *, turn: int, offer: str | None,
                refuse: str | None = None, onto: str | None = None) -> dict[str, Any]:
        """Run `command`; `refuse` forces a refusal with that reason, `onto` writes another record
        than the one addressed (both only ever passed by a planted fault)."""
        reason = refuse or self.check(command, args)
        record = args.get("record")
        if reason is None:
            record = self._apply(command, args, onto or record)
        arguments = {k: v for k, v in args.items() if k != "record"}
        event = {"id": f"ev{len(self.events) + 1:04d}", "turn": turn, "operation": command, "record": record,
                 "status": "refused" if reason else "committed", "offer": offer, "reason": reason,
                 "arguments": arguments}
        self.events.append(event)
        return event

    def amend(self, command: str, record: str, args: dict[str, Any], *, turn: int) -> dict[str, Any]:
        """A correction of a command just carried out (`renew` for another number of weeks, a
        hold placed for another branch): logged as that command again, on the same record."""
        rec = self.records[record]
        if command == "renew":
            rec["due"] = (dt.date.fromisoformat(rec["due"]) + dt.timedelta(weeks=int(args["weeks"]) - int(args["was"]))
                          ).isoformat()
        else:
            rec["branch"] = args["branch"]
        event = {"id": f"ev{len(self.events) + 1:04d}", "turn": turn, "operation": command, "record": record,
                 "status": "committed", "offer": None, "reason": None,
                 "arguments": {k: v for k, v in args.items() if k != "was"}}
        self.events.append(event)
        return event

    def _apply(self, command: str, args: dict[str, Any], record: str | None) -> str:
        if command == "place_hold":
            n = len([r for r in self.records if r.startswith("hold:")]) + 1
            while f"hold:H-{n}" in self.records:
                n += 1
            record = f"hold:H-{n}"
            self.records[record] = {"type": "hold", "title": args["title"], "branch": args["branch"],
                                    "status": "waiting"}
            return record
        # Every other command was checked to name a record that exists before it is carried out.
        assert record is not None
        rec = self.records[record]
        if command == "renew":
            rec["due"] = (dt.date.fromisoformat(rec["due"]) + dt.timedelta(weeks=int(args["weeks"]))).isoformat()
            rec["renewals_left"] -= 1
        elif command == "move_pickup":
            rec["branch"] = args["branch"]
        elif command == "cancel_hold":
            rec["status"] = "cancelled"
        return record
