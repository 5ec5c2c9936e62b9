"""The spans of an assistant that runs in simrun's own process, read the moment they end.

A callable assistant instrumented with the OpenTelemetry SDK makes its spans in this process.
When its tracer provider is the global SDK one (`trace.set_tracer_provider`, as the SDK's own
set-up and every auto-instrumentation do), simrun adds one span processor to it: each span of a
turn simrun gave a trace context to is filed as it ends, so all of a turn's spans are in when the
function returns. No exporter is needed, its batch delay (5 s by default) costs nothing, and
there is nothing to wait for after the reply. The assistant's own exporter may send the same
spans to the receiver as well; the book keeps a span once.

A provider that is not the global one (made and used privately) is not seen here; its spans
come through its exporter, as a server's do.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from simrun.simulator.adapters._spans import Span, TraceBook

if TYPE_CHECKING:      # (an optional dependency: imported where it is used)
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

_watchers: set[LocalSpans] = set()      # the open callable runtimes that read local spans
_providers: set[int] = set()              # the providers our processor is attached to (by id)
FLUSH_TIMEOUT_MS = 3000


class LocalSpans:
    """Files the spans this process ends into one runtime's book, on that runtime's loop."""

    def __init__(self, book: TraceBook) -> None:
        self.book = book
        self.loop: asyncio.AbstractEventLoop | None = None
        self.heard = False        # a span of one of our turns was read here: the provider is watched

    def watch(self) -> None:
        """Attach to the current global provider, if it is the SDK's (once per provider)."""
        self.loop = asyncio.get_running_loop()
        _watchers.add(self)
        provider = _global_sdk_provider()
        if provider is not None and id(provider) not in _providers:
            _providers.add(id(provider))
            provider.add_span_processor(_processor())

    async def close(self) -> None:
        """Stop filing; first let the provider's exporters send what they still hold, while the
        receiver still listens (otherwise they retry a closed port for seconds, at exit)."""
        _watchers.discard(self)
        provider = _global_sdk_provider()
        if provider is not None and id(provider) in _providers:
            # In a thread: the exporter's request is answered by the receiver, on this loop.
            await asyncio.to_thread(provider.force_flush, FLUSH_TIMEOUT_MS)

    def _offer(self, span: Span) -> None:
        """From the thread that ended the span: hand it to the loop if it is one of our turns'."""
        if not self.book.owns(span.trace_id) or self.loop is None:
            return
        self.heard = True
        try:
            self.loop.call_soon_threadsafe(self.book.add, span)
        except RuntimeError:      # the loop has closed: the run is over
            pass


def _global_sdk_provider() -> TracerProvider | None:
    """The global tracer provider if it is the OpenTelemetry SDK's, else None."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return None
    provider = trace.get_tracer_provider()
    return provider if isinstance(provider, TracerProvider) else None


def span_of(readable: Any) -> Span:
    """An SDK ReadableSpan as the book reads spans (what the OTLP decoder makes of one)."""
    context, parent = readable.context, readable.parent
    attributes = {key: list(value) if isinstance(value, tuple) else value
                  for key, value in (readable.attributes or {}).items()}
    return Span(trace_id=f"{context.trace_id:032x}", span_id=f"{context.span_id:016x}",
                parent_span_id=f"{parent.span_id:016x}" if parent is not None else "", name=readable.name,
                attributes=attributes, status_code=readable.status.status_code.value,
                status_message=readable.status.description or "", start_ns=readable.start_time or 0)


def _processor() -> SpanProcessor:
    from opentelemetry.sdk.trace import SpanProcessor

    class _Processor(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            if not _watchers:
                return
            try:
                found = span_of(span)
            except Exception:    # a span we cannot read costs that span, never the assistant's turn
                return
            for watcher in list(_watchers):
                watcher._offer(found)

    return _Processor()
