"""An OTLP/HTTP trace receiver on 127.0.0.1: the runtime's spans, read as untrusted input.

It takes `POST /v1/traces` as OpenTelemetry exporters send it, protobuf
(`application/x-protobuf`) or JSON (`application/json`, ids in hex as OTLP/JSON has them),
gzip-compressed or not, and decodes it with the `opentelemetry-proto` package. Each span goes to
a `TraceBook` (simulator/adapters/_spans.py), which files it under its turn.

Bounds: a request is at most `max_request_bytes` once decompressed (aiohttp counts the
decompressed body; a larger one is answered 413 and costs nothing else); protobuf's own nesting
limit holds for protobuf, and JSON nested too deep is refused (400). A span that cannot be read
is counted and skipped; an export that cannot be read at all is refused with 400 and counted.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from simrun.scoring import RuntimeUnavailable
from simrun.simulator.adapters._spans import Span, TraceBook

DEFAULT_MAX_REQUEST_BYTES = 4 << 20
PATH = "/v1/traces"
OTHER_SIGNALS = ("/v1/metrics", "/v1/logs")
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class TraceReceiver:
    """One receiver for one runtime adapter; its port is taken at once, so that the endpoint is
    known before anything starts (a runtime's environment names it)."""

    def __init__(self, book: TraceBook, *, port: int = 0, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        self.book = book
        self.max_request_bytes = max_request_bytes
        self.refused = 0            # exports refused whole (not OTLP, too large is aiohttp's 413)
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

    async def _discard(self, request: web.Request) -> web.Response:
        await request.read()
        if request.content_type == "application/json":
            return web.json_response({})
        return web.Response(body=b"", content_type="application/x-protobuf")    # an empty response message

    async def _export(self, request: web.Request) -> web.Response:
        raw = await request.read()     # decompressed, and 413 past max_request_bytes
        as_json = request.content_type == "application/json"
        try:
            spans = list(decode(raw, as_json=as_json, book=self.book))
        except (DecodeError, ValueError, RecursionError, json_format.ParseError) as exc:
            self.refused += 1
            return web.json_response({"code": 3, "message": f"not an OTLP trace export: {str(exc)[:200]}"},
                                     status=400)
        for span in spans:
            self.book.add(span)
        if as_json:
            return web.json_response({})
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")


def decode(raw: bytes, *, as_json: bool, book: TraceBook | None = None) -> Iterator[Span]:
    """The spans of one export. In JSON, a span whose ids are not hex is left out (and counted)."""
    message = ExportTraceServiceRequest()
    if as_json:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("the body is not a JSON object")
        bad = _hex_ids_to_base64(data)
        if book is not None:
            book.counts.spans += bad
            book.counts.bad += bad
        json_format.ParseDict(data, message, ignore_unknown_fields=True)
    else:
        message.ParseFromString(raw)
    for resource_spans in message.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield Span(trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                           parent_span_id=span.parent_span_id.hex(), name=span.name[:2000],
                           attributes={kv.key: _value(kv.value) for kv in span.attributes},
                           status_code=span.status.code, status_message=span.status.message[:2000],
                           start_ns=span.start_time_unix_nano)


def _hex_ids_to_base64(data: dict[str, Any]) -> int:
    """OTLP/JSON writes ids in hex where protobuf's JSON mapping reads base64: rewrite them in
    place; drop a span whose ids are not hex. The number of spans dropped."""
    dropped = 0
    for resource_spans in _list(data.get("resourceSpans")):
        for scope_spans in _list(resource_spans.get("scopeSpans") if isinstance(resource_spans, dict) else None):
            if not isinstance(scope_spans, dict):
                continue
            kept = []
            for span in _list(scope_spans.get("spans")):
                try:
                    for item in (span, *_list(span.get("links"))):
                        for name in _ID_FIELDS:
                            if isinstance(item.get(name), str):
                                item[name] = base64.b64encode(bytes.fromhex(item[name])).decode()
                    kept.append(span)
                except (ValueError, AttributeError, TypeError):
                    dropped += 1
            scope_spans["spans"] = kept
    return dropped


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _value(value) -> Any:
    """An attribute's AnyValue as a plain value."""
    kind = value.WhichOneof("value")
    if kind in ("array_value",):
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None
