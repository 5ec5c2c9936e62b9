"""LibDesk: a library's help desk, the second reference runtime, built from simrun's README and
docs/protocol.md alone (protocol 1, the python transport, async methods).

How it works, unlike TripDesk:
- a command is put together over several turns: a button or a request starts a *draft*, the
  desk asks for what it still lacks one thing at a time (which loan, how many weeks, which
  branch), and carries it out turns later; the event names the last button pressed for it
  (`drafts.py`);
- a button pressed while a draft is waiting continues that draft (the loan chosen for a
  renewal already asked for), rather than starting again (`turn.py`);
- it offers what a patron may ask for without checking first, and the library may refuse
  (a loan renewed as often as it can be) (`reply.py`, `catalogue.py`);
- answers are in plain words ("due back on Thursday 10 December 2026", "two renewals left")
  (`answers.py`, `words.py`);
- a patron has several loans and holds; cancelling a hold is confirmed on a card (`drafts.py`).

This module holds the protocol's operations and the conversations by session id. `faults` plants
the faults of `simrun.examples.libdesk.truth` at their rates; `truth` logs every way the desk broke a class,
planted or not.
"""

from __future__ import annotations

import itertools
from typing import Any

from simrun.examples.libdesk.catalogue import BadSetup, Catalogue
from simrun.examples.libdesk.patron import Patron
from simrun.examples.libdesk.truth import SessionFaults, TruthLog, UnknownFault, parse
from simrun.examples.libdesk.turn import take

__version__ = "1.0.0"          # what `health` reports; the package's __version__ is this one


class LibDesk:
    """The library desk runtime. `faults` plants named faults (simrun.examples.libdesk.truth) at their rates."""

    def __init__(self, faults: dict[str, float] | str | None = None, fault_seed: int = 0,
                 snapshot: bool = True) -> None:
        self.rates = parse(faults)
        # Send the store with the start reply and each turn (protocol 1's optional `state`), and the
        # audit with the close answer (its optional `audit`).
        self.snapshot = snapshot
        try:
            self.fault_seed = int(fault_seed)
        except (TypeError, ValueError):
            raise UnknownFault(f"fault_seed is a whole number, not {fault_seed!r}") from None
        self.truth = TruthLog()
        self._patrons: dict[str, Patron] = {}
        self._ids = itertools.count(1)

    async def health(self) -> dict[str, Any]:
        return {"protocol": 1, "runtime": "libdesk", "version": __version__}

    async def start(self, request: dict[str, Any]) -> dict[str, Any]:
        who = (str(request.get("persona")), str(request.get("goal")), int(request.get("seed", 0)))
        try:
            catalogue = Catalogue.from_setup(request.get("setup"))
        except (BadSetup, KeyError, TypeError) as exc:
            raise ValueError(f"libdesk cannot open this library: {exc}") from None
        sid = f"lib-{next(self._ids):05d}"
        self._patrons[sid] = Patron(catalogue, SessionFaults(self.rates, self.fault_seed, who, self.truth))
        # The store as it starts, with the reply (protocol 1's optional `state`): one request less.
        return {"session": sid, "state": await self.state(sid)} if self.snapshot else {"session": sid}

    async def turn(self, session: str, request: dict[str, Any]) -> dict[str, Any]:
        result = take(self._patron(session), request)
        return {**result, "state": await self.state(session)} if self.snapshot else result

    async def state(self, session: str) -> dict[str, Any]:
        return self._patron(session).catalogue.snapshot()

    async def audit(self, session: str) -> dict[str, Any]:
        return {"turns": [dict(entry) for entry in self._patron(session).audit]}

    async def close(self, session: str) -> dict[str, Any]:
        # The audit with the close answer (protocol 1's optional `audit`): one request less.
        audit = await self.audit(session) if self.snapshot and session in self._patrons else None
        self._patrons.pop(session, None)
        return {"audit": audit} if audit is not None else {}

    def _patron(self, session: str) -> Patron:
        if session not in self._patrons:
            raise KeyError(f"libdesk has no session {session}")
        return self._patrons[session]
