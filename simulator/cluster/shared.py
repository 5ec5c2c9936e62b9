"""What the workers of a Ray cluster share: one budget and one rate limit for the whole run.

`Budget` is the run's ledger, kept in one actor: every worker holds each call's worst case
through it and settles the real cost through it, so no number of workers can overshoot the
budget. It knows which conversation holds each reservation, so that when a worker dies the
driver can `forfeit` what that worker's conversations held: those calls may have been billed,
so each counts as spent at its worst case, recorded as a call of cache status `lost`. The
runner's ledger follows it (`take`): the records of the calls it settled are stored by the
driver, as in-process.

`Rates` holds the [limits] windows of budgets.toml (`simulator.limits.RateWindow`): one window
for the cluster, so that eight workers do not send eight times the allowed rate. A booking is a
quick computation that returns how long to wait; the worker waits out its turn itself, so the
actor is never held.

`RemoteLedger` and `RemoteLimiter` are what a worker's model user is given in place of a
`Ledger` and a `RateLimiter`; each sends its actor, through a `Courier`, the calls of one
moment in one. The two shared classes are plain Python: `simulator/cluster/executor.py` makes them
actors, on the driver's node (they die with the driver, never before it).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from scoring.errors import ClusterLost
from simulator.ledger import Ledger, Reservation
from simulator.limits import RateLimiter, RateWindow


def lost_record(call: dict[str, Any], amount: Decimal) -> dict[str, Any]:
    """A call whose worker died holding it. It may have been billed, so it counts at its worst
    case; what it asked and what came back died with the worker."""
    return {**call, "input_tokens": 0, "cached_input_tokens": 0, "cache_write_tokens": 0, "output_tokens": 0,
            "cost_usd": amount, "latency_ms": 0.0, "cache_status": "lost", "request": None, "answer": None,
            "response": None}


class Budget:
    """The cluster's ledger. Reservations are known by number, with the call that holds each."""

    def __init__(self, budget: Decimal, figures: dict[str, Any]) -> None:
        self.ledger = Ledger(budget)
        self.ledger.follow(figures, [])       # what the run spent before: an earlier attempt, the output probe
        self.held: dict[int, tuple[Reservation, dict[str, Any]]] = {}
        self.numbers = itertools.count(1)

    def reserve(self, worst_case: Decimal, call: dict[str, Any]) -> tuple[int | None, Decimal, bool]:
        """(the reservation's number, or None if refused; what is left; whether any call was refused)."""
        reservation = self.ledger.reserve(worst_case)
        number = None
        if reservation is not None:
            number = next(self.numbers)
            self.held[number] = (reservation, call)
        return number, self.ledger.remaining, self.ledger.exhausted

    def settle(self, number: int, actual: Decimal, record: dict[str, Any] | None) -> None:
        held = self.held.pop(number, None)
        # Not held any more: its worker was given up for dead, and the call already counted at
        # its worst case. Counting it again would charge it twice.
        if held is not None:
            self.ledger.settle(held[0], actual, record)

    def release(self, number: int) -> None:
        held = self.held.pop(number, None)
        if held is not None:
            self.ledger.release(held[0])

    def log(self, record: dict[str, Any]) -> None:
        self.ledger.log(record)

    def forfeit(self, conversations: list[str] | None = None) -> int:
        """Count what these conversations hold (all, with None) as spent: their worker is gone."""
        wanted = None if conversations is None else set(conversations)
        lost = [n for n, (_, call) in self.held.items() if wanted is None or call["conversation_id"] in wanted]
        for number in lost:
            reservation, call = self.held.pop(number)
            self.ledger.settle(reservation, reservation.amount, lost_record(call, reservation.amount))
        return len(lost)

    def exchange(self, owed: list[tuple], asked: list[tuple[Decimal, dict[str, Any]]]
                 ) -> tuple[list[tuple[int | None, Decimal, bool]], bool]:
        """A worker's settles, releases and logged records, in the order it made them, then the
        reservations it asks for: each one's answer (as `reserve`), and whether any call has been
        refused (the worker then starts no new conversation)."""
        for kind, *args in owed:
            getattr(self, kind)(*args)
        return [self.reserve(worst_case, call) for worst_case, call in asked], self.ledger.exhausted

    def take(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The ledger's figures, and the records of the calls settled since the last take."""
        return self.ledger.figures(), self.ledger.take_records()


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


@dataclass(frozen=True)
class Held(Reservation):
    number: int = 0


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

    def __init__(self, proxy: RemoteLedger | RemoteLimiter,
                 send: Callable[[list, list], Awaitable[list]], unclaimed: Callable[[Any], None] | None = None
                 ) -> None:
        self.proxy, self.send, self.unclaimed = proxy, send, unclaimed
        self.told: list = []
        self.asked: list[tuple[Any, asyncio.Future]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.sending: asyncio.Task | None = None

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
                elif self.unclaimed is not None:
                    self.unclaimed(given)      # its asker was cancelled meanwhile


class RemoteLedger:
    """A worker's ledger: the cluster's `Budget`, through its actor handle. A call is held
    through it before it is made; what frees a reservation (settling, releasing) and the records
    of replayed calls are told to it, and the conversation goes on at once. A reservation freed
    a few milliseconds later only makes the budget more careful, never overshoot."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.remaining = Decimal(0)    # as of the last answer
        self.exhausted = False         # the cluster refused a call: start no new conversation
        self.lost = False              # the actor is gone: no call can be paid for any more
        self.courier = Courier(self, self._exchange, self._unclaimed)

    async def _exchange(self, told: list[tuple], asked: list[tuple[Decimal, dict]]) -> list[Held | None]:
        answers, exhausted = await self.actor.exchange.remote(told, asked)
        self.exhausted = self.exhausted or exhausted
        held = []
        for (worst_case, _), (number, self.remaining, _) in zip(asked, answers):
            held.append(None if number is None else Held(worst_case, number))
        return held

    def _unclaimed(self, held: Held | None) -> None:
        if held is not None:
            self.release(held)

    async def hold(self, worst_case: Decimal, call: dict[str, Any] | None = None) -> Held | None:
        return await self.courier.ask((Decimal(worst_case), call or {}))

    def settle(self, reservation: Held, actual: Decimal, record: dict | None = None) -> None:
        self.courier.tell(("settle", reservation.number, Decimal(actual), record))

    def release(self, reservation: Held) -> None:
        self.courier.tell(("release", reservation.number))

    def log(self, record: dict) -> None:
        self.courier.tell(("log", record))

    async def flush(self) -> None:
        await self.courier.flush()


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
        return await self.courier.ask(tokens)


class LedgerLost(ClusterLost):
    """The cluster's budget or rate-limit actor is gone: no call a worker makes can be paid for."""


async def _ask(proxy: RemoteLedger | RemoteLimiter, ref) -> Any:
    """An actor's answer; if it cannot give one, the proxy is lost for good, and says so."""
    try:
        return await ref
    except Exception as exc:
        proxy.lost = True
        raise LedgerLost(f"the cluster's {type(proxy).__name__.removeprefix('Remote').lower()} actor is gone: "
                         f"{type(exc).__name__}") from exc
