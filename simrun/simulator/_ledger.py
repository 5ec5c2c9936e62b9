"""The cost ledger: the run's spend is the exact sum of its calls, and never passes the budget.

Before a paid call the caller reserves its worst case; afterwards it settles the reservation
with the actual cost, which frees the difference. Reservations count against the budget while
they are held, so no number of concurrent conversations can overshoot it. The scripted user
makes no paid call: its runs spend exactly $0.

Every settled call leaves its record here until the runner stores it (`take_records`), whatever
becomes of the conversation that made it: a conversation cut off by Ctrl-C, SIGTERM or the
budget still has its calls stored, so a run's spend is always the sum of its stored calls.

On a Ray cluster the one ledger of the run lives in an actor (`simulator/cluster/_shared.py`): workers
hold and settle through it, and the runner's ledger `follow`s it, for the records to store and
the figures the progress line shows.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol, TypeVar


@dataclass(frozen=True)
class Reservation:
    amount: Decimal


R = TypeVar("R", bound=Reservation)
Figures = dict[str, Decimal | int | bool]     # a ledger's FIGURES, by name


class CallLedger(Protocol[R]):
    """What a paid user backend holds and settles its calls against: the run's `Ledger`, or on a
    Ray cluster a worker's float of the cluster's budget (`simulator/cluster/_floats.py`), whose
    reservations are its own kind (`R`)."""

    exhausted: bool     # a hold was refused: no new conversation starts

    @property
    def remaining(self) -> Decimal: ...
    async def hold(self, worst_case: Decimal, call: dict[str, Any] | None = None) -> R | None: ...
    def settle(self, reservation: R, actual: Decimal, record: dict[str, Any] | None = None) -> None: ...
    def release(self, reservation: R) -> None: ...
    def log(self, record: dict[str, Any]) -> None: ...


class Ledger:
    def __init__(self, budget: Decimal) -> None:
        self.budget = Decimal(budget)
        self.spent = Decimal(0)
        self.reserved = Decimal(0)
        self.calls = 0
        self.exhausted = False      # a reservation was refused: start no new conversation
        self.overruns = 0
        self.in_flight = 0          # reservations held: calls under way (or waiting for a slot)
        self._records: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    @property
    def remaining(self) -> Decimal:
        return self.budget - self.spent - self.reserved

    def reserve(self, worst_case: Decimal) -> Reservation | None:
        """Hold `worst_case` against the budget, or return None if what is left cannot cover it."""
        worst_case = Decimal(worst_case)
        with self._lock:
            if worst_case > self.remaining:
                self.exhausted = True
                return None
            self.reserved += worst_case
            self.in_flight += 1
            return Reservation(worst_case)

    async def hold(self, worst_case: Decimal, call: dict[str, Any] | None = None) -> Reservation | None:
        """`reserve`, as the model user asks for it: awaited, since a cluster's ledger answers
        over the network. `call` names the call (conversation, turn, backend, model, request
        hash) to a ledger that must record it if its worker dies holding it; this one never has to."""
        return self.reserve(worst_case)

    def release(self, reservation: Reservation) -> None:
        """A call that failed costs nothing: give its reservation back."""
        with self._lock:
            self.reserved -= reservation.amount
            self.in_flight -= 1

    def settle(self, reservation: Reservation, actual: Decimal, record: dict[str, Any] | None = None) -> None:
        """Free the reservation, count what the call really cost, and keep its record to store.

        The spend stays exact even if a provider billed past the worst case (which the worst
        case's construction rules out); `overruns` counts such calls so that they are seen.
        """
        actual = Decimal(actual)
        with self._lock:
            self.reserved -= reservation.amount
            self.in_flight -= 1
            self.spent += actual
            self.calls += 1
            if actual > reservation.amount:
                self.overruns += 1
            if record is not None:
                self._records.append(record)

    def grant(self, want: Decimal, need: Decimal = Decimal(0)) -> Decimal:
        """Hold up to `want` for a worker's float (`simulator/cluster/_shared.py`): as much as is
        left. When not even `need` (the call the worker waits to hold) is left, nothing, and no
        new conversation starts."""
        with self._lock:
            if need > self.remaining:
                self.exhausted = True
                return Decimal(0)
            given = min(Decimal(want), self.remaining)
            self.reserved += given
            return given

    def ungrant(self, amount: Decimal) -> None:
        """A float given back unspent."""
        with self._lock:
            self.reserved -= amount

    def charge(self, amount: Decimal, calls: int = 0, overruns: int = 0,
               records: Sequence[dict[str, Any]] = ()) -> None:
        """What was spent out of a float: from held to spent, with the records of its calls."""
        with self._lock:
            self.reserved -= amount
            self.spent += amount
            self.calls += calls
            self.overruns += overruns
            self._records.extend(records)

    def log(self, record: dict[str, Any]) -> None:
        """A call that cost nothing (answered from the replay cache): stored all the same."""
        with self._lock:
            self._records.append(record)

    FIGURES = ("spent", "reserved", "calls", "exhausted", "overruns", "in_flight")

    def figures(self) -> Figures:
        with self._lock:
            return {name: getattr(self, name) for name in self.FIGURES}

    def follow(self, figures: Figures, records: list[dict[str, Any]]) -> None:
        """Mirror a ledger kept elsewhere (the cluster's): its figures, and the records of the
        calls it settled since the last time, for the runner to store."""
        with self._lock:
            for name in self.FIGURES:
                setattr(self, name, figures[name])
            self._records.extend(records)

    def take_records(self) -> list[dict[str, Any]]:
        """The records of calls settled since the last take, for the store."""
        with self._lock:
            records, self._records = self._records, []
        return records
