"""What the workers of a Ray cluster share: one budget and one rate limit for the whole run.

`Budget` is the run's ledger, kept in one actor. Each worker holds a float of it
(`simulator/cluster/_floats.py`): the actor holds the float against the budget, as a reservation,
and the worker holds each call's worst case against its float, locally, and asks the actor for
more only when the float runs low, telling it then what it spent and the records of those calls.
No float is given beyond what is left, so no number of workers can overshoot the budget. When a
worker dies the driver `forfeit`s its float: what it held (calls under way that may have been
billed, and whatever it spent since it last told) counts as spent, recorded as one call of cache
status `lost`. That is the price of the floats: a dead worker costs at most its float. The
runner's ledger follows the budget (`take`): the records of the calls it settled are stored by
the driver, as in-process.

`Rates` holds the [limits] windows of budgets.toml (`simrun.simulator._limits.RateWindow`): one window
for the cluster, so that eight workers do not send eight times the allowed rate. A booking is a
quick computation that returns how long to wait; the worker waits out its turn itself, so the
actor is never held. `RemoteLimiter` is what a worker's model user is given in place of a
`RateLimiter`; it sends the actor, through a `Courier`, the bookings of one moment in one call.
The two shared classes are plain Python: `simulator/cluster/_executor.py` makes them actors, on the
driver's node (they die with the driver, never before it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

from simrun._errors import ClusterLost
from simrun.simulator._ledger import Ledger
from simrun.simulator._limits import RateLimiter, RateWindow

FLOAT = "(budget float)"    # the conversation id a dead worker's float is stored under, as the probe's calls are
T = TypeVar("T")


def lost_record(call: dict[str, Any], amount: Decimal) -> dict[str, Any]:
    """A call whose worker died holding it. It may have been billed, so it counts at its worst
    case; what it asked and what came back died with the worker."""
    return {**call, "input_tokens": 0, "cached_input_tokens": 0, "cache_write_tokens": 0, "output_tokens": 0,
            "cost_usd": amount, "latency_ms": 0.0, "cache_status": "lost", "request": None, "answer": None,
            "response": None}


class Budget:
    """The cluster's ledger. It hands each worker a float of the budget (`draw`), held against the
    budget as reservations are in-process, and hears back what the worker spent of it, with the
    records of those calls, when the worker draws again or stops."""

    def __init__(self, budget: Decimal, figures: dict[str, Any], backend: str = "") -> None:
        self.ledger = Ledger(budget)
        self.ledger.follow(figures, [])       # what the run spent before: an earlier attempt, the output probe
        self.backend = backend
        self.floats: dict[str, Decimal] = {}  # each live float: what is held for it now
        self.in_flight: dict[str, int] = {}   # each live float's calls under way, as last reported
        self.dead: set[str] = set()           # floats forfeited: what they report late is not counted again
        self.draws = 0                        # calls from the workers (benchmarks/ray_scaling.py counts them)

    def draw(self, name: str, report: Report, want: Decimal, need: Decimal = Decimal(0)
             ) -> tuple[Decimal, bool, bool]:
        """Take float `name`'s report, then give it up to `want` more (a `want` below zero gives
        that much back): (what is given, whether the budget is exhausted, whether this float was
        forfeited: its worker was given up for dead, and everything it held already counts)."""
        self.draws += 1
        if name in self.dead:
            return Decimal(0), self.ledger.exhausted, True
        self.ledger.charge(report.spent, report.calls, report.overruns, report.records)
        held = self.floats.get(name, Decimal(0)) - report.spent
        if want < 0:
            given = -min(-want, held)
            self.ledger.ungrant(-given)
        else:
            given = self.ledger.grant(want, need)
        self.floats[name] = held + given
        self.in_flight[name] = report.in_flight
        return given, self.ledger.exhausted, False

    def forfeit(self, prefix: str | None = None) -> int:
        """Count what the floats of a dead worker (their names begin with `prefix`; all, with None)
        still hold as spent: calls under way there may have been billed, and what it spent since
        its last report is not known. Each is recorded as one call of cache status `lost`."""
        lost = [name for name in self.floats if prefix is None or name.startswith(prefix)]
        for name in lost:
            held = self.floats.pop(name)
            self.in_flight.pop(name, None)
            self.dead.add(name)
            if held:
                call = {"conversation_id": FLOAT, "turn": None, "backend": self.backend,
                        "model": self.backend.partition(":")[2], "request_hash": f"float {name}"}
                self.ledger.charge(held, calls=1, records=[lost_record(call, held)])
        return len(lost)

    def take(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The ledger's figures (calls in flight as the floats last said), and the records of the
        calls settled since the last take."""
        figures, records = self.ledger.figures(), self.ledger.take_records()
        figures["in_flight"] += sum(self.in_flight.values())
        figures["draws"] = self.draws
        return figures, records


