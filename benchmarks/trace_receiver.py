"""What receiving an assistant's traces costs simrun, per turn.

Conversations of ten turns, `--turns` in all, with a function as the assistant (the callable transport),
twice: without traces, and with them, where a separate process plays the assistant's exporter
and POSTs each turn's spans (the assistant's own span and `--tools` execute_tool spans, as
OTLP protobuf) to simrun's receiver, which decodes them, files them under their turn and turns
them into events before the store is read. The figure is the CPU time of the simrun process
per turn (the exporter's process is not counted: it stands for the assistant), with and
without, and their ratio.

    python benchmarks/trace_receiver.py --turns 2000 --tools 3

`--flood N` (issue 39, rule 4) then measures one hostile export: N empty spans (two bytes each;
two million fit in 4 MB, inside the receiver's byte bound) and one span of an open turn, each
way in a process of its own: "before", decoded and filed on the event loop as the receiver did
(no bound but bytes), and "after", through the receiver (decoded in its worker, refused past
the bound on spans). The figures are the longest stall of the loop (the most CPU time its thread
spent between two ticks of a 5 ms probe), the wall time, and the peak memory of simrun's process
(and of the receiver's worker).

    python benchmarks/trace_receiver.py --turns 20 --flood 2000000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simrun.simulator.adapters._callable import CallableRuntime  # noqa: E402
from simrun.simulator.adapters._spans import Tool  # noqa: E402

# The exporter: reads "traceparent endpoint" lines, answers each with one export of that turn's spans.
EXPORTER = r"""
import json, os, sys, urllib.request
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
tools = int(sys.argv[1])
for line in sys.stdin:
    traceparent, endpoint = line.split()
    _, trace, parent, _ = traceparent.split("-")
    own = os.urandom(8)
    spans = [Span(trace_id=bytes.fromhex(trace), span_id=os.urandom(8), parent_span_id=own,
                  name="execute_tool rebook", start_time_unix_nano=i, attributes=[
                      KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="execute_tool")),
                      KeyValue(key="gen_ai.tool.name", value=AnyValue(string_value="rebook")),
                      KeyValue(key="gen_ai.tool.call.id", value=AnyValue(string_value=f"call-{i}")),
                      KeyValue(key="gen_ai.tool.call.arguments",
                               value=AnyValue(string_value=json.dumps({"trip_id": "T-1", "date": "2027-03-14"})))])
             for i in range(tools)]
    spans.append(Span(trace_id=bytes.fromhex(trace), span_id=own, parent_span_id=bytes.fromhex(parent),
                      name="invoke_agent desk"))
    body = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    request = urllib.request.Request(endpoint, data=body.SerializeToString(),
                                     headers={"Content-Type": "application/x-protobuf"})
    urllib.request.urlopen(request).read()
    print("sent", flush=True)
