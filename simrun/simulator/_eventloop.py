"""The event loop every command runs on: uvloop where it is installed, asyncio's own otherwise.

At hundreds of conversations in flight the harness's own CPU is the limit (benchmarks/
README.md), and uvloop's loop and transports cost less per request than asyncio's. It is a
dependency on Linux and macOS; Windows has none, and runs on the standard loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` on the fastest loop available. SIGTERM (what CI sends a cancelled job, and
    `timeout`) stops it the way Ctrl-C does: finished work is kept, and started processes stopped."""
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner, _terminate_as_interrupt():
        return runner.run(coroutine)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
