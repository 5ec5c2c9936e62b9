"""The event loop every command runs on: uvloop where it is installed, asyncio's own otherwise.

At hundreds of conversations in flight the harness's own CPU is the limit (benchmarks/
README.md), and uvloop's loop and transports cost less per request than asyncio's. It is a
dependency on Linux and macOS; Windows has none, and runs on the standard loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` on the fastest loop available."""
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(coroutine)
