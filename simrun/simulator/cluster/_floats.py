"""A worker's ledger on a Ray cluster: a float of the run's budget, held against locally.

Holding every call's worst case through the budget actor cost a round trip per moment, about a
millisecond of CPU at each end, as much as the call itself costs simrun at a fast model
(benchmarks/HISTORY.md). Instead a worker draws a float from the actor (`Budget.draw` in
`simulator/cluster/_shared.py`) and holds, settles and releases against it here, exactly as the
in-process `Ledger` does. It draws again when the float runs below half its size, and a call that
does not fit waits for that draw; each draw tells the actor what the worker spent since the last
one, with the records of those calls, for the driver to store. Records never wait longer than
REPORT_S to be told.

The float's size follows the worker's demand: FLOAT_S of the worst cases it held per second
lately, and at least MIN_CALLS of the largest worst case it has held. The actor thus sees a few
draws per worker per second whatever the matrix (a few a second from a fast model's hundreds of
calls, and about one per REPORT_S while records come in), and a dead worker costs at most its
float: about FLOAT_S of its worst cases, counted as spent though it may not all have been.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from simrun._money import stored_usd
from simrun.simulator._ledger import Reservation
from simrun.simulator.cluster._shared import LedgerLost, Report

FLOAT_S = 0.5      # a float holds about this long of the worker's worst cases
MIN_CALLS = 4      # ...and at least this many of the largest worst case seen
REPORT_S = 0.5     # what was spent is told the actor within this long
RATE_S = 0.1       # the demand is measured over at least this long


@dataclass(frozen=True)
class FloatHold(Reservation):
    generation: int = 0     # the float it was held against: one forfeited meanwhile already counted it


class FloatLedger:
    """What a worker's model user is given in place of a `Ledger`: `hold`, `settle`, `release`
    and `log` against this worker's float of the budget actor's budget."""

    def __init__(self, actor: Any, name: str) -> None:
        self.actor, self.prefix = actor, name
        self.generation = 0
        self.free = Decimal(0)          # of the float: neither held nor spent
        self.in_flight = 0
        self.exhausted = False          # the budget could not cover a call: start no new conversation
        self.lost = False               # the actor is gone: no call can be paid for any more
        self.largest = Decimal(0)       # the largest worst case held
        self.demand = Decimal(0)        # worst cases held since the last draw
        self.rate = Decimal(0)          # worst cases held per second, lately
        self.drawn_at: float | None = None   # since when `demand` counts
        self.draws = 0
        self._report = Report()
        self._drawing: asyncio.Future[bool] | None = None
        self._timer: asyncio.TimerHandle | None = None

    @property
    def name(self) -> str:
        return f"{self.prefix}.{self.generation}"

    @property
    def remaining(self) -> Decimal:
        return self.free

    async def hold(self, worst_case: Decimal, call: dict[str, Any] | None = None) -> FloatHold | None:
        worst_case = Decimal(worst_case)
        self.largest = max(self.largest, worst_case)
        self.demand += worst_case
        while worst_case > self.free:
            if self._drawing is not None and not self._drawing.done():
                await asyncio.shield(self._drawing)        # a draw under way may bring enough
                continue
            if await self._draw_now(worst_case - self.free):
                self.exhausted = True
                return None
        self.free -= worst_case
        self.in_flight += 1
        self._top_up()
        return FloatHold(worst_case, self.generation)

    def settle(self, reservation: FloatHold, actual: Decimal, record: dict[str, Any] | None = None) -> None:
        if reservation.generation != self.generation:
            return      # its float was forfeited, and the call counted at its worst case
        actual = Decimal(actual)
        self.in_flight -= 1
        self.free += reservation.amount - actual
        r = self._report
        r.spent += actual
        r.calls += 1
        r.overruns += actual > reservation.amount
        if record is not None:
            r.records.append(record)
        self._tell_soon()

    def release(self, reservation: FloatHold) -> None:
        if reservation.generation == self.generation:
            self.in_flight -= 1
            self.free += reservation.amount

    def log(self, record: dict[str, Any]) -> None:
        self._report.records.append(record)
        self._tell_soon()

    async def flush(self) -> None:
        """Tell the actor everything, and give back what is free of the float (the worker stops)."""
        if self._drawing is not None and not self._drawing.done():
            await asyncio.shield(self._drawing)
        await self._draw_now(Decimal(0), give_back=True)

    # --- drawing --------------------------------------------------------------------------

    def _target(self) -> Decimal:
        # To the store's precision: what a float holds is counted as spent if its worker dies.
        return stored_usd(max(MIN_CALLS * self.largest, self.rate * Decimal(FLOAT_S)))

    def _top_up(self) -> None:
        if self.free < self._target() / 2:
            self._in_background()

    def _tell_soon(self) -> None:
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(REPORT_S, self._in_background)

    def _in_background(self) -> None:
        if self._drawing is None or self._drawing.done():
            self._drawing = asyncio.ensure_future(self._draw_now(Decimal(0)))
            # A lost actor is told to whoever holds next; nobody awaits a background draw.
            self._drawing.add_done_callback(lambda task: task.cancelled() or task.exception())

    async def _draw_now(self, need: Decimal, give_back: bool = False) -> bool:
        """Tell the actor what was spent, and draw the float up to its size (or give back what is
        free of it); whether the actor could not give `need`."""
        if self.lost:
            raise LedgerLost("the cluster's budget actor is gone")
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = time.monotonic()
        if self.drawn_at is None:
            self.drawn_at = now
        elif now - self.drawn_at >= RATE_S:
            lately = self.demand / Decimal(now - self.drawn_at)
            self.rate = lately if not self.rate else (self.rate + lately) / 2
            self.demand, self.drawn_at = Decimal(0), now
        want = -self.free if give_back else max(self._target() - self.free, Decimal(0)) + need
        report, self._report = self._report, Report()
        report.in_flight = self.in_flight
        generation = self.generation
        self.draws += 1
        try:
            drawn: tuple[Decimal, bool, bool] = await self.actor.draw.remote(self.name, report, want, need)
            given, exhausted, forfeited = drawn     # (`Budget.draw`'s answer)
        except Exception as exc:
            self.lost = True
            raise LedgerLost(f"the cluster's budget actor is gone: {type(exc).__name__}") from exc
        if forfeited and generation == self.generation:
            # Given up for dead (a chunk of this worker's was lost): everything held against the
            # old float counted as spent; what is under way now settles against nothing.
            self.generation += 1
            self.free, self.in_flight = Decimal(0), 0
            return False
        self.free += given
        self.exhausted = self.exhausted or exhausted
        return given < need
