"""Per-provider rate limits: requests and tokens per minute, waited for, never exceeded."""

from __future__ import annotations

import asyncio

import pytest

from simrun._errors import ConfigError
from simrun._settings import Budgets
from simrun.simulator._limits import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def starts(limiter: RateLimiter, clock: Clock, tokens: list[int]) -> list[float]:
    async def go():
        times = []
        for n in tokens:
            await limiter.acquire(n)
            times.append(clock.now)
        return times

    return asyncio.run(go())


def test_requests_per_minute_are_never_exceeded():
    clock = Clock()
    times = starts(RateLimiter(3, None, clock=clock, sleep=clock.sleep), clock, [10] * 7)
    assert times == [0, 0, 0, 60, 60, 60, 120]
    for t in times:
        assert sum(1 for u in times if t - 60 < u <= t) <= 3


def test_tokens_per_minute_are_never_exceeded():
    clock = Clock()
    tokens = [400, 400, 300, 500, 100]
    times = starts(RateLimiter(None, 1000, clock=clock, sleep=clock.sleep), clock, tokens)
    for i, t in enumerate(times):
        assert sum(n for u, n in zip(times, tokens) if t - 60 < u <= t) <= 1000, (i, times)
    assert times == [0, 0, 60, 60, 60]


def test_limits_are_read_from_budgets_and_reach_the_model_user(monkeypatch):
    from simrun.simulator.users._base import make_user

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    budgets = Budgets.model_validate({
        "prices": {"openai:m": {"input_per_mtok": 1, "output_per_mtok": 2}},
        "limits": {"openai:m": {"requests_per_minute": 5, "tokens_per_minute": 9000}}})
    user = make_user("openai:m", budgets=budgets)
    assert (user.limiter.rpm, user.limiter.tpm) == (5, 9000)


def test_concurrent_callers_are_booked_in_turn_and_never_exceed_either_limit():
    """Many callers at once, as a cluster's workers would ask: every minute-long window holds at
    most the limits, and calls start in the order they asked."""
    import random

    from simrun.simulator._limits import RateWindow

    rng = random.Random(7)
    window = RateWindow(20, 5000)
    asked = sorted(rng.uniform(0, 300) for _ in range(400))
    tokens = [rng.randint(50, 900) for _ in asked]
    starts = [window.book(n, t) for t, n in zip(asked, tokens)]
    assert starts == sorted(starts) and all(s >= t for s, t in zip(starts, asked))
    for s in starts:
        inside = [(u, n) for u, n in zip(starts, tokens) if u <= s < u + 60]
        assert len(inside) <= 20 and sum(n for _, n in inside) <= 5000


def test_a_shorter_window_holds_its_share_of_the_minute_in_every_window_of_its_length():
    """`window_s = 10` with 600 requests and 30,000 tokens a minute: any ten seconds hold at most
    100 requests and 5,000 tokens, and a burst is spread over the windows, not let through."""
    from simrun.simulator._limits import RateWindow

    window = RateWindow(600, 30_000, window_s=10)
    starts = [window.book(40, 0.0) for _ in range(250)]
    assert starts[99] == 0.0 and starts[100] == 10.0 and starts[200] == 20.0     # the 101st waits a window
    for s in starts:
        inside = [u for u in starts if u <= s < u + 10]
        assert len(inside) <= 100 and 40 * len(inside) <= 5000


def test_the_window_is_checked_where_budgets_toml_sets_it(tmp_path):
    from simrun._settings import load_budgets

    toml = tmp_path / "budgets.toml"
    toml.write_text('[limits."openai:m"]\nrequests_per_minute = 60\nwindow_s = 1\n')
    assert load_budgets(toml).limits["openai:m"].window_s == 1
    toml.write_text('[limits."openai:m"]\nrequests_per_minute = 60\nwindow_s = 0.5\n')
    with pytest.raises(ConfigError, match=r"budgets.toml:3 \(limits.openai:m.window_s\)"):
        load_budgets(toml)
