"""The cost ledger: the run's spend is the exact sum of its calls, and never passes the budget.

Before a paid call the caller reserves its worst case; afterwards it settles the reservation
with the actual cost, which frees the difference. Reservations count against the budget while
they are held, so no number of concurrent conversations can overshoot it. The scripted user
makes no paid call: its runs spend exactly $0.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Reservation:
    amount: Decimal


class Ledger:
    def __init__(self, budget: Decimal) -> None:
        self.budget = Decimal(budget)
        self.spent = Decimal(0)
        self.reserved = Decimal(0)
        self.calls = 0
        self.exhausted = False      # a reservation was refused: start no new conversation
        self.overruns = 0
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
            return Reservation(worst_case)

    def release(self, reservation: Reservation) -> None:
        """A call that failed costs nothing: give its reservation back."""
        self.settle(reservation, Decimal(0))

    def settle(self, reservation: Reservation, actual: Decimal) -> None:
        """Free the reservation and count what the call really cost.

        The spend stays exact even if a provider billed past the worst case (which the worst
        case's construction rules out); `overruns` counts such calls so that they are seen.
        """
        actual = Decimal(actual)
        with self._lock:
            self.reserved -= reservation.amount
            self.spent += actual
            self.calls += 1
            if actual > reservation.amount:
                self.overruns += 1
