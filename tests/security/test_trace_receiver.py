"""The trace receiver reads untrusted input: its size is bounded once decompressed, a span that
cannot be read costs that span, spans of no turn are counted and ignored, a turn keeps a
bounded number of tool events, and no secret it is sent is kept."""

from __future__ import annotations

import asyncio
import gzip
import json
import os

import aiohttp
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from simrun import _secrets as secrets
from simrun.simulator.adapters._otlp import PATH, TraceReceiver
from simrun.simulator.adapters._spans import MAX_ARGUMENTS_CHARS, Tool, TraceBook

SECRET = "sk-live-0123456789abcdef"


def tool_span(traceparent: str, tool: str, arguments, *, error: str | None = None, own: bool = False) -> Span:
    """An `execute_tool` span in the turn of `traceparent` (`own`: the runtime's span for the turn)."""
    _, trace, parent, _ = traceparent.split("-")
    attributes = {"gen_ai.operation.name": "execute_tool" if not own else "invoke_agent", "gen_ai.tool.name": tool,
                  "gen_ai.tool.call.arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}
    return Span(trace_id=bytes.fromhex(trace), span_id=os.urandom(8),
                parent_span_id=bytes.fromhex(parent) if own else os.urandom(8), name=f"execute_tool {tool}",
                attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attributes.items()],
                status=Status(code=2, message=error) if error else Status())


def export(spans: list[Span]) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])


async def post(receiver: TraceReceiver, body: bytes, content_type="application/x-protobuf", **headers) -> int:
    async with aiohttp.ClientSession() as http:
        async with http.post(receiver.endpoint + PATH, data=body,
                             headers={"Content-Type": content_type, **headers}) as response:
            return response.status


def receiving(test, *, max_request_bytes: int = 1 << 20, max_spans_per_turn: int = 1000):
    """Run `test(receiver, book, traceparent)` against a started receiver, one turn open."""
    book = TraceBook({"rebook": Tool("trip_id")}, max_spans_per_turn=max_spans_per_turn)
    receiver = TraceReceiver(book, max_request_bytes=max_request_bytes)

    async def go():
        await receiver.start()
        try:
            return await test(receiver, book, book.begin("s-1", 1))
        finally:
            await receiver.aclose()

    return asyncio.run(go())


def test_a_request_too_large_once_decompressed_is_refused_and_costs_nothing():
    async def test(receiver, book, tp):
        good = export([tool_span(tp, "rebook", {"trip_id": "T-1"})]).SerializeToString()
        padding = export([tool_span(tp, "rebook", {"trip_id": "T-1", "pad": "x" * 2_000_000})]).SerializeToString()
        bomb = gzip.compress(padding)       # 2 MB of request in a few kilobytes
        assert len(bomb) < 50_000
        statuses = (await post(receiver, bomb, **{"Content-Encoding": "gzip"}), await post(receiver, padding),
                    await post(receiver, gzip.compress(good), **{"Content-Encoding": "gzip"}))
        return statuses, book.events("s-1"), book.counts

    (bomb, plain, good), events, counts = receiving(test)
    assert bomb == plain == 413 and good == 200
    assert [e["record"] for e in events] == ["T-1"] and counts.spans == 1


def test_one_bad_span_costs_that_span_and_a_bad_export_costs_that_export():
    async def test(receiver, book, tp):
        spans = [tool_span(tp, "rebook", {"trip_id": "T-1"}), tool_span(tp, "rebook", "{not json"),
                 tool_span(tp, "rebook", "[1, 2]"), tool_span(tp, "rebook", {"trip_id": "T-2"}, error="no seat")]
        first = await post(receiver, export(spans).SerializeToString())
        garbage = await post(receiver, b"\xff\x00 not a protobuf \x17" * 50)
        deep = await post(receiver, b"[" * 100_000 + b"]" * 100_000, "application/json")
        return (first, garbage, deep), book.events("s-1"), book.counts, receiver.refused

    (first, garbage, deep), events, counts, refused = receiving(test)
    assert first == 200 and garbage == deep == 400 and refused == 2
    assert [(e["record"], e["status"], e["reason"]) for e in events] == [("T-1", "committed", None),
                                                                         ("T-2", "refused", "no seat")]
    assert counts.bad == 2 and counts.tool_events == 2


