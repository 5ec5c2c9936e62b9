"""What one TripDesk conversation remembers from turn to turn.

`SessionState` holds no behaviour. It is the memory every part of a turn reads and writes: the
store and the faults drawn for this conversation, the trip in focus, what the last reply offered
(and every offer ever shown), what is pending (an ask, a card), the last value the user gave
(for corrections) and the audit stream. `simrun.examples.tripdesk.session.Session` routes each turn over it.
"""

from __future__ import annotations

import itertools
from typing import Any

from simrun.examples.tripdesk.domain import Store
from simrun.examples.tripdesk.faults import SessionFaults
from simrun.examples.tripdesk.offers import Offer


class SessionState:
    def __init__(self, sid: str, store: Store, faults: SessionFaults) -> None:
        self.id = sid
        self.store = store
        self.faults = faults
        self.turn = 0
        trips = store.trips(open_only=True)
        self.focus: str | None = trips[0] if len(trips) == 1 else None
        self.offers: dict[str, Offer] = {}        # shown in the last turn
        self.history: dict[str, Offer] = {}       # every offer ever shown
        self.ask: dict[str, Any] | None = None    # pending ask, with the arguments known so far
        self.card: dict[str, Any] | None = None   # pending confirmation
        self.last_given: dict[str, Any] | None = None  # the last value the user gave, for corrections
        # (operation, record, arguments) asked last turn
        self.shown_ask: tuple[str, str | None, tuple[str, ...]] | None = None
        self.audit: list[dict[str, Any]] = []
        self.on_screen: set[str] = set()
        # The expired offer whose click (honoured by the stale_click_ask fault) started the ask
        # now being answered: a commit it leads to is that click's doing.
        self.stale_origin: str | None = None
        self._ids = itertools.count(1)

    def new_id(self, prefix: str) -> str:
        """The next id of this conversation (asks, cards, offers share one counter)."""
        return f"{prefix}-{next(self._ids)}"
