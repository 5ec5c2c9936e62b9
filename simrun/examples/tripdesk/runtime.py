"""TripDesk: the reference runtime, a trip desk that keeps every Turnframe guarantee.

It speaks PROTOCOL.md version 1 with plain JSON-shaped dicts, exactly the objects an HTTP or
stdio runtime would send, so simrun drives it the way it drives an outside runtime. This module
holds the protocol's operations and the sessions by id; a turn is `simrun.examples.tripdesk.session`'s.

What it promises, turn by turn (and what each named fault in `faults.py` breaks), and where:
- it reads a message first against what it offered last turn (the card, the next steps, the
  ask), and only then over the whole catalogue (`session.py`, `values.py`);
- it asks for missing arguments, one ask per turn, and asks again only with a reason
  (`operations.py`);
- it dry-runs every next step against the store before offering it (`offers.py`);
- it confirms rebookings and cancellations on a card (`operations.py`);
- a receipt names an event the store holds as committed (`operations.py`);
- every turn leaves a turn event in the audit stream, stub turns included, and carries verdicts
  (`reply.py`);
- a correction keeps what it does not restate (a day and month keep the corrected year)
  (`corrections.py`).
"""

from __future__ import annotations

import itertools
from typing import Any

from simrun.examples.tripdesk.domain import Store
from simrun.examples.tripdesk.faults import FaultLog, SessionFaults, UnknownFault, parse_faults
from simrun.examples.tripdesk.session import Session

PROTOCOL = 1
__version__ = "1.0.0"          # what `health` reports; the package's __version__ is this one


class TripDesk:
    """The reference runtime. `faults` plants named faults (see `simrun.examples.tripdesk.faults`)."""

    def __init__(self, faults: dict[str, float] | str | None = None, fault_seed: int = 0,
                 snapshot: bool = True) -> None:
        self.faults = parse_faults(faults)
        # The start reply and each turn's result carry the store (protocol 1's optional `state` field),
        # and the close answer the audit, so that simrun need not ask for them; snapshot=False
        # answers as a runtime without them does.
        self.snapshot = snapshot
        try:
            self.fault_seed = int(fault_seed)
        except (TypeError, ValueError):
            raise UnknownFault(f"fault_seed must be a whole number, got {fault_seed!r}") from None
        self.fault_log = FaultLog()
        self._sessions: dict[str, Session] = {}
        self._next = itertools.count(1)

    def health(self) -> dict[str, Any]:
        return {"protocol": PROTOCOL, "runtime": "tripdesk", "version": __version__}

    def start(self, request: dict[str, Any]) -> dict[str, Any]:
        seed = int(request.get("seed", 0))
        sid = f"s-{next(self._next)}"
        faults = SessionFaults(self.faults, self.fault_seed, seed, str(request.get("persona")),
                               str(request.get("goal")), self.fault_log)
        self._sessions[sid] = Session(sid, Store.from_setup(request.get("setup")), faults)
        # The store as it starts, with the reply (protocol 1's optional `state`): one request less.
        return {"session": sid, "state": self.state(sid)} if self.snapshot else {"session": sid}

    def turn(self, session: str, request: dict[str, Any]) -> dict[str, Any]:
        result = self._get(session).handle(request)
        return {**result, "state": self.state(session)} if self.snapshot else result

    def state(self, session: str) -> dict[str, Any]:
        return self._get(session).store.snapshot()

    def audit(self, session: str) -> dict[str, Any]:
        return {"turns": [dict(event) for event in self._get(session).audit]}

    def close(self, session: str) -> dict[str, Any]:
        # The audit with the close answer (protocol 1's optional `audit`): simrun, once it has seen
        # one, reads the audit by closing, one request less per conversation.
        audit = self.audit(session) if self.snapshot and session in self._sessions else None
        self._sessions.pop(session, None)
        return {"audit": audit} if audit is not None else {}

    def _get(self, session: str) -> Session:
        try:
            return self._sessions[session]
        except KeyError:
            raise KeyError(f"no such session: {session}") from None
