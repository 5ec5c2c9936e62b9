"""Retries are tenacity's, wholly: every attempt, the first included, is one tenacity counts, so
its stop, wait and retry rules (and anything a team sets on them) apply to all of them alike."""

from __future__ import annotations

import asyncio
import gc

import pytest
from tenacity import AsyncRetrying

from simrun._errors import ProviderFailure
from simrun.simulator.users import ModelStatusError, _retry
from simrun.simulator.users._retry import RetryPolicy


class Counted(AsyncRetrying):
    """tenacity's AsyncRetrying, counting the attempts it hands out."""

    attempts = 0

    async def __anext__(self):
        attempt = await super().__anext__()
        Counted.attempts += 1
        return attempt


@pytest.mark.parametrize(("failures", "expected"), [(0, 1), (1, 2), (4, 4)])
def test_every_attempt_runs_inside_tenacity(monkeypatch, failures, expected):
    monkeypatch.setattr(_retry, "AsyncRetrying", Counted)
    Counted.attempts = 0
    calls = []
    waits = []

    async def attempt():
        calls.append(1)
        if len(calls) <= failures:
            raise ModelStatusError("Error code: 503", status_code=503, headers={"retry-after": "0.5"}, body=None)
        return "answered"

    async def record(seconds):
        waits.append(seconds)

    async def go():
        try:
            return await RetryPolicy(attempts=4, sleep=record).call(attempt)
        except ProviderFailure as failure:
            return failure.kind

    outcome = asyncio.run(go())
    assert len(calls) == expected and Counted.attempts == expected
    assert outcome == ("retries_exhausted" if failures >= 4 else "answered")
    assert waits == [0.5] * min(failures, 3)       # Retry-After, read off simrun's own error


def test_a_status_that_no_retry_can_fix_is_attempted_once():
    calls = []

    async def attempt():
        calls.append(1)
        raise ModelStatusError("Error code: 401 - bad key", status_code=401, headers={}, body={"message": "bad key"})

    with pytest.raises(ProviderFailure) as info:
        asyncio.run(RetryPolicy(attempts=4).call(attempt))
    assert len(calls) == 1 and info.value.kind == "refused" and info.value.evidence["status"] == 401
    assert info.value.evidence["server_message"] == "bad key"


def test_calls_leave_no_cyclic_garbage_and_reuse_their_controllers(monkeypatch):
    """tenacity's controller and its call state refer to each other, so a controller made for each
    call is garbage only the cyclic collector frees (about 34 objects a model call, whose
    collections cost the harness a twentieth of a millisecond a call: benchmarks/call_cpu.py).
    The policy keeps one controller for each call in flight and iterates it again."""
    monkeypatch.setattr(_retry, "AsyncRetrying", Counted)
    made = []
    monkeypatch.setattr(Counted, "__init__", lambda self, **kw: made.append(1) or AsyncRetrying.__init__(self, **kw))
    policy = RetryPolicy(attempts=3)
    flaky = {"left": 1}

    async def answer():
        return "answered"

    async def fails_once():
        if flaky["left"]:
            flaky["left"] -= 1
            raise ModelStatusError("Error code: 503", status_code=503, headers={"retry-after": "0"}, body=None)
        return "answered"

    async def go():
        assert await policy.call(answer) == "answered"      # a controller made, and kept
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(50):
                assert await policy.call(answer) == "answered"
            assert await policy.call(fails_once) == "answered"     # a retry, on the same controller
            gc.collect()
            return [o for o in gc.garbage if type(o).__module__.startswith("tenacity")]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()

    assert asyncio.run(go()) == []
    assert len(made) == 1

    async def awaited():
        await asyncio.sleep(0)     # (the others start meanwhile)
        return "answered"

    async def at_once():
        return await asyncio.gather(*(policy.call(awaited) for _ in range(8)))

    assert asyncio.run(at_once()) == ["answered"] * 8
    assert len(made) == 8       # one for each call in flight, the first one's among them
