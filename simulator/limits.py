"""Per-provider rate limits (requests and tokens per minute, from budgets.toml).

A sliding window over the last minute, kept as bookings: a call asks for the earliest moment at
which it fits among the calls already booked (requests and tokens), books it, and waits until
then. Bookings are made in the order calls ask, so a burst of concurrent conversations is
spread out in turn rather than rejected by the provider with 429s, which would only cost
retries. Booking is a plain, quick computation with no waiting inside it, which is what lets one
window serve every worker of a cluster (`simulator/cluster.py` holds it in one Ray actor).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable

WINDOW_S = 60.0


class RateWindow:
    """The bookings of the last minute, and the rule that no minute holds more than the limits."""

    def __init__(self, requests_per_minute: int | None = None, tokens_per_minute: int | None = None) -> None:
        self.rpm, self.tpm = requests_per_minute, tokens_per_minute
        self.booked: collections.deque[tuple[float, int]] = collections.deque()   # (start, tokens), in order

    def book(self, tokens: int, now: float) -> float:
        """Book a call of `tokens` at the earliest moment it fits, at `now` or later; return it."""
        # A call started at `start` counts until start + WINDOW_S, and no longer (always this sum,
        # so that floating point draws the line in the same place every time).
        while self.booked and self.booked[0][0] + WINDOW_S <= now:
            self.booked.popleft()
        tokens = min(tokens, self.tpm) if self.tpm is not None else tokens
        at = max(now, self.booked[-1][0]) if self.booked else now     # in the order asked
        if self.rpm is not None and len(self.booked) >= self.rpm:
            # The rpm-th most recent call must have left the window.
            at = max(at, self.booked[-self.rpm][0] + WINDOW_S)
        if self.tpm is not None:
            used = sum(n for start, n in self.booked if start + WINDOW_S > at)
            for start, n in self.booked:                            # oldest first: each leaves in turn
                if start + WINDOW_S <= at:
                    continue                                        # gone by then already
                if used + tokens <= self.tpm:
                    break
                used -= n
                at = start + WINDOW_S
        self.booked.append((at, tokens))
        return at


class RateLimiter:
    """The window of one process: each call waits until its booked moment."""

    def __init__(self, requests_per_minute: int | None = None, tokens_per_minute: int | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        self.window = RateWindow(requests_per_minute, tokens_per_minute)
        self.clock, self.sleep = clock, sleep
        self.waited_s = 0.0

    @property
    def rpm(self) -> int | None:
        return self.window.rpm

    @property
    def tpm(self) -> int | None:
        return self.window.tpm

    async def booking(self, tokens: int) -> float:
        """Book a call of `tokens`; how long it must wait for its moment (a cluster's workers book
        in one window: `simulator.cluster.RemoteLimiter`)."""
        now = self.clock()
        return self.window.book(tokens, now) - now

    async def acquire(self, tokens: int) -> None:
        wait = await self.booking(tokens)
        if wait > 0:
            self.waited_s += wait
            await self.sleep(wait)
