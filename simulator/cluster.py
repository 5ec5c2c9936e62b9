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
`Ledger` and a `RateLimiter`. The two shared classes are plain Python: `simulator/ray_executor.py`
makes them actors, on the driver's node (they die with the driver, never before it).
"""

from __future__ import annotations

import asyncio
import itertools
import time
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

    def __init__(self, limits: dict[str, tuple[int | None, int | None]],
                 booked: dict[str, list[tuple[float, int]]] | None = None) -> None:
        self.windows = {spec: RateWindow(rpm, tpm) for spec, (rpm, tpm) in limits.items()}
        # Calls the driver made before the workers started (the output probe), on this node's
        # clock: they count in the first minute too.
        for spec, bookings in (booked or {}).items():
            self.windows[spec].booked.extend(bookings)

    def book(self, spec: str, tokens: int) -> float:
        """Book a call of `tokens` at the earliest moment it fits; how long the caller must wait."""
        now = time.monotonic()
        return self.windows[spec].book(tokens, now) - now


@dataclass(frozen=True)
class Held(Reservation):
    number: int = 0


class RemoteLedger:
    """A worker's ledger: the cluster's `Budget`, through its actor handle.

    A call is held before it is made, through the actor; what frees a reservation (settling,
    releasing) and the records of replayed calls are owed to it, and the conversation goes on at
    once. Both travel together, one exchange every HOLD_S while calls ask to be held (else every
    FREE_S): a call to an actor costs about a millisecond of CPU at each end, as much as a
    model call costs simrun, so one exchange serves the calls of that moment. The actor answers
    one caller in the order it asked, so a settle always follows its reservation; a reservation
    freed a few milliseconds later only makes the budget more careful, never overshoot.
    """

    HOLD_S = 0.002
    FREE_S = 0.05

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.remaining = Decimal(0)    # as of the last answer
        self.exhausted = False         # the cluster refused a call: start no new conversation
        self.lost = False              # the actor is gone: no call can be paid for any more
        self.owed: list[tuple] = []    # settles, releases and records not yet sent
        self.asked: list[tuple[Decimal, dict, asyncio.Future]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.sending: asyncio.Task | None = None

    async def hold(self, worst_case: Decimal, call: dict[str, Any] | None = None) -> Held | None:
        answer = asyncio.get_running_loop().create_future()
        self.asked.append((Decimal(worst_case), call or {}, answer))
        self._send(self.HOLD_S)
        return await answer

    def settle(self, reservation: Held, actual: Decimal, record: dict | None = None) -> None:
        self._owe(("settle", reservation.number, Decimal(actual), record))

    def release(self, reservation: Held) -> None:
        self._owe(("release", reservation.number))

    def log(self, record: dict) -> None:
        self._owe(("log", record))

    def _owe(self, entry: tuple) -> None:
        self.owed.append(entry)
        self._send(self.FREE_S)

    def _send(self, within: float) -> None:
        """Exchange within `within` seconds at the latest (sooner if already due sooner)."""
        loop = asyncio.get_running_loop()
        if self.timer is not None:
            if self.timer.when() <= loop.time() + within:
                return
            self.timer.cancel()
        self.timer = loop.call_later(within, self._due)

    def _due(self) -> None:
        self.timer = None
        # An exchange under way takes up, when it is answered, what came meanwhile.
        if self.sending is None or self.sending.done():
            self.sending = asyncio.get_running_loop().create_task(self.flush())
            # A lost actor is told to the calls that asked; nobody else awaits this task.
            self.sending.add_done_callback(lambda task: task.cancelled() or task.exception())

    async def flush(self) -> None:
        """Exchange what is owed and asked now; again while more comes meanwhile."""
        while self.owed or self.asked:
            owed, self.owed = self.owed, []
            asked, self.asked = self.asked, []
            try:
                answers, exhausted = await _ask(self, self.actor.exchange.remote(owed, [a[:2] for a in asked]))
            except LedgerLost as lost:
                for *_, answer in asked:
                    if not answer.done():
                        answer.set_exception(lost)
                raise
            self.exhausted = self.exhausted or exhausted
            for (worst_case, _, answer), (number, self.remaining, _) in zip(asked, answers):
                held = None if number is None else Held(worst_case, number)
                if not answer.done():
                    answer.set_result(held)
                elif held is not None:
                    self.owed.append(("release", number))   # its conversation was cancelled meanwhile


class RemoteLimiter(RateLimiter):
    """A worker's rate limiter: the cluster's window for its backend, booked through the actor."""

    def __init__(self, actor: Any, spec: str, requests_per_minute: int | None,
                 tokens_per_minute: int | None) -> None:
        super().__init__(requests_per_minute, tokens_per_minute)
        self.actor, self.spec = actor, spec
        self.lost = False

    async def booking(self, tokens: int) -> float:
        return await _ask(self, self.actor.book.remote(self.spec, tokens))


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
