"""An OTLP/HTTP trace receiver on 127.0.0.1: the runtime's spans, read as untrusted input.

It takes `POST /v1/traces` as OpenTelemetry exporters send it, protobuf
(`application/x-protobuf`) or JSON (`application/json`, ids in hex as OTLP/JSON has them),
gzip-compressed or not, and decodes it with the `opentelemetry-proto` package. Each span goes to
a `TraceBook` (simulator/adapters/_spans.py), which files it under its turn.

Bounds: a request is at most `max_request_bytes` once decompressed (aiohttp counts the
decompressed body; a larger one is answered 413, read no further, and leaves every conversation
open then with unknown events, as any export past a bound does); protobuf's own nesting
limit holds for protobuf, and JSON nested too deep is refused (400). A span that cannot be read
is counted and skipped; an export that cannot be read at all is refused with 400 and counted.

Traces cost what their bytes allow (issue 39, rule 4). A few bytes make a span (two million
empty spans fit in 4 MB, and decoding them took 0.9 s of C holding the GIL and 30 s of Python
on the loop), so an export is decoded in a worker process of its own, never on simrun's event
loop nor in a thread of it (protobuf's parser holds the GIL for the whole body): the loop only
waits for its answer. The worker refuses an export of more than `max_spans` spans, or with a
span of more than `max_attributes` attributes (values inside arrays and maps counted), and a
decode that takes longer than `decode_timeout_s` is ended by killing the worker; the book
refuses spans past `TraceBook.max_spans_per_conversation`. Past any bound the export is
answered 413 and kept whole out of the book, and each conversation it held spans of (every one
open, when the spans could not be read) is marked: its events are unknown, with the reason, so
its checks over events are UNVERIFIABLE, never judged on a part of its spans. Text is not
clipped here: spans are bounded by count and bytes, and their text goes through the one door
(simulator/adapters/_spans.py) whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import socket

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from simrun import _secrets as secrets
from simrun._errors import RuntimeUnavailable
from simrun.simulator.adapters._callable_worker import Raised, answer_of, apart_from_main, sent
from simrun.simulator.adapters._otlp_decode import Decoded, serve
from simrun.simulator.adapters._spans import MAX_ATTRIBUTES_PER_SPAN, Span, TraceBook

DEFAULT_MAX_REQUEST_BYTES = 4 << 20
DEFAULT_MAX_SPANS = 10_000          # per export (an SDK's batch is 512 spans by default)
DEFAULT_MAX_ATTRIBUTES = MAX_ATTRIBUTES_PER_SPAN   # per span, values in arrays and maps counted (an SDK keeps 128)
DEFAULT_DECODE_TIMEOUT_S = 10.0     # one export's decoding (4 MB of the worst shape takes about 1 s)
PATH = "/v1/traces"
OTHER_SIGNALS = ("/v1/metrics", "/v1/logs")
_YIELD_EVERY = 256                  # spans filed between two turns of the loop
RESOURCE_EXHAUSTED = 8              # google.rpc.Code, as OTLP answers a refused export
STARTUP_TIMEOUT_S = 60.0            # for the worker's imports, on a loaded machine


class TraceReceiver:
    """One receiver for one runtime adapter; its port is taken at once, so that the endpoint is
    known before anything starts (a runtime's environment names it)."""

    def __init__(self, book: TraceBook, *, port: int = 0, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 max_spans: int = DEFAULT_MAX_SPANS, max_attributes: int = DEFAULT_MAX_ATTRIBUTES,
                 decode_timeout_s: float = DEFAULT_DECODE_TIMEOUT_S) -> None:
        self.book = book
        self.max_request_bytes = max_request_bytes
        self.max_spans = max_spans
        self.max_attributes = max_attributes
        self.decode_timeout_s = decode_timeout_s
        self.refused = 0            # exports refused whole (not OTLP, or past a bound)
        self.over = 0               # ...of those, refused past a bound on spans, attributes or time
        self._decoder: _Decoder | None = None
        self._lock = asyncio.Lock()         # one export on the decoder's pipe at a time
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind(("127.0.0.1", port))
        except OSError as exc:
            self._socket.close()
            raise RuntimeUnavailable(f"the trace receiver cannot listen on 127.0.0.1:{port} (runtime.trace_port): "
                                     f"{exc.strerror}; is a collector already there? Stop it, or choose another "
                                     "port and point the assistant's exporter at it") from None
        self._socket.listen(128)
        self.endpoint = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self._runner: web.AppRunner | None = None

    def environment(self) -> dict[str, str]:
        """What a runtime's OpenTelemetry SDK reads to send its spans here, soon after they end."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.endpoint + PATH,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_BSP_SCHEDULE_DELAY": "100"}

    async def start(self) -> None:
        if self._runner is not None:
            return
        # Started now, and ready before any span is sent (its imports take most of a second).
        await self._started_decoder()
        app = web.Application(client_max_size=self.max_request_bytes)
        app.router.add_post(PATH, self._export)
        # The OTLP endpoint simrun names is every signal's: an assistant that also exports metrics
        # or logs is answered, and they are read no further (aiohttp still bounds their size).
        for other in OTHER_SIGNALS:
            app.router.add_post(other, self._discard)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, self._socket).start()

    async def aclose(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self._socket.close()
        decoder, self._decoder = self._decoder, None
        if decoder is not None:
            decoder.kill()

    async def _started_decoder(self) -> _Decoder:
        if self._decoder is None or not self._decoder.process.is_alive():
            decoder = self._decoder = _Decoder()
            try:
                await decoder.ready(STARTUP_TIMEOUT_S)
            except (TimeoutError, Raised) as exc:
                self._decoder = None
                decoder.kill()
                raise RuntimeUnavailable(f"the trace receiver's decoding process did not start: {type(exc).__name__}: "
                                         f"{secrets.cut(str(exc), 500)}") from None
        return self._decoder

    async def _decode(self, raw: bytes, as_json: bool) -> Decoded:
        """The export decoded in the worker process; the loop only waits. One export at a time:
        an export's time is its own decoding, not its wait for another's."""
        async with self._lock:
            decoder = await self._started_decoder()      # again, if one past its time was ended
            await sent(decoder.conn, (raw, as_json, self.max_spans, self.max_attributes))
            try:
                answer = await answer_of(decoder.conn, decoder.process, self.decode_timeout_s)
            except TimeoutError:
                decoder.kill()
                return Decoded(over=f"decoding it took longer than {self.decode_timeout_s:g}s", traces=None)
            except Raised:
                decoder.kill()
                return Decoded(over="its decoder's process ended while reading it", traces=None)
        if answer[0] == "raised":
            raise answer[1]
        decoded: Decoded = answer[1]
        return decoded

    async def _discard(self, request: web.Request) -> web.Response:
        await request.read()
        if request.content_type == "application/json":
            return web.json_response({})
        return web.Response(body=b"", content_type="application/x-protobuf")    # an empty response message

    async def _export(self, request: web.Request) -> web.Response:
        try:
            raw = await request.read()     # decompressed, and 413 past max_request_bytes
        except web.HTTPRequestEntityTooLarge:
            # Unread, so whose spans it held is unknown: every conversation open now may miss some.
            self.refused += 1
            self.over += 1
            self.book.unbounded(f"an export was refused (larger than {self.max_request_bytes:,} bytes once "
                                "decompressed) while it was open: its tool calls may be in it, unread", None)
            raise
        as_json = request.content_type == "application/json"
        try:
            decoded = await self._decode(raw, as_json)
        except (DecodeError, ValueError, RecursionError, json_format.ParseError) as exc:
            self.refused += 1
            return web.json_response({"code": 3, "message": f"not an OTLP trace export: {secrets.cut(str(exc), 200)}"},
                                     status=400)
        self.book.counts.spans += decoded.bad
        self.book.counts.bad += decoded.bad
        over, traces = decoded.over, decoded.traces
        spans = [Span(*fields) for fields in decoded.spans]
        if over is None:
            traces = self.book.past_bound(spans)
            if traces:
                over = f"its spans would take a conversation past {self.book.max_spans_per_conversation:,} spans"
        if over is not None:
            self.refused += 1
            self.over += 1
            self.book.unbounded(f"an export of its spans was refused ({over}): its tool calls are unread, not "
                                "none", traces)
            return web.json_response({"code": RESOURCE_EXHAUSTED, "message": f"trace export refused: {over}"},
                                     status=413)
        for count, span in enumerate(spans, 1):
            self.book.add(span)
            if count % _YIELD_EVERY == 0:
                await asyncio.sleep(0)       # a large export is filed in pieces: other conversations go on
        if as_json:
            return web.json_response({})
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")


class _Decoder:
    """The receiver's worker process and the pipe to it. A process started afresh ("spawn"):
    forking simrun, with its loop and threads, is unsafe. Answers are read when they are there,
    with no thread between (a pool's threads cost more than the decoding of a turn's spans)."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child,), name="simrun-otlp", daemon=True)
        with apart_from_main():
            self.process.start()
        child.close()

    async def ready(self, timeout_s: float) -> None:
        answer = await answer_of(self.conn, self.process, timeout_s)
        if answer[0] != "ready":
            raise Raised("NotReady", f"it answered {answer[0]!r}", "")

    def kill(self) -> None:
        """Ended now (a decode past its time is not waited for)."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(1)
        with contextlib.suppress(Exception):
            self.conn.close()
