"""Per-provider rate limits (requests and tokens per minute, from budgets.toml).

A sliding window, a minute long unless budgets.toml says `window_s` (some providers enforce a
minute's limits over shorter spans: Anthropic's "60 RPM may be enforced as 1 request per
second"), kept as bookings; a shorter window holds its share of the minute's limits: a call asks
for the earliest moment at which it fits among the calls already booked (requests and tokens), books it, and waits until
then. Bookings are made in the order calls ask, so a burst of concurrent conversations is
spread out in turn rather than rejected by the provider with 429s, which would only cost
retries. Booking is a plain, quick computation with no waiting inside it, which is what lets one
window serve every worker of a cluster (`simulator/cluster/_shared.py` holds it in one Ray actor).
"""

from __future__ import annotations

import asyncio
import collections
import time
import weakref
from collections.abc import Awaitable, Callable

WINDOW_S = 60.0


class RateWindow:
    """The bookings of the last window, and the rule that no window holds more than its share
    of the limits (all of them, in a window of a minute)."""

    def __init__(self, requests_per_minute: int | None = None, tokens_per_minute: int | None = None,
                 window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        share = window_s / WINDOW_S
        self.requests = None if requests_per_minute is None else max(1, int(requests_per_minute * share))
        self.tokens = None if tokens_per_minute is None else max(1, int(tokens_per_minute * share))
        self.booked: collections.deque[tuple[float, int]] = collections.deque()   # (start, tokens), in order

    def book(self, tokens: int, now: float) -> float:
        """Book a call of `tokens` at the earliest moment it fits, at `now` or later; return it."""
        # A call started at `start` counts until start + window_s, and no longer (always this sum,
        # so that floating point draws the line in the same place every time).
        while self.booked and self.booked[0][0] + self.window_s <= now:
            self.booked.popleft()
        tokens = min(tokens, self.tokens) if self.tokens is not None else tokens
        at = max(now, self.booked[-1][0]) if self.booked else now     # in the order asked
        if self.requests is not None and len(self.booked) >= self.requests:
            # The call that many calls back must have left the window.
            at = max(at, self.booked[-self.requests][0] + self.window_s)
        if self.tokens is not None:
            used = sum(n for start, n in self.booked if start + self.window_s > at)
            for start, n in self.booked:                            # oldest first: each leaves in turn
                if start + self.window_s <= at:
                    continue                                        # gone by then already
                if used + tokens <= self.tokens:
                    break
                used -= n
                at = start + self.window_s
        self.booked.append((at, tokens))
        return at


class RateLimiter:
    """The window of one process: each call waits until its booked moment."""

    def __init__(self, requests_per_minute: int | None = None, tokens_per_minute: int | None = None, *,
                 window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        self.rpm, self.tpm = requests_per_minute, tokens_per_minute
        self.window = RateWindow(requests_per_minute, tokens_per_minute, window_s)
        self.clock, self.sleep = clock, sleep
        self.waited_s = 0.0
        self.waiting = 0            # calls sleeping for their moment now
        _LIVE.add(self)

    def describe(self) -> str:
        """The limit as budgets.toml sets it: "60 requests/min, 100000 tokens/min"."""
        parts = [f"{self.rpm} requests/min" if self.rpm is not None else "",
                 f"{self.tpm} tokens/min" if self.tpm is not None else ""]
        return ", ".join(p for p in parts if p) or "no limit"

    async def booking(self, tokens: int) -> float:
        """Book a call of `tokens`; how long it must wait for its moment (a cluster's workers book
        in one window: `simrun.simulator.cluster._shared.RemoteLimiter`)."""
        now = self.clock()
        return self.window.book(tokens, now) - now

    async def acquire(self, tokens: int) -> None:
        wait = await self.booking(tokens)
        if wait > 0:
            self.waited_s += wait
            self.waiting += 1
            try:
                await self.sleep(wait)
            finally:
                self.waiting -= 1


# The limiters of this process, for the progress line to say what a run waits on (a run that
# only waits on a limit looks, from its figures alone, like a slow model).
_LIVE: weakref.WeakSet[RateLimiter] = weakref.WeakSet()


def waited() -> dict[int, float]:
    """How long each live limiter has made calls wait, so far: what a run's progress counts from."""
    return {id(limiter): limiter.waited_s for limiter in list(_LIVE)}


def waiting_text(since: dict[int, float] | None = None) -> str:
    """" · 4 calls waiting on a rate limit (60 requests/min of budgets.toml), 312 s waited so
    far" (since `since`, from `waited()`), or "" when no limiter of this process has made a call wait."""
    since = since or {}
    limiters = [limiter for limiter in list(_LIVE) if limiter.waited_s > since.get(id(limiter), 0.0)]
    if not limiters:
        return ""
    now = sum(limiter.waiting for limiter in limiters)
    total = sum(limiter.waited_s - since.get(id(limiter), 0.0) for limiter in limiters)
    limits = "; ".join(sorted({limiter.describe() for limiter in limiters}))
    return (f" · {now} call{'' if now == 1 else 's'} waiting on a rate limit ({limits} of budgets.toml), "
            f"{total:.0f} s waited so far")
