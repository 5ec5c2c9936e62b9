"""`runtime.isolation = "process"`: a callable's function runs in worker processes (issue 39, rule 6).

A conversation keeps its worker for all its turns (what the function keeps in memory between
turns holds), a worker is reused by a later conversation, an exception is a crash fault with
its traceback as in a thread, a turn past its timeout kills its worker and ends the
conversation as runtime_error, and the setting is refused where it means nothing.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from simrun._errors import ConfigError, RuntimeFault
from simrun.simulator._project import load_project
from simrun.simulator.adapters._callable import CallableRuntime

ASSISTANT = '''
import os, re

seen = {}

def answer(messages, session):
    text = messages[-1]["content"]
    if text == "raise":
        raise ValueError("no seat on that flight")
    if text == "stuck":
        re.match(r"(a+)+$", "a" * 60 + "b")       # holds the GIL for centuries
    seen[session["id"]] = seen.get(session["id"], 0) + 1
    return f"{os.getpid()} {seen[session['id']]}"
'''


@pytest.fixture
def project(tmp_path):
    (tmp_path / "desk.py").write_text(ASSISTANT)
    return tmp_path


def test_a_conversation_keeps_its_worker_and_a_later_one_reuses_it(project):
    runtime = CallableRuntime("desk.py:answer", isolation="process", timeout_s=10, folder=str(project))

    async def go():
        await runtime.health()
        first, second = await runtime.start({}), await runtime.start({})
        a1 = (await runtime.turn(first, {"message": "hi"}))["reply"]
        b1 = (await runtime.turn(second, {"message": "hi"}))["reply"]     # at once: a worker of its own
        a2 = (await runtime.turn(first, {"message": "again"}))["reply"]
        await runtime.close(first)
        third = await runtime.start({})
        c1 = (await runtime.turn(third, {"message": "hi"}))["reply"]
        await runtime.aclose()
        return a1, b1, a2, c1

    a1, b1, a2, c1 = asyncio.run(go())
    assert a1.split()[0] != str(os.getpid())                 # not this process
    assert a1.split()[0] != b1.split()[0]                    # two open conversations, two workers
    assert a2 == f"{a1.split()[0]} 2"                        # the same worker, its memory kept
    assert c1.split()[0] == a1.split()[0]                    # a closed conversation's worker is reused


def test_an_exception_is_a_crash_and_a_stuck_turn_a_timeout_that_kills_its_worker(project):
    runtime = CallableRuntime("desk.py:answer", isolation="process", timeout_s=1, folder=str(project))

    async def go():
        await runtime.health()
        session = await runtime.start({})
        faults = []
        for text in ("raise", "stuck"):
            try:
                await runtime.turn(session, {"message": text})
            except RuntimeFault as fault:
                faults.append(fault)
        worker_gone = not runtime._workers
        await runtime.aclose()
        return faults, worker_gone

    (crash, timeout), worker_gone = asyncio.run(go())
    assert crash.kind == "crash" and "ValueError: no seat on that flight" in str(crash)
    assert "in answer" in crash.evidence["traceback"]       # the worker's traceback, as a thread's would be
    assert timeout.kind == "timeout" and "worker process was stopped" in str(timeout)
    assert worker_gone


def test_a_stuck_turn_ends_its_conversation_as_runtime_error_at_its_timeout(project, demo):
    from simrun.simulator._conversation import Cell, converse
    from simrun.simulator.users._scripted import ScriptedUser

    (project / "desk.py").write_text(ASSISTANT.replace('if text == "stuck":', "if True:"))
    runtime = CallableRuntime("desk.py:answer", isolation="process", timeout_s=1, folder=str(project))

    async def go():
        await runtime.health()
        try:
            return await converse(Cell(demo.persona("plain-paula"), demo.goal("single-add-bag"), 0, 5),
                                  ScriptedUser(), runtime)
        finally:
            await runtime.aclose()

    conversation = asyncio.run(asyncio.wait_for(go(), 30))
    assert conversation.transcript.end == "runtime_error"


def test_the_function_loads_in_its_workers_only_and_one_that_cannot_load_is_said_at_startup(project):
    from simrun._errors import RuntimeUnavailable

    (project / "broken.py").write_text("import os\n"
                                       "open(os.path.join(os.path.dirname(__file__), f'loaded-{os.getpid()}'), 'w')\n"
                                       "raise ImportError('no module named agents')\n")
    runtime = CallableRuntime("broken.py:answer", isolation="process", folder=str(project))
    with pytest.raises(RuntimeUnavailable) as info:
        asyncio.run(runtime.health())
    assert "could not load it" in str(info.value) and "no module named agents" in str(info.value)
    # Imported in the worker, never in simrun's process (its import-time work is the worker's).
    loaded = [p.name for p in project.glob("loaded-*")]
    assert len(loaded) == 1 and loaded != [f"loaded-{os.getpid()}"]


@pytest.mark.parametrize("runtime, says", [
    ('transport = "callable"\ntarget = "desk:answer"\nisolation = "processes"\n', "not one of 'thread', 'process'"),
    ('transport = "http"\nurl = "http://127.0.0.1:1"\nisolation = "process"\n', "isolation is for the callable")])
def test_isolation_is_checked_like_every_setting(tmp_path, runtime, says):
    path = tmp_path / "simrun.toml"
    path.write_text("[runtime]\n" + runtime)
    with pytest.raises(ConfigError) as info:
        load_project(path)
    assert says in str(info.value) and info.value.path == str(path)


TRACED = '''
import json
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))   # simrun's receiver, from the environment
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("desk")

def answer(messages, session):
    with tracer.start_as_current_span("invoke_agent desk", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("execute_tool rebook", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "rebook",
                "gen_ai.tool.call.arguments": json.dumps({"trip_id": "T-7"})}):
            pass
    return "Rebooked."
'''


def test_a_workers_spans_reach_the_receiver_in_the_turns_trace(tmp_path):
    from simrun.simulator.adapters._spans import Tool

    (tmp_path / "traced_desk.py").write_text(TRACED)
    runtime = CallableRuntime("traced_desk.py:answer", isolation="process", folder=str(tmp_path),
                              tools={"rebook": Tool("trip_id")}, traces=True, trace_wait_s=5)

    async def go():
        await runtime.health()
        session = await runtime.start({})
        await runtime.turn(session, {"message": "Rebook it."})
        state = await runtime.state(session)
        await runtime.aclose()
        return state

    state = asyncio.run(go())
    assert [(e["operation"], e["record"]) for e in state["events"]] == [("rebook", "T-7")]