"""
TRACEPARENTS: list[str] = []
TURNS_PER_CONVERSATION = 10


def echo(messages, session):
    """The assistant: it answers at once, and its spans go out through the exporter process."""
    TRACEPARENTS.append(session["traceparent"])
    return "Done."


async def conversation(turns: int, tools: int, traced: bool) -> tuple[float, int]:
    """CPU seconds of this process over `turns` turns, and the events the store held at the end."""
    runtime = CallableRuntime(f"{__name__}:echo" if __name__ != "__main__" else "__main__:echo",
                              tools={"rebook": Tool("trip_id")}, traces=traced, trace_wait_s=5.0)
    exporter = None
    if traced:
        exporter = await asyncio.create_subprocess_exec(sys.executable, "-c", EXPORTER, str(tools),
                                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    await runtime.health()
    events = 0
    started = time.process_time()
    for done in range(0, turns, TURNS_PER_CONVERSATION):
        session = await runtime.start({"seed": done, "persona": "p", "goal": "g", "setup": {}})
        for _ in range(min(TURNS_PER_CONVERSATION, turns - done)):
            await runtime.turn(session, {"message": "Rebook it."})
            if exporter is not None:
                exporter.stdin.write(f"{TRACEPARENTS[-1]} {runtime.receiver.endpoint}/v1/traces\n".encode())
                await exporter.stdin.drain()
            state = await runtime.state(session)
            if exporter is not None:
                await exporter.stdout.readline()
        events += len((state or {}).get("events") or [])
        await runtime.close(session)
    spent = time.process_time() - started
    if exporter is not None:
        exporter.stdin.close()
        await exporter.wait()
    await runtime.aclose()
    return spent, events


def flood_body(traceparent: str, empty: int) -> bytes:
    """One export: a tool span of the turn of `traceparent`, and `empty` empty spans, on the wire."""
    from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span

    from tests.fixtures.otlp_flood import flood

    _, trace, _, _ = traceparent.split("-")
    return flood(ScopeSpans(spans=[Span(trace_id=bytes.fromhex(trace), span_id=os.urandom(8),
                                        name="execute_tool rebook")]).SerializeToString(), empty)


async def flood_part(way: str, empty: int) -> None:
    """One way of receiving the flood, in this process: prints its figures on one line."""
    import aiohttp
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from simrun.simulator.adapters._otlp import PATH, TraceReceiver
    from simrun.simulator.adapters._spans import Span, TraceBook

    book = TraceBook({"rebook": Tool("trip_id")})
    body = flood_body(book.begin("s-1", 1), empty)
    lags: list[float] = []
    walls: list[float] = []
    done = asyncio.Event()

    async def probe():
        while not done.is_set():
            before, wall = time.thread_time(), time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.thread_time() - before)
            walls.append(time.perf_counter() - wall)

    receiver = TraceReceiver(book) if way == "after" else None
    if receiver is not None:
        await receiver.start()
    task = asyncio.create_task(probe())
    await asyncio.sleep(0.02)
    started = time.perf_counter()
    worker_mb = 0.0
    if receiver is None:
        # The receiver as it was: the whole export decoded, each span built and filed, on the loop.
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        for rs in message.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    book.add(Span(trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                                  parent_span_id=span.parent_span_id.hex(), name=span.name[:2000],
                                  attributes={kv.key: kv.value for kv in span.attributes},
                                  status_code=span.status.code, status_message=span.status.message[:2000],
                                  start_ns=span.start_time_unix_nano))
        status = 200
    else:
        async with aiohttp.ClientSession() as http, http.post(
                receiver.endpoint + PATH, data=body, headers={"Content-Type": "application/x-protobuf"}) as answer:
            status = answer.status
        decoder = receiver._decoder
        if decoder is not None and decoder.process.is_alive():
            with open(f"/proc/{decoder.process.pid}/status") as status_file:
                worker_mb = max(int(line.split()[1]) / 1024 for line in status_file if line.startswith("VmHWM"))
    took = time.perf_counter() - started
    done.set()
    await task
    if receiver is not None:
        await receiver.aclose()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{way}: HTTP {status}; longest stall of the loop {max(lags):.3f} s CPU, {max(walls):.3f} s wall; "
          f"{took:.2f} s; peak RSS of simrun "
          f"{peak:.0f} MB, of the receiver's worker {worker_mb:.0f} MB; events known: {book.known('s-1')}")


def flood(empty: int) -> None:
    body = flood_body("00-" + "ab" * 16 + "-" + "cd" * 8 + "-01", empty)
    print(f"one export of {empty:,} empty spans and one tool span: {len(body) / 1e6:.2f} MB")
    for way in ("before", "after"):
        done = subprocess.run([sys.executable, __file__, "--flood-part", way, "--flood", str(empty)],
                              capture_output=True, text=True, check=True)
        print(done.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--tools", type=int, default=3, help="execute_tool spans per turn")
    parser.add_argument("--flood", type=int, default=0, help="empty spans in one hostile export (0: none)")
    parser.add_argument("--flood-part", choices=("before", "after"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flood_part:
        asyncio.run(flood_part(args.flood_part, args.flood))
        return
    plain, _ = asyncio.run(conversation(args.turns, args.tools, traced=False))
    traced, events = asyncio.run(conversation(args.turns, args.tools, traced=True))
    assert events == args.turns * args.tools, f"{events} events for {args.turns} turns of {args.tools} tools"
    per_plain, per_traced = plain / args.turns * 1e6, traced / args.turns * 1e6
    print(f"{args.turns} turns, {args.tools} tool spans and the assistant's own span per turn")
    print(f"simrun CPU per turn without traces: {per_plain:,.0f} µs")
    print(f"simrun CPU per turn with traces:    {per_traced:,.0f} µs (receiving, decoding, filing: "
          f"{per_traced - per_plain:,.0f} µs)")
    print(f"ratio, with / without: {per_traced / per_plain:.1f}x")
    if args.flood:
        flood(args.flood)


if __name__ == "__main__":
    main()