def test_json_exports_are_read_with_hex_ids_and_a_span_with_bad_ids_is_left_out():
    async def test(receiver, book, tp):
        data = json_format.MessageToDict(export([tool_span(tp, "rebook", {"trip_id": "T-1"}),
                                                 tool_span(tp, "rebook", {"trip_id": "T-2"})]))
        spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
        for span in spans:      # OTLP/JSON writes ids in hex, where protobuf's JSON mapping has base64
            for name in ("traceId", "spanId", "parentSpanId"):
                span[name] = __import__("base64").b64decode(span[name]).hex()
        spans[1]["spanId"] = "not hex at all"
        status = await post(receiver, json.dumps(data).encode(), "application/json")
        return status, book.events("s-1"), book.counts

    status, events, counts = receiving(test)
    assert status == 200 and [e["record"] for e in events] == ["T-1"] and counts.bad == 1


def test_spans_of_no_turn_are_counted_and_ignored_and_a_turn_keeps_a_bounded_number():
    async def test(receiver, book, tp):
        stranger = f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01"
        spans = [tool_span(stranger, "rebook", {"trip_id": "T-9"}) for _ in range(3)]
        spans += [tool_span(tp, "rebook", {"trip_id": f"T-{i}"}) for i in range(8)]
        status = await post(receiver, export(spans).SerializeToString())
        return status, book.events("s-1"), book.counts

    status, events, counts = receiving(test, max_spans_per_turn=5)
    assert status == 200 and counts.orphans == 3 and counts.dropped == 3
    assert [e["record"] for e in events] == [f"T-{i}" for i in range(5)]


def test_no_secret_sent_in_a_span_is_kept_and_huge_arguments_are_dropped():
    secrets.register(SECRET)
    try:
        async def test(receiver, book, tp):
            spans = [tool_span(tp, "rebook", {"trip_id": "T-1", "note": f"key={SECRET}"}, error=f"bad key {SECRET}"),
                     tool_span(tp, f"rebook{SECRET}", {"trip_id": SECRET}),
                     tool_span(tp, "rebook", {"trip_id": "T-3", "blob": "x" * MAX_ARGUMENTS_CHARS})]
            status = await post(receiver, export(spans).SerializeToString())
            return status, book.events("s-1")

        status, events = receiving(test)
    finally:
        secrets.forget_all()
    assert status == 200 and len(events) == 3
    assert SECRET not in json.dumps(events)
    assert events[2]["operation"] == "rebook" and events[2]["arguments"] is None


@pytest.mark.parametrize("own_span_arrives", [True, False])
def test_a_turn_is_settled_when_the_runtimes_own_span_arrives_or_after_the_wait(own_span_arrives):
    async def test(receiver, book, tp):
        waiting = asyncio.create_task(book.settle("s-1", 1, 0.3))
        spans = [tool_span(tp, "rebook", {"trip_id": "T-1"})]
        if own_span_arrives:
            spans.append(tool_span(tp, "agent", {}, own=True))
        await post(receiver, export(spans).SerializeToString())
        return await waiting, book.events("s-1")

    settled, events = receiving(test)
    assert settled is own_span_arrives and [e["record"] for e in events] == ["T-1"]


def test_a_batch_sent_again_is_kept_once_and_other_signals_are_answered_unread():
    """An exporter that saw no answer in time sends its batch again: a tool call is one event.
    The OTLP endpoint simrun names is every signal's: metrics and logs are answered, not read."""
    async def test(receiver, book, traceparent):
        batch = export([tool_span(traceparent, "rebook", {"trip_id": "T-1"}),
                        tool_span(traceparent, "rebook", {"trip_id": "T-2"})]).SerializeToString()
        statuses = [await post(receiver, batch),
                    await post(receiver, gzip.compress(batch), **{"Content-Encoding": "gzip"})]
        async with aiohttp.ClientSession() as http:
            for signal in ("/v1/metrics", "/v1/logs"):
                async with http.post(receiver.endpoint + signal, data=b"\x0a\x00",
                                     headers={"Content-Type": "application/x-protobuf"}) as response:
                    statuses.append(response.status)
        return statuses, book.events("s-1"), book.counts

    statuses, events, counts = receiving(test)
    assert statuses == [200, 200, 200, 200]
    assert [e["record"] for e in events] == ["T-1", "T-2"] and counts.repeats == 2 and counts.spans == 4
