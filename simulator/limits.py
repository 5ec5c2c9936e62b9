"""Per-provider rate limits (requests and tokens per minute, from budgets.toml).

A sliding window over the last minute: a call waits until both its request and its tokens fit.
Calls wait in turn (a lock), so a burst of concurrent conversations is spread out rather than
rejected by the provider with 429s, which would only cost retries.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable

WINDOW_S = 60.0


class RateLimiter:
    def __init__(self, requests_per_minute: int | None = None, tokens_per_minute: int | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        self.rpm, self.tpm = requests_per_minute, tokens_per_minute
        self.clock, self.sleep = clock, sleep
        self.window: collections.deque[tuple[float, int]] = collections.deque()
        self.lock = asyncio.Lock()
        self.waited_s = 0.0

    def _room(self, tokens: int) -> float:
        """Seconds until a call of `tokens` fits (0: it fits now)."""
        now = self.clock()
        while self.window and now - self.window[0][0] >= WINDOW_S:
            self.window.popleft()
        if self.rpm is not None and len(self.window) >= self.rpm:
            return self.window[0][0] + WINDOW_S - now
        if self.tpm is not None and self.window:
            used = sum(t for _, t in self.window)
            if used + min(tokens, self.tpm) > self.tpm:
                # Wait for as many of the oldest calls to leave as it takes to make room.
                freed = 0
                for at, t in self.window:
                    freed += t
                    if used - freed + min(tokens, self.tpm) <= self.tpm:
                        return at + WINDOW_S - now
        return 0.0

    async def acquire(self, tokens: int) -> None:
        async with self.lock:
            while (wait := self._room(tokens)) > 0:
                self.waited_s += wait
                await self.sleep(wait)
            self.window.append((self.clock(), tokens))
