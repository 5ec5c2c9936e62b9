"""A callable assistant's turns in a worker process that can be stopped (`runtime.isolation = "process"`).

A sync function runs in a thread of simrun's process by default, and a thread cannot be stopped:
one stuck in C code that holds the GIL (a regular expression that backtracks without end) holds
every thread of the process, so no timeout fires, no other conversation goes on, and SIGTERM's
handler never runs. With process isolation each conversation's turns run in a worker process of
its own, started afresh (spawn) and reused by later conversations: past `runtime.timeout_s` the
worker is killed, the turn is a `timeout` fault, and simrun goes on. Closing the runtime asks each
worker to end and kills it after `GRACE_S`, so simrun's exit never waits longer; a worker also
dies with simrun (PR_SET_PDEATHSIG on Linux), even if simrun is killed.

What the function returns crosses to simrun by pickle (JSON's types always do); its spans go out
through its exporter to simrun's receiver (the worker inherits `OTEL_EXPORTER_OTLP_ENDPOINT`),
not read in simrun's process; what it keeps in memory is the worker's, so a state hook, which
runs in simrun's process, reads what it keeps outside it (a file, a database, a server).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import multiprocessing
import os
import signal
import sys
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

GRACE_S = 2.0      # what closing a worker may take before it is killed: its exporter's last flush
FLUSH_TIMEOUT_MS = 1500
# A message on a worker's pipe, as pickle carries it: its kind ("call", "ok", "raised", ...)
# first, then what that kind holds.
Message = tuple[Any, ...]


@contextlib.contextmanager
def trace_context(traceparent: str | None) -> Iterator[None]:
    """`traceparent` as the current OpenTelemetry context, if the API is there to hold it."""
    try:
        from opentelemetry import context
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        yield
        return
    if traceparent is None:
        yield
        return
    token = context.attach(TraceContextTextMapPropagator().extract({"traceparent": traceparent}))
    try:
        yield
    finally:
        context.detach(token)


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when simrun's process ends, however it ends."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)      # PR_SET_PDEATHSIG


def serve(conn: Connection, target: str, folder: str | None) -> None:
    """The worker: load the function, then answer ("call", messages, session) until "close"."""
    _die_with_parent()
    from simrun.simulator.adapters._python import load_attribute

    try:
        function = load_attribute(target, "module:function", folder=folder)
        if not callable(function):
            raise TypeError(f"runtime target {target!r} is a {type(function).__name__}, not a function")
    except BaseException as exc:
        conn.send(("raised", type(exc).__name__, str(exc), "".join(traceback.format_exception(exc))))
        return
    conn.send(("ready",))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "close":
            _flush()
            return
        _, messages, session = message
        try:
            with trace_context(session.get("traceparent")):
                value = function(messages, session)
                if inspect.isawaitable(value):
                    value = asyncio.run(_awaited(value))
            answer: Message = ("ok", value)
        except BaseException as exc:
            answer = ("raised", type(exc).__name__, str(exc), "".join(traceback.format_exception(exc)))
        try:
            conn.send(answer)
        except Exception as exc:     # an answer pickle cannot carry
            conn.send(("raised", type(exc).__name__, f"its answer cannot leave the worker process: {exc}", ""))


async def _awaited(value: Any) -> Any:
    return await value


def _flush() -> None:
    """Send what the worker's exporter still holds, before it ends."""
    with contextlib.suppress(Exception):
        from opentelemetry import trace

        provider = trace.get_tracer_provider()
        if hasattr(provider, "force_flush"):
            provider.force_flush(FLUSH_TIMEOUT_MS)


@contextlib.contextmanager
def apart_from_main() -> Iterator[None]:
    """While a process is spawned: the child is not made to run simrun's caller's script again
    (spawn re-runs `__main__` by its path, which a script without `if __name__ == "__main__":`
    cannot bear); what a worker runs is simrun's own modules, which need nothing of it."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {name: getattr(main, name) for name in ("__file__", "__spec__") if hasattr(main, name)}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.update(saved)


class Raised(Exception):
    """What the function raised in the worker: its type's name, its message and its traceback."""

    def __init__(self, kind: str, message: str, text: str) -> None:
        super().__init__(message)
        self.kind, self.message, self.text = kind, message, text


# A message this size or smaller fits in the pipe's buffer: sent at once, it cannot block.
SMALL_MESSAGE_BYTES = 32 * 1024


async def sent(conn: Connection, message: Message) -> None:
    """`message` on a worker's pipe, whole. An event loop that watched the pipe (`answer_of`;
    uvloop) may leave it non-blocking, and a message past the pipe's buffer would then fail half
    sent (EAGAIN): the pipe is made blocking for the send, and a large message (an export of
    spans, a long conversation) is sent from a thread, so that the loop never waits for the
    worker to read it."""
    data = bytes(ForkingPickler.dumps(message))

    def send() -> None:
        os.set_blocking(conn.fileno(), True)
        conn.send_bytes(data)

    if len(data) <= SMALL_MESSAGE_BYTES:
        send()
    else:
        await asyncio.to_thread(send)


async def answer_of(conn: Connection, process: BaseProcess, timeout_s: float) -> Message:
    """The next message from a worker's pipe, read when it is there (no thread waits for it);
    TimeoutError past `timeout_s`, `Raised` if the worker has ended."""
    loop = asyncio.get_running_loop()
    got: asyncio.Future[Message] = loop.create_future()

    def readable() -> None:
        if got.done():
            return
        try:
            # The first bytes are here and the worker sends each message whole: read it to its end,
            # blocking if need be (a loop that watches the pipe may have made it non-blocking, and
            # a message past the pipe's buffer would then break off half read).
            os.set_blocking(conn.fileno(), True)
            got.set_result(conn.recv())
        except (EOFError, OSError):
            got.set_exception(Raised("WorkerExited", f"the worker process ended (exit code {process.exitcode})", ""))
        except BaseException as exc:
            got.set_exception(exc)

    fd = conn.fileno()
    loop.add_reader(fd, readable)
    try:
        return await asyncio.wait_for(got, timeout_s)
    finally:
        with contextlib.suppress(Exception):
            loop.remove_reader(fd)


def die_with_parent() -> None:
    _die_with_parent()


class Worker:
    """One worker process, and the pipe to it."""

    def __init__(self, target: str, folder: str | Path | None) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child, target, None if folder is None else str(folder)),
                                       name="simrun-callable", daemon=True)
        with apart_from_main():
            self.process.start()
        child.close()

    async def ready(self, timeout_s: float) -> None:
        answer = await self._answer(timeout_s)
        if answer[0] != "ready":
            raise Raised(*answer[1:])

    async def call(self, messages: list[dict[str, str]], session: dict[str, Any], timeout_s: float) -> Any:
        """The function's answer; TimeoutError past `timeout_s` (the worker is then killed)."""
        await sent(self.conn, ("call", messages, session))
        answer = await self._answer(timeout_s)
        if answer[0] == "ok":
            return answer[1]
        raise Raised(*answer[1:])

    async def _answer(self, timeout_s: float) -> Message:
        try:
            return await answer_of(self.conn, self.process, timeout_s)
        except TimeoutError:
            self.kill()
            raise

    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        """Ended now: SIGKILL cannot be ignored, by a GIL held or anything else."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(1)
        self.conn.close()

    async def close(self) -> None:
        """Asked to end (its exporter flushes), and killed if it has not within GRACE_S."""
        if self.process.is_alive():
            with contextlib.suppress(Exception):
                await sent(self.conn, ("close",))
            deadline = asyncio.get_running_loop().time() + GRACE_S
            while self.process.is_alive() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.02)
        self.kill()
