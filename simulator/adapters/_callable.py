"""The callable transport: an assistant that is a Python function, `module:function`.

The function takes the conversation so far as chat messages (`[{"role": "user", "content":
...}, {"role": "assistant", ...}, ...]`) and the session (`{"id", "turn", "traceparent", "seed",
"persona", "goal", "setup"}`), and returns the reply's text, or a turn-result dict with whatever
protocol fields it has. It may be sync (run in a worker thread, so that a blocking model call
holds up no other conversation) or async (run on simrun's loop). A turn that takes longer than
`runtime.timeout_s` is a `timeout` fault of its conversation.

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
import contextlib
import contextvars
import inspect
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from simrun.scoring import RuntimeFault, RuntimeUnavailable
from simrun.simulator.adapters._foreign import ForeignRuntime
from simrun.simulator.adapters._local_spans import LocalSpans
from simrun.simulator.adapters._python import guarded, load_attribute
from simrun.simulator.adapters._spans import TraceBook


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


async def in_thread(function, *args) -> Any:
    """A sync function in a thread of its own, in the current context (the turn's trace). A
    daemon thread: one that never returns costs its conversation (the turn's timeout), and
    neither holds up the others nor keeps simrun from exiting, as a pool's worker would."""
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
    def __init__(self, target: str, *, timeout_s: float = 30.0, **settings: Any) -> None:
        self.timeout_s = timeout_s
        self._saved_environment: dict[str, str | None] = {}
        try:
            super().__init__(**settings)
            function = load_attribute(target, "module:function", folder=self.folder)
            if not callable(function):
                raise RuntimeUnavailable(f"runtime target {target!r} is a {type(function).__name__}, not a function")
        except BaseException:
            self._restore_environment()
            raise
        self.function = function
        self.description = f"callable:{target}"
        self.local = LocalSpans(self.book) if self.book is not None else None

    def _before_import(self) -> None:
        # The in-process assistant's exporter reads where to send its spans from the environment,
        # often when its module is imported (by the target or the state hook): it is set first,
        # and what was there before is put back when the runtime is closed.
        self._saved_environment = {name: os.environ.get(name) for name in self.trace_environment()}
        os.environ.update(self.trace_environment())

    async def _reply(self, messages: list[dict[str, str]], session: dict[str, Any]) -> Any:
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
        if self.local is not None:
            await self.local.close()
        self._restore_environment()

    def _restore_environment(self) -> None:
        for name, value in self._saved_environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