class Rates:
    """The rate windows of the cluster, one per backend spec, each as the limits set it."""

    def __init__(self, limits: dict[str, tuple[int | None, int | None, float]],
                 booked: dict[str, list[tuple[float, int]]] | None = None) -> None:
        self.windows = {spec: RateWindow(*limit) for spec, limit in limits.items()}
        # Calls the driver made before the workers started (the output probe), on this node's
        # clock: they count in the first minute too.
        for spec, bookings in (booked or {}).items():
            self.windows[spec].booked.extend(bookings)

    def book(self, spec: str, tokens: list[int]) -> list[float]:
        """Book calls of `tokens` each, in turn, at the earliest moment each fits; how long each
        caller must wait."""
        now = time.monotonic()
        return [self.windows[spec].book(n, now) - now for n in tokens]


@dataclass
class Report:
    """What a worker tells the budget of its float when it draws: what it spent since it last
    told (and the calls, overruns and records of it), and its calls under way now."""

    spent: Decimal = Decimal(0)
    calls: int = 0
    overruns: int = 0
    in_flight: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)


class Courier:
    """What one worker sends one actor: requests that want an answer (`ask`), and entries that
    want none (`tell`), gathered and sent together in one call, within HOLD_S of the first
    request (else FREE_S of the first entry). A call to an actor costs about a millisecond of
    CPU at each end, as much as a model call costs simrun: one call serves the model calls of
    that moment. An actor runs one caller's calls in the order they were sent, and `send` takes
    the entries before the requests, so whatever a request follows reaches the actor first.
    """

    HOLD_S = 0.002
    FREE_S = 0.05

    def __init__(self, proxy: Any, send: Callable[[list[Any], list[Any]], Awaitable[list[Any]]]) -> None:
        self.proxy, self.send = proxy, send
        self.told: list[Any] = []
        self.asked: list[tuple[Any, asyncio.Future[Any]]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.sending: asyncio.Task[None] | None = None

    async def ask(self, request: Any) -> Any:
        answer = asyncio.get_running_loop().create_future()
        self.asked.append((request, answer))
        self._within(self.HOLD_S)
        return await answer

    def tell(self, entry: Any) -> None:
        self.told.append(entry)
        self._within(self.FREE_S)

    def _within(self, seconds: float) -> None:
        """Send within `seconds` at the latest (sooner if already due sooner)."""
        loop = asyncio.get_running_loop()
        if self.timer is not None:
            if self.timer.when() <= loop.time() + seconds:
                return
            self.timer.cancel()
        self.timer = loop.call_later(seconds, self._due)

    def _due(self) -> None:
        self.timer = None
        # A call under way takes up, once answered, what came meanwhile.
        if self.sending is None or self.sending.done():
            self.sending = asyncio.get_running_loop().create_task(self.flush())
            # A lost actor is told to the requests that asked; nobody else awaits this task.
            self.sending.add_done_callback(lambda task: task.cancelled() or task.exception())

    async def flush(self) -> None:
        """Send what is told and asked now; again while more comes meanwhile."""
        while self.told or self.asked:
            told, self.told = self.told, []
            asked, self.asked = self.asked, []
            try:
                answers = await _ask(self.proxy, self.send(told, [request for request, _ in asked]))
            except LedgerLost as lost:
                for _, answer in asked:
                    if not answer.done():
                        answer.set_exception(lost)
                raise
            for (_, answer), given in zip(asked, answers):
                if not answer.done():
                    answer.set_result(given)


class RemoteLimiter(RateLimiter):
    """A worker's rate limiter: the cluster's window for its backend, booked through the actor
    (the bookings of one moment in one call)."""

    def __init__(self, actor: Any, spec: str, requests_per_minute: int | None,
                 tokens_per_minute: int | None, window_s: float) -> None:
        super().__init__(requests_per_minute, tokens_per_minute, window_s=window_s)
        self.actor, self.spec = actor, spec
        self.lost = False
        self.courier = Courier(self, lambda _, tokens: self.actor.book.remote(self.spec, tokens))

    async def booking(self, tokens: int) -> float:
        wait: float = await self.courier.ask(tokens)
        return wait


class LedgerLost(ClusterLost):
    """The cluster's budget or rate-limit actor is gone: no call a worker makes can be paid for."""


async def _ask(proxy: Any, ref: Awaitable[T]) -> T:
    """An actor's answer; if it cannot give one, the proxy is lost for good, and says so."""
    try:
        return await ref
    except Exception as exc:
        proxy.lost = True
        raise LedgerLost(f"the cluster's {type(proxy).__name__.removeprefix('Remote').lower()} actor is gone: "
                         f"{type(exc).__name__}") from exc
