"""What receiving an assistant's traces costs simrun, per turn.

Conversations of ten turns, `--turns` in all, with a function as the assistant (the callable transport),
twice: without traces, and with them, where a separate process plays the assistant's exporter
and POSTs each turn's spans (the assistant's own span and `--tools` execute_tool spans, as
OTLP protobuf) to simrun's receiver, which decodes them, files them under their turn and turns
them into events before the store is read. The figure is the CPU time of the simrun process
per turn (the exporter's process is not counted: it stands for the assistant), with and
without, and their ratio.

    python benchmarks/trace_receiver.py --turns 2000 --tools 3
"""

from __future__ import annotations

import argparse
import asyncio
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--tools", type=int, default=3, help="execute_tool spans per turn")
    args = parser.parse_args()
    plain, _ = asyncio.run(conversation(args.turns, args.tools, traced=False))
    traced, events = asyncio.run(conversation(args.turns, args.tools, traced=True))
    assert events == args.turns * args.tools, f"{events} events for {args.turns} turns of {args.tools} tools"
    per_plain, per_traced = plain / args.turns * 1e6, traced / args.turns * 1e6
    print(f"{args.turns} turns, {args.tools} tool spans and the assistant's own span per turn")
    print(f"simrun CPU per turn without traces: {per_plain:,.0f} µs")
    print(f"simrun CPU per turn with traces:    {per_traced:,.0f} µs (receiving, decoding, filing: "
          f"{per_traced - per_plain:,.0f} µs)")
    print(f"ratio, with / without: {per_traced / per_plain:.1f}x")


if __name__ == "__main__":
    main()
