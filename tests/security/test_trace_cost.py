"""Traces cost what their bytes allow (issue 39, rule 4).

A few bytes make a span: two million empty spans fit in a 4 MB export, inside the receiver's byte
bound. Decoding them on simrun's event loop held every conversation for 18-31 s. Here an export
is decoded in a worker process, bounded in spans per export, attributes per span and time, and
the book bounds spans per conversation; past a bound the export is answered 413 and the
conversations it held spans of have unknown events with the reason, never a part of their spans
judged as the whole. (What it costs in time and memory, before and after, is measured by
benchmarks/trace_flood.py, not asserted here.)
"""

from __future__ import annotations

import asyncio
import json
import time

from simrun.simulator.adapters._otlp import TraceReceiver
from simrun.simulator.adapters._spans import Span as BookSpan
from simrun.simulator.adapters._spans import Tool, TraceBook
from tests.fixtures.otlp_flood import flood
from tests.security.test_trace_receiver import export, post, tool_span

# The most CPU time the loop's thread may spend between two ticks of a probe that wakes every
# 5 ms, while the flood is received (as tests/security/test_reply_scale.py measures it).
LAG_BOUND_S = 0.3


def receiving(test, **bounds):
    book = TraceBook({"rebook": Tool("trip_id")}, **{k: v for k, v in bounds.items() if k.startswith("max_spans_per")})
    receiver = TraceReceiver(book, **{k: v for k, v in bounds.items() if not k.startswith("max_spans_per")})

    async def go():
        await receiver.start()
        try:
            return await test(receiver, book, book.begin("s-1", 1), book.begin("s-2", 1))
        finally:
            await receiver.aclose()

    return asyncio.run(go())


def test_two_million_empty_spans_in_4_mb_are_refused_off_the_loop_and_leave_the_conversation_unknown():
    async def test(receiver, book, tp, other):
        real = export([tool_span(tp, "rebook", {"trip_id": "T-1"})]).resource_spans[0].scope_spans[0]
        body = flood(real.SerializeToString(), 2_000_000)
        assert len(body) <= receiver.max_request_bytes       # inside the byte bound: bytes alone cannot stop it
        lags: list[float] = []
        done = asyncio.Event()

        async def probe():
            while not done.is_set():
                before = time.thread_time()
                await asyncio.sleep(0.005)
                lags.append(time.thread_time() - before)

        task = asyncio.create_task(probe())
        try:
            status = await post(receiver, body)
            after = await post(receiver, export([tool_span(other, "rebook", {"trip_id": "T-2"})]).SerializeToString())
        finally:
            done.set()
            await task
        return status, after, max(lags), book

    status, after, lag, book = receiving(test)
    assert status == 413 and after == 200
    assert lag < LAG_BOUND_S, f"the loop was held for {lag:.3f} s"
    # Not cut to a part: the conversation the export held a span of has unknown events, with the reason.
    assert not book.known("s-1") and book.events("s-1") == []
    assert "2,000,001 spans in one export" in book.unknown_reason("s-1")
    # Another conversation is not touched by it.
    assert book.known("s-2") and [e["record"] for e in book.events("s-2")] == ["T-2"]


def test_a_span_of_too_many_attributes_refuses_its_export_in_protobuf_and_in_json():
    async def test(receiver, book, tp, other):
        span = tool_span(tp, "rebook", {"trip_id": "T-1"})
        fat = export([tool_span(tp, "rebook", {"trip_id": "T-9"})])
        many = fat.resource_spans[0].scope_spans[0].spans[0].attributes
        for i in range(30):       # 3 attributes of the tool call, and 30 more
            many.add(key=f"x.{i}").value.string_value = "v"
        proto = await post(receiver, fat.SerializeToString())
        fine = await post(receiver, export([tool_span(other, "rebook", {"trip_id": "T-2"})]).SerializeToString())
        # JSON: too many spans, counted before protobuf's JSON reader builds any.
        as_json = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": other.split("-")[1], "spanId": f"{i:016x}"}
                                                                 for i in range(40)]}]}]}
        refused_json = await post(receiver, json.dumps(as_json).encode(), "application/json")
        return proto, fine, refused_json, book, span

    proto, fine, refused_json, book, _ = receiving(test, max_attributes=32, max_spans=20)
    assert proto == 413 and fine == 200 and refused_json == 413
    assert not book.known("s-1") and "more than 32 attributes" in book.unknown_reason("s-1")
    assert not book.known("s-2") and "40 spans in one export" in book.unknown_reason("s-2")


