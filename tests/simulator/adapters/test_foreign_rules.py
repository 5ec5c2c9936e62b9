"""The rules an assistant written by someone else relies on, each tried on cases of its own: a
body template filled in one pass, an argument asked for in the assistant's words, a receiver on
the port an exporter already knows, an exporter made when its module is imported, and spans read
in this process as they end."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from simrun._errors import RuntimeFault, RuntimeUnavailable
from simrun.scoring.dataset._models import Step
from simrun.simulator.adapters import _local_spans as local_spans
from simrun.simulator.adapters._callable import CallableRuntime
from simrun.simulator.adapters._otlp import TraceReceiver
from simrun.simulator.adapters._spans import Tool, TraceBook
from simrun.simulator.adapters._template import fill
from simrun.simulator.users._asked import asked_by_name


@pytest.mark.parametrize("said", ['a "quote", a line\nbreak, ü, {braces} and {session}', "{messages}", "{message}"])
def test_a_body_template_is_filled_in_one_pass_and_stays_json(said):
    messages = [{"role": "user", "content": said}]
    body = fill({"q": "{message}", "s": "{session}", "log": "so far: {messages}", "all": "{messages}", "n": 3},
                said, messages, "s-1")
    assert body["q"] == said and body["s"] == "s-1" and body["all"] == messages and body["n"] == 3
    assert body["log"] == "so far: " + json.dumps(messages, ensure_ascii=False)    # not left as a placeholder
    assert json.loads(json.dumps(body)) == body


STEP = Step(operation="reschedule", say=("x",),
            arguments={"appointment_ref": "A-7", "new_date": "2027-05-02", "guests": 2, "bookingRef": "B-1"},
            answers={"appointment_ref": ("{appointment_ref}",), "new_date": ("{new_date}",), "guests": ("2",),
                     "bookingRef": ("B-1",)})


@pytest.mark.parametrize("reply, asked", [
    ("What's the appointment reference?", ["appointment_ref"]),
    ("Which day works for you?", ["new_date"]),
    ("Please give me the appointment number and the new date.", ["appointment_ref", "new_date"]),
    ("Let me know how many guests.", ["guests"]),
    ("Which booking is it? Its ref, please?", ["bookingRef"]),
    ("What's your phone number?", []),                   # an identifier, but not the appointment's
    ("I moved appointment A-7 to that date.", []),        # no request
    ("Is the mandate ok?", []),                           # a word, not a part of one
])
def test_an_argument_is_heard_when_the_assistant_asks_for_it_in_its_own_words(reply, asked):
    assert asked_by_name(reply, STEP) == asked


def test_the_receiver_listens_on_the_port_given_and_says_so_when_it_is_taken():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    receiver = TraceReceiver(TraceBook(), port=port)
    try:
        assert receiver.endpoint == f"http://127.0.0.1:{port}"
        with pytest.raises(RuntimeUnavailable, match=rf"127.0.0.1:{port} \(runtime.trace_port\)"):
            TraceReceiver(TraceBook(), port=port)
    finally:
        asyncio.run(receiver.aclose())


def test_an_exporter_made_when_its_module_is_imported_is_pointed_at_the_receiver(tmp_path, monkeypatch):
    """Its state hook's module is imported first: the environment is already simrun's then."""
    (tmp_path / "imported_desk.py").write_text(
        "import os\nSEEN = os.environ.get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')\n"
        "def reply(messages, session):\n    return 'hi'\ndef records(session):\n    return {}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    runtime = CallableRuntime("imported_desk:reply", traces=True, state="imported_desk:records")
    import imported_desk
    assert imported_desk.SEEN == runtime.receiver.endpoint + "/v1/traces"
    asyncio.run(runtime.aclose())
    import os
    assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" not in os.environ     # put back as it was


def test_spans_made_in_this_process_are_filed_as_they_end_with_no_exporter():
    """A provider with no exporter at all: its spans reach the book through the processor."""
    provider = TracerProvider()
    provider.add_span_processor(local_spans._processor())
    tracer = provider.get_tracer("t")
    book = TraceBook({"add_note": Tool("ref"), "lookup": Tool(read_only=True)})
    watcher = local_spans.LocalSpans(book)

    async def go():
        watcher.loop = asyncio.get_running_loop()
        local_spans._watchers.add(watcher)
        try:
            traceparent = book.begin("s-1", 1)
            parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent})

            def agent():          # in a worker thread, as a sync callable runs
                with tracer.start_as_current_span("invoke_agent", context=parent):
                    with tracer.start_as_current_span("chat"):
                        for ref in ("A-1", "A-2"):
                            with tracer.start_as_current_span("execute_tool add_note", attributes={
                                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add_note",
                                    "gen_ai.tool.call.arguments": json.dumps({"ref": ref})}) as span:
                                if ref == "A-2":
                                    span.set_status(Status(StatusCode.ERROR, "full"))
                        with tracer.start_as_current_span("execute_tool lookup", attributes={
                                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}):
                            pass

            await asyncio.to_thread(agent)
            await asyncio.sleep(0)
            return book.events("s-1"), watcher.heard, await book.settle("s-1", 1, 0)
        finally:
            local_spans._watchers.discard(watcher)

    events, heard, settled = asyncio.run(go())
    assert heard and settled
    assert [(e["record"], e["status"], e["reason"]) for e in events] == [("A-1", "committed", None),
                                                                         ("A-2", "refused", "full")]
    assert book.counts.reads == 1


NEVER = __import__("threading").Event()


def hangs(messages, session):
    NEVER.wait()


async def hangs_async(messages, session):
    await asyncio.Event().wait()


@pytest.mark.parametrize("function", ["hangs", "hangs_async"])
def test_a_function_that_never_answers_is_a_timeout_of_its_conversation(function):
    runtime = CallableRuntime(f"{__name__}:{function}", timeout_s=0.2)

    async def go():
        session = await runtime.start({"seed": 1})
        try:
            await runtime.turn(session, {"message": "hi"})
        finally:
            await runtime.aclose()

    with pytest.raises(RuntimeFault) as info:
        asyncio.run(go())
    assert info.value.kind == "timeout" and "runtime.timeout_s" in str(info.value)


def test_a_write_span_without_its_arguments_names_no_record_and_is_counted():
    from simrun.simulator.adapters._spans import Span

    book = TraceBook({"add_note": Tool("ref")})
    trace_id = book.begin("s-1", 1).split("-")[1]
    for span_id, arguments in (("a" * 16, None), ("b" * 16, '{"ref": "A-1"}')):
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add_note"}
        if arguments:
            attributes["gen_ai.tool.call.arguments"] = arguments
        book.add(Span(trace_id, span_id, "c" * 16, "execute_tool add_note", attributes))
    assert [(e["record"], e["arguments"]) for e in book.events("s-1")] == [(None, None), ("A-1", {"ref": "A-1"})]
    assert book.counts.unnamed == 1
