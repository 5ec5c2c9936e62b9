"""Decoding one OTLP trace export, bounded, in the trace receiver's worker process.

It imports protobuf and little else, so that the worker is ready soon after it is started, and
answers plain tuples (a `Span`'s fields), built into spans on the loop. See
simulator/adapters/_otlp.py for the bounds and why decoding runs in a process of its own.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

if TYPE_CHECKING:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")

# (trace_id, span_id, parent_span_id, name, attributes, status_code, status_message, start_ns), as `Span` takes them
SpanFields = tuple[str, str, str, str, dict[str, Any], int, str, int]


@dataclass(frozen=True)
class Decoded:
    """One export, as the worker read it."""

    spans: list[SpanFields] = field(default_factory=list)
    bad: int = 0                            # spans left out (ids not hex, in JSON)
    over: str | None = None                 # why the export is refused past a bound
    traces: tuple[str, ...] | None = ()     # the trace ids a refused export held; None: not read


def serve(conn: Connection) -> None:
    """The receiver's worker process: answers each (raw, as_json, max_spans, max_attributes)
    with ("ok", Decoded) or ("raised", the exception), until its pipe closes."""
    from simrun.simulator.adapters._callable_worker import die_with_parent

    die_with_parent()
    conn.send(("ready",))
    while True:
        try:
            raw, as_json, max_spans, max_attributes = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[str, Decoded | Exception] = ("ok", decode_bounded(raw, as_json, max_spans, max_attributes))
        except Exception as exc:
            answer = ("raised", exc)
        try:
            conn.send(answer)
        except Exception as exc:     # an exception pickle cannot carry
            conn.send(("raised", ValueError(f"{type(exc).__name__}: {exc}")))


class _TooMany(Exception):
    """A span past the bound on its attributes."""


def decode_bounded(raw: bytes, as_json: bool, max_spans: int, max_attributes: int) -> Decoded:
    """The spans of one export, or why it is refused past a bound (in the worker process).

    Spans are counted before any is built (protobuf's repeated fields know their length; JSON's
    lists too, before protobuf's pure-Python JSON reader sees them), and a span's attributes as
    they are read. In JSON, a span whose ids are not hex is left out (and counted)."""
    message = ExportTraceServiceRequest()
    bad = 0
    if as_json:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("the body is not a JSON object")
        spans = [span for rs in _list(data.get("resourceSpans")) if isinstance(rs, dict)
                 for ss in _list(rs.get("scopeSpans")) if isinstance(ss, dict) for span in _list(ss.get("spans"))]
        over = _over_spans(len(spans), max_spans)
        if over is None:
            over = next((_over_attributes(max_attributes) for span in spans
                         if isinstance(span, dict) and _json_values(span.get("attributes")) > max_attributes), None)
        if over is not None:
            return Decoded(over=over, traces=_json_traces(spans))
        bad = _hex_ids_to_base64(data)
        json_format.ParseDict(data, message, ignore_unknown_fields=True)
    else:
        message.ParseFromString(raw)
    found = [span for resource_spans in message.resource_spans for scope_spans in resource_spans.scope_spans
             for span in scope_spans.spans] if _count(message) <= max_spans else None
    if found is None:
        return Decoded(over=_over_spans(_count(message), max_spans), traces=_traces(message))
    out: list[SpanFields] = []
    try:
        for span in found:
            budget = [max_attributes]
            out.append((span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(), span.name,
                        _values(span.attributes, budget), span.status.code, span.status.message,
                        span.start_time_unix_nano))
    except _TooMany:
        return Decoded(over=_over_attributes(max_attributes), traces=_traces(message))
    return Decoded(out, bad=bad)


def _over_spans(count: int, max_spans: int) -> str | None:
    return f"{count:,} spans in one export, past the bound of {max_spans:,}" if count > max_spans else None


def _over_attributes(max_attributes: int) -> str:
    return f"a span of more than {max_attributes:,} attributes"


def _count(message: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans)


def _traces(message: ExportTraceServiceRequest) -> tuple[str, ...]:
    """The distinct trace ids of a refused export (in C and bounded by its bytes: two million
    empty spans take about a second, in the worker)."""
    return tuple(tid.hex() for tid in {span.trace_id for rs in message.resource_spans for ss in rs.scope_spans
                                       for span in ss.spans})


def _json_traces(spans: list[Any]) -> tuple[str, ...]:
    return tuple({span.get("traceId", "") for span in spans
                  if isinstance(span, dict) and isinstance(span.get("traceId"), str)})


def _json_values(attributes: Any) -> int:
    """How many values a JSON span's attributes hold, inside arrays and maps too."""
    count = 0
    for kv in _list(attributes):
        count += 1
        value = kv.get("value") if isinstance(kv, dict) else None
        if isinstance(value, dict):
            inner = value.get("arrayValue") or value.get("kvlistValue")
            if isinstance(inner, dict):
                items = _list(inner.get("values"))
                count += sum(_json_values([item if "value" in item else {"value": item}])
                             for item in items if isinstance(item, dict))
    return count


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


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _values(kvs: Iterable[KeyValue], budget: list[int]) -> dict[str, Any]:
    """Key-values as a plain map, each value taken from the span's budget of attributes."""
    out = {}
    for kv in kvs:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooMany
        out[kv.key] = _value(kv.value, budget)
    return out


def _value(value: AnyValue, budget: list[int]) -> Any:
    """An attribute's AnyValue as a plain value."""
    kind = value.WhichOneof("value")
    if kind in ("array_value",):
        items = value.array_value.values
        budget[0] -= len(items)
        if budget[0] < 0:
            raise _TooMany
        return [_value(v, budget) for v in items]
    if kind == "kvlist_value":
        return _values(value.kvlist_value.values, budget)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None
