"""One LibDesk conversation: the catalogue, what is shown and pending, and the audit log.

`Patron` holds no behaviour; `simrun.examples.libdesk.turn` takes each turn over it. What is pending is at most
one `Draft` (a command being put together over turns) and one card (a draft waiting to be
confirmed). Every `Button` ever shown is remembered, so that an expired one is told from one the
desk never showed.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from simrun.examples.libdesk.catalogue import Catalogue
from simrun.examples.libdesk.truth import SessionFaults

# A button's label: the verb of its command, then the title.
VERB = {"renew": "Renew", "move_pickup": "Change the pickup branch for", "cancel_hold": "Cancel the hold on"}


@dataclass
class Button:
    id: str
    operation: str              # a command, or "confirm" / "keep" on a card
    record: str | None
    label: str
    draft: Draft | None = None    # what a card's button would carry out


@dataclass
class Draft:
    """A command being put together over turns."""

    operation: str
    args: dict[str, Any] = field(default_factory=dict)
    offer: str | None = None        # the last button pressed for it: the event's `offer`
    fresh: bool = False             # that button was on the reply just before
    stale: bool = False             # ...or an expired one, honoured by the stale_click fault
    asking: str | None = None       # what the desk asked for last


class Patron:
    """One conversation: the catalogue, what is shown and pending, and the audit log."""

    def __init__(self, catalogue: Catalogue, faults: SessionFaults) -> None:
        self.catalogue, self.faults = catalogue, faults
        self.turn = 0
        self.shown: dict[str, Button] = {}
        self.ever: dict[str, Button] = {}
        self.draft: Draft | None = None
        self.card: Draft | None = None
        self.card_buttons: tuple[Button, Button] | None = None
        self.card_id: str | None = None
        self.last_ask: tuple[str, str | None, tuple[str, ...]] | None = None
        self.last_done: tuple[str, str, dict[str, Any]] | None = None
        self.audit: list[dict[str, Any]] = []
        self._n = itertools.count(1)

    def new_id(self, prefix: str) -> str:
        """The next id of this conversation, naming the turn it was made in."""
        return f"{prefix}{self.turn}-{next(self._n)}"
