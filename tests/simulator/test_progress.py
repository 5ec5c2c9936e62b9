"""The heartbeat: outside a terminal, a line every PLAIN_EVERY_S, with the calls in flight and the
spend including what is held for them, even before any conversation has finished."""

from __future__ import annotations

import asyncio
import io
import re
from decimal import Decimal

from rich.console import Console

from simrun.examples.tripdesk import TripDesk
from simrun.scoring.store._database import Store
from simrun.simulator import _progress as progress
from simrun.simulator._ledger import Ledger
from simrun.simulator._progress import RunProgress
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._process import free_port
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._model import ModelUser
from simrun.simulator.users._providers import OpenAIProvider
from tests.fixtures.model_api import FakeModelAPI, serve
from tests.simulator.users.test_model_users import PRICE, small


def test_a_heartbeat_comes_before_any_conversation_finishes(demo, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-heartbeat-000")
    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.2)
    port = free_port()
    server = serve(FakeModelAPI(record=False), port, latency_s=0.5)    # a conversation takes seconds
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=False, width=200)
    ledger = Ledger(Decimal(1))
    user = ModelUser("openai:m", OpenAIProvider("m", base_url=f"http://127.0.0.1:{port}/v1"), PRICE, ledger,
                     output="json_schema")
    dataset = small(demo, ("single-add-bag", "cancel-trip"))

    async def go():
        with Store(":memory:") as store, RunProgress(console, 4, ledger.budget, ledger) as bar:
            await run_matrix(dataset, PythonRuntime(TripDesk()), user, store, repetitions=1, seed=5,
                             budget=ledger.budget, concurrency=4, ledger=ledger, on_conversation=bar)

    try:
        asyncio.run(go())
    finally:
        server.should_exit = True
    lines = sink.getvalue().splitlines()
    early = [line for line in lines if line.startswith("[0/4]")]
    assert len(early) >= 2, lines          # the first conversation takes at least a second: beats came before it
    flying = re.search(r"(\d+) call\(s\) in flight · spent \$([\d.]+) \(\$([\d.]+) of it held", early[0])
    assert flying and int(flying.group(1)) == 4 and Decimal(flying.group(3)) > 0
    assert Decimal(flying.group(2)) >= Decimal(flying.group(3))
    assert lines[-1].startswith("[4/4]")


def test_in_a_terminal_there_is_a_bar_and_no_heartbeat():
    console = Console(file=io.StringIO(), force_terminal=True)

    async def go():
        with RunProgress(console, 3, Decimal(1), Ledger(Decimal(1))) as bar:
            return bar.heartbeat, bar.bar

    heartbeat, bar = asyncio.run(go())
    assert heartbeat is None and bar is not None


def test_the_time_left_comes_from_the_pace_measured_so_far():
    ledger = Ledger(Decimal(1))
    bar = RunProgress(Console(file=io.StringIO(), force_terminal=False), 20, Decimal(1), ledger, calls=10)
    assert bar.pace() == ""                          # no call settled yet: no pace to speak of
    ledger.calls = 4
    bar.started -= 8.0                               # 4 calls in 8 s: 2 s a call, 6 calls to go
    assert re.fullmatch(r" · 2\.0s a call, about 1[12] s left", bar.pace())
    assert bar.pace() in bar.status()
    ledger.calls = 12                                # more calls than planned: nothing is left, not less
    assert bar.pace().endswith("about 0 s left")
    assert RunProgress(Console(file=io.StringIO()), 2, Decimal(1), ledger).pace() == ""   # a run: no plan of calls


def test_a_duration_reads_as_people_say_it():
    assert [progress.duration(s) for s in (0, 59.4, 61, 3000, 3599, 7500)] == [
        "0 s", "59 s", "1 min", "50 min", "1 h 0 min", "2 h 5 min"]


def test_the_heartbeat_says_when_the_run_waits_on_a_rate_limit(demo, monkeypatch):
    """A local server under a hosted model's name inherits its limit from budgets.toml: the line says
    the run is waiting on it (issue 41), rather than looking like a slow model."""
    from simrun.simulator._limits import RateLimiter

    monkeypatch.setenv("OPENAI_API_KEY", "sk-heartbeat-000")
    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.2)
    port = free_port()
    server = serve(FakeModelAPI(record=False), port)
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=False, width=300)
    ledger = Ledger(Decimal(1))
    # 60 a minute in windows of a second: one call a second, the rest wait their turn.
    limiter = RateLimiter(60, None, window_s=1.0)
    user = ModelUser("openai:m", OpenAIProvider("m", base_url=f"http://127.0.0.1:{port}/v1"), PRICE, ledger,
                     output="json_schema", limiter=limiter)
    dataset = small(demo, ("single-add-bag", "cancel-trip"))

    async def go():
        with Store(":memory:") as store, RunProgress(console, 4, ledger.budget, ledger) as bar:
            await run_matrix(dataset, PythonRuntime(TripDesk()), user, store, repetitions=1, seed=5,
                             budget=ledger.budget, concurrency=4, ledger=ledger, on_conversation=bar)

    try:
        asyncio.run(go())
    finally:
        server.should_exit = True
    lines = sink.getvalue().splitlines()
    waiting = [re.search(r"(\d+) calls? waiting on a rate limit \(60 requests/min of budgets.toml\), "
                         r"(\d+) s waited so far", line) for line in lines]
    assert any(w and int(w.group(1)) >= 1 for w in waiting), lines
    assert limiter.waited_s > 1 and limiter.waiting == 0
