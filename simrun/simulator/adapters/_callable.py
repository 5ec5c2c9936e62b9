"""The callable transport: an assistant that is a Python function, `module:function`.

The function takes the conversation so far as chat messages (`[{"role": "user", "content":
...}, {"role": "assistant", ...}, ...]`) and the session (`{"id", "turn", "traceparent", "seed",
"persona", "goal", "setup"}`), and returns the reply's text, or a turn-result dict with whatever
protocol fields it has. It may be sync (run in a worker thread, so that a blocking model call
holds up no other conversation) or async (run on simrun's loop). A turn that takes longer than
`runtime.timeout_s` is a `timeout` fault of its conversation.

A thread cannot be stopped: a sync function stuck in code that holds the GIL (a regular
expression that backtracks without end) holds all of simrun, its timeouts and its exit too.
`runtime.isolation = "process"` runs the function in worker processes instead
(simulator/adapters/_callable_worker.py), killed at the turn's timeout (issue 39, rule 6).

The turn's trace context is the current OpenTelemetry context while the function runs, when
the OpenTelemetry API is installed (an instrumented assistant has it): its spans join the
turn's trace with no code. They are read in this process as they end when the assistant's
tracer provider is the global one (simulator/adapters/_local_spans.py); otherwise its exporter
sends them to the receiver, which `OTEL_EXPORTER_OTLP_ENDPOINT` names: simrun sets it in this
process when traces are on, before the function's module is imported, since an exporter made
at import reads it then.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from simrun import _secrets as secrets
from simrun._errors import RuntimeFault, RuntimeUnavailable
from simrun.simulator.adapters._base import EXCERPT_BYTES
from simrun.simulator.adapters._callable_worker import Raised, Worker, trace_context
from simrun.simulator.adapters._foreign import ForeignRuntime
from simrun.simulator.adapters._local_spans import LocalSpans
from simrun.simulator.adapters._python import TRACEBACK_CHARS, guarded, load_attribute
from simrun.simulator.adapters._spans import TraceBook


async def in_thread(function: Callable[..., Any], *args: Any) -> Any:
    """A sync function in a thread of its own, in the current context (the turn's trace). A
    daemon thread: one that never returns while it lets the GIL go costs its conversation (the
    turn's timeout), and neither holds up the others nor keeps simrun from exiting, as a pool's
    worker would. One that holds the GIL holds the whole process until it returns: that is what
    `runtime.isolation = "process"` is for."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if not done.done():
            done.set_result(value) if ok else done.set_exception(value)

    def work() -> None:
        try:
            value, ok = context.run(function, *args), True
        except BaseException as exc:     # handed to the awaiting turn, which makes it a crash
            value, ok = exc, False
        try:
            loop.call_soon_threadsafe(settle, ok, value)
        except RuntimeError:             # the loop has closed: nobody waits for this answer
            pass

    threading.Thread(target=work, name="simrun-callable", daemon=True).start()
    return await done


class CallableRuntime(ForeignRuntime):
    """`target` names the function (`module:function`); `function`, when given, is the function
    itself (a Python caller's object), used in this process in place of importing `target`."""

    def __init__(self, target: str, *, timeout_s: float = 30.0, isolation: str = "thread",
                 startup_timeout_s: float = 30.0, function: Any = None, **settings: Any) -> None:
        if isolation not in ("thread", "process"):
            raise RuntimeUnavailable(f"runtime.isolation {isolation!r}: use \"thread\" or \"process\"")
        self.timeout_s = timeout_s
        self.isolation = isolation
        self.target = target
        self.startup_timeout_s = startup_timeout_s
        self._idle: list[Worker] = []              # workers of no open conversation, ready
        self._workers: dict[str, Worker] = {}      # conversation -> its worker
        self._saved_environment: dict[str, str | None] = {}
        try:
            super().__init__(**settings)
            # With process isolation the function is loaded in its workers only (the first at
            # startup, which says why it cannot be): its module's import-time work is theirs.
            if isolation == "thread" and function is None:
                function = load_attribute(target, "module:function", folder=self.folder)
                if not callable(function):
                    raise RuntimeUnavailable(f"runtime target {target!r} is a {type(function).__name__}, "
                                             "not a function")
        except BaseException:
            self._restore_environment()
            raise
        self.function = function
        self.description = f"callable:{target}"
        # In a worker process, spans are the worker's: they come through its exporter.
        self.local = LocalSpans(self.book) if self.book is not None and isolation == "thread" else None

    def _before_import(self) -> None:
        # The in-process assistant's exporter reads where to send its spans from the environment,
        # often when its module is imported (by the target or the state hook): it is set first,
        # and what was there before is put back when the runtime is closed.
        self._saved_environment = {name: os.environ.get(name) for name in self.trace_environment()}
        os.environ.update(self.trace_environment())

    async def _ready(self) -> None:
        await super()._ready()
        if self.isolation == "process" and not self._idle and not self._workers:
            self._idle.append(await self._started_worker())     # the function loads there, or simrun says why

    async def _started_worker(self) -> Worker:
        worker = Worker(self.target, self.folder)
        try:
            await worker.ready(self.startup_timeout_s)
        except TimeoutError:
            raise RuntimeUnavailable(f"runtime target {self.target!r}: its worker process did not load it within "
                                     f"{self.startup_timeout_s}s (runtime.startup_timeout_s)") from None
        except Raised as exc:
            worker.kill()
            raise RuntimeUnavailable(f"runtime target {self.target!r}: its worker process could not load it: "
                                     f"{exc.kind}: {secrets.cut(exc.message, EXCERPT_BYTES)}") from None
        return worker

    async def _in_process(self, messages: list[dict[str, str]], session: dict[str, Any]) -> Any:
        """One turn in the conversation's worker process; past the timeout the worker is killed."""
        worker = self._workers.get(session["id"])
        if worker is None or not worker.alive():
            worker = self._idle.pop() if self._idle else await self._started_worker()
            self._workers[session["id"]] = worker
        started = time.perf_counter()
        try:
            return await worker.call(messages, session, self.timeout_s)
        except TimeoutError:
            self._workers.pop(session["id"], None)
            raise RuntimeFault("timeout", f"turn: the function gave no answer within {self.timeout_s}s "
                               "(runtime.timeout_s); its worker process was stopped",
                               elapsed_ms=round((time.perf_counter() - started) * 1000, 3)) from None
        except Raised as exc:
            if not worker.alive():      # it ended (os._exit, the interpreter crashed): the next turn gets another
                self._workers.pop(session["id"], None)
                worker.kill()
            text = secrets.redact(exc.text)
            if len(text) > TRACEBACK_CHARS:
                text = "Traceback (most recent call last):\n  …\n" + text[-TRACEBACK_CHARS:].split("\n", 1)[-1]
            raise RuntimeFault("crash", f"the runtime raised in turn: {exc.kind}: "
                               f"{secrets.cut(exc.message, EXCERPT_BYTES)}", traceback=text or None,
                               elapsed_ms=round((time.perf_counter() - started) * 1000, 3)) from None

    async def close(self, session: str) -> None:
        worker = self._workers.pop(session, None)
        if worker is not None and worker.alive():
            self._idle.append(worker)          # the next conversation's
        await super().close(session)

    async def _reply(self, messages: list[dict[str, str]], session: dict[str, Any]) -> Any:
        if self.isolation == "process":
            return await self._in_process(messages, session)
        if self.local is not None:
            self.local.watch()       # every turn: an assistant may set its provider on its first call
        function = self.function
        started = time.perf_counter()
        with trace_context(session["traceparent"]):
            # (An object whose __call__ is async is awaited as an async function is.)
            if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(function.__call__):
                call = guarded("turn", function, messages, session)
            else:
                call = guarded("turn", in_thread, function, messages, session)
            try:
                return await asyncio.wait_for(call, self.timeout_s)
            except TimeoutError:
                raise RuntimeFault("timeout", f"turn: the function gave no answer within {self.timeout_s}s "
                                   "(runtime.timeout_s)",
                                   elapsed_ms=round((time.perf_counter() - started) * 1000, 3)) from None

    async def _settle(self, book: TraceBook, session: str, turn: int) -> None:
        if self.local is not None and self.local.heard:
            # Its spans are read as they end, all before the function returned; the ones handed
            # over from its threads are filed once the loop has run what was queued.
            await asyncio.sleep(0)
            return
        await super()._settle(book, session, turn)

    async def _close_transport(self) -> None:
        workers = [*self._idle, *self._workers.values()]
        self._idle, self._workers = [], {}
        # All at once: closing takes at most one grace period, however many there are.
        await asyncio.gather(*(worker.close() for worker in workers))
        if self.local is not None:
            await self.local.close()
        self._restore_environment()

    def _restore_environment(self) -> None:
        for name, value in self._saved_environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