def test_spans_past_a_conversations_bound_refuse_the_export_and_leave_it_unknown_by_either_path():
    async def test(receiver, book, tp, other):
        first = await post(receiver, export([tool_span(tp, "rebook", {"trip_id": f"T-{i}"})
                                             for i in range(4)]).SerializeToString())
        known_before = book.known("s-1")
        second = await post(receiver, export([tool_span(tp, "rebook", {"trip_id": f"U-{i}"})
                                              for i in range(4)]).SerializeToString())
        # A callable's own spans reach the book one by one (simulator/adapters/_local_spans.py): the same bound.
        trace = other.split("-")[1]
        for i in range(7):
            book.add(BookSpan(trace, f"{i:016x}", "", "execute_tool rebook",
                              {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "rebook",
                               "gen_ai.tool.call.arguments": json.dumps({"trip_id": f"L-{i}"})}))
        return first, known_before, second, book

    first, known_before, second, book = receiving(test, max_spans_per_conversation=6)
    assert first == 200 and known_before and second == 413
    assert not book.known("s-1") and "past 6 spans" in book.unknown_reason("s-1")
    assert not book.known("s-2") and "more than 6 spans arrived" in book.unknown_reason("s-2")


def test_a_decode_past_its_time_is_ended_and_refused_and_the_next_export_is_read():
    async def test(receiver, book, tp, other):
        # 9,000 spans in JSON, within every bound: protobuf's JSON reader (pure Python) takes about a second.
        spans = [{"traceId": tp.split("-")[1], "spanId": f"{i:016x}", "name": "execute_tool rebook",
                  "attributes": [{"key": f"k{j}", "value": {"stringValue": "v"}} for j in range(5)]}
                 for i in range(9000)]
        receiver.decode_timeout_s = 0.05
        late = await post(receiver, json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode(),
                          "application/json")
        receiver.decode_timeout_s = 30
        await asyncio.sleep(0)
        later = await post(receiver, export([tool_span(other, "rebook", {"trip_id": "T-2"})]).SerializeToString())
        return late, later, book

    late, later, book = receiving(test)
    assert late == 413 and later == 200
    # Which conversations it held could not be read: every one open then is unknown, with the reason.
    assert "took longer than 0.05s" in book.unknown_reason("s-1")
    assert "took longer than 0.05s" in book.unknown_reason("s-2")




def test_an_export_past_the_byte_bound_leaves_every_open_conversation_unknown_not_cut():
    async def test(receiver, book, tp, other):
        big = export([tool_span(tp, "rebook", {"trip_id": "T-1", "pad": "x" * 300_000})]).SerializeToString()
        status = await post(receiver, big)
        return status, book

    status, book = receiving(test, max_request_bytes=100_000)
    assert status == 413
    # Unread, so which conversation it held is unknown: each open one is, with the reason.
    assert not book.known("s-1") and "larger than 100,000 bytes" in book.unknown_reason("s-1")
    assert not book.known("s-2")


def test_exports_and_answers_larger_than_the_pipe_cross_to_the_worker_whole_on_simruns_own_loop():
    """The worker's pipe under the loop simrun runs on (uvloop, which leaves a watched pipe
    non-blocking): an export and its decoded answer, each past the pipe's buffer (here about half
    a megabyte), cross whole, again and again, never a 500 or 'the decoder's process ended'."""
    from simrun.simulator import eventloop

    book = TraceBook({"rebook": Tool("trip_id")})
    receiver = TraceReceiver(book)

    async def go():
        await receiver.start()
        try:
            statuses = []
            for turn in range(1, 4):
                tp = book.begin(f"s-{turn}", 1)
                spans = [tool_span(tp, "rebook", {"trip_id": f"T-{i}", "note": "x" * 1500}) for i in range(300)]
                body = export(spans).SerializeToString()
                assert len(body) > 256 * 1024
                statuses.append(await post(receiver, body))
            return statuses
        finally:
            await receiver.aclose()

    assert eventloop.run(go()) == [200, 200, 200]
    for turn in range(1, 4):
        assert book.known(f"s-{turn}") and len(book.events(f"s-{turn}")) == 300, book.unknown_reason(f"s-{turn}")
