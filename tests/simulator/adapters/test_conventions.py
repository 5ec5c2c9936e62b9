"""One reader per tracing convention, chosen by the span's own attributes (simulator/adapters/
_conventions.py), and unread spans taken for unknown events, never for none (_spans.py).

The spans here carry the attributes the instrumentors write, as the suite saw them on real
frameworks (tests/simulator/cli/test_real_frameworks.py runs the frameworks themselves)."""

from __future__ import annotations

import json

import pytest
from openinference.semconv.trace import SpanAttributes

from simrun.simulator.adapters import _conventions
from simrun.simulator.adapters._conventions import (
    GENAI,
    OPENINFERENCE,
    OPENLLMETRY,
    TRACELOOP_ENTITY_INPUT,
    TRACELOOP_ENTITY_NAME,
    TRACELOOP_ENTITY_OUTPUT,
    TRACELOOP_SPAN_KIND,
    TRACELOOP_TOOL,
    GenAIReader,
)
from simrun.simulator.adapters._spans import STATUS_ERROR, Span, Tool, TraceBook

TOOLS = {"refill_prescription": Tool("rx_id"), "move_pickup": Tool("rx_id"), "lookup_prescription": Tool(None, True)}


def test_openllmetrys_names_are_its_published_packages():
    semconv_ai = pytest.importorskip("opentelemetry.semconv_ai")
    names = semconv_ai.SpanAttributes
    assert (TRACELOOP_SPAN_KIND, TRACELOOP_ENTITY_NAME, TRACELOOP_ENTITY_INPUT, TRACELOOP_ENTITY_OUTPUT) == (
        names.TRACELOOP_SPAN_KIND, names.TRACELOOP_ENTITY_NAME, names.TRACELOOP_ENTITY_INPUT,
        names.TRACELOOP_ENTITY_OUTPUT)
    assert TRACELOOP_TOOL == semconv_ai.TraceloopSpanKindValues.TOOL.value


def test_the_genai_names_are_its_published_packages():
    """simrun writes the GenAI names itself: the package keeps them in a private module
    (`_incubating`), which product code does not import. Here, and only here, they are read from
    it: a release that renames a name fails this test; one that moves the module fails it too, by
    name (then find the names' new home and check them there)."""
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

    assert (_conventions.GEN_AI_OPERATION_NAME, _conventions.GEN_AI_AGENT_NAME, _conventions.GEN_AI_TOOL_NAME,
            _conventions.GEN_AI_TOOL_CALL_ARGUMENTS, _conventions.GEN_AI_TOOL_CALL_ID) == (
        gen_ai.GEN_AI_OPERATION_NAME, gen_ai.GEN_AI_AGENT_NAME, gen_ai.GEN_AI_TOOL_NAME,
        gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS, gen_ai.GEN_AI_TOOL_CALL_ID)
    ops = gen_ai.GenAiOperationNameValues
    assert _conventions.EXECUTE_TOOL == ops.EXECUTE_TOOL.value
    assert _conventions.MODEL_OPERATIONS == {ops.CHAT.value, ops.TEXT_COMPLETION.value, ops.GENERATE_CONTENT.value,
                                             ops.EMBEDDINGS.value}
    assert gen_ai.GEN_AI_OPERATION_NAME.startswith(_conventions.GENAI_PREFIX)


class Turn:
    """A book with one open turn of session s-1, and spans made in its trace."""

    def __init__(self, book: TraceBook) -> None:
        self.book = book
        self.trace = book.begin("s-1", 1).split("-")[1]
        self.n = 0

    def add(self, name: str, attrs: dict, *, error: str | None = None) -> None:
        self.n += 1
        self.book.add(Span(self.trace, f"{self.n:016x}", "", name, attrs,
                           status_code=STATUS_ERROR if error else 0, status_message=error or "", start_ns=self.n))


def openinference_agents_tool(name: str, args: dict) -> dict:
    """A function span of the OpenAI Agents SDK as openinference-instrumentation-openai-agents writes it."""
    return {SpanAttributes.OPENINFERENCE_SPAN_KIND: "TOOL", SpanAttributes.TOOL_NAME: name,
            SpanAttributes.INPUT_VALUE: json.dumps(args), SpanAttributes.INPUT_MIME_TYPE: "application/json",
            SpanAttributes.OUTPUT_VALUE: "ok",
            SpanAttributes.TOOL_PARAMETERS: json.dumps({"properties": {"rx_id": {"type": "string"}}})}


def test_openinference_tool_spans_are_events_and_its_other_spans_no_calls():
    turn = Turn(TraceBook(TOOLS))
    turn.add("refill-desk", {SpanAttributes.OPENINFERENCE_SPAN_KIND: "AGENT"})
    turn.add("generation", {SpanAttributes.OPENINFERENCE_SPAN_KIND: "LLM"})
    turn.add("handoff to billing", {SpanAttributes.OPENINFERENCE_SPAN_KIND: "TOOL",
                                    SpanAttributes.INPUT_VALUE: "desk", SpanAttributes.OUTPUT_VALUE: "billing"})
    turn.add("lookup_prescription", openinference_agents_tool("lookup_prescription", {"rx_id": "RX-1"}))
    turn.add("move_pickup", openinference_agents_tool("move_pickup", {"rx_id": "RX-2", "date": "2027-01-20"}))
    turn.add("refill_prescription", openinference_agents_tool("refill_prescription", {"rx_id": "RX-9"}),
             error="Error running tool (non-fatal): no refills left")
    # LangChain's tool of one argument: OpenInference writes its input as the bare value, and the
    # tool call id only in the tool message it returns.
    turn.add("refill_prescription", {SpanAttributes.OPENINFERENCE_SPAN_KIND: "TOOL",
                                     SpanAttributes.TOOL_NAME: "refill_prescription",
                                     SpanAttributes.INPUT_VALUE: "RX-1",
                                     SpanAttributes.OUTPUT_VALUE: json.dumps(
                                         {"type": "tool", "data": {"content": "ok", "tool_call_id": "call_7"}})})
    events = turn.book.events("s-1")
    assert [(e["operation"], e["record"], e["status"], e["reason"], e["arguments"]) for e in events] == [
        ("move_pickup", "RX-2", "committed", None, {"rx_id": "RX-2", "date": "2027-01-20"}),
        ("refill_prescription", "RX-9", "refused", "Error running tool (non-fatal): no refills left",
         {"rx_id": "RX-9"}),
        ("refill_prescription", "RX-1", "committed", None, {"rx_id": "RX-1"})]
    assert events[-1]["id"] == "call_7" and events[0]["id"].startswith("span-")
    counts = turn.book.counts
    assert counts.conventions == {OPENINFERENCE: {"spans": 7, "tool_calls": 4}}
    assert (counts.reads, counts.bad, counts.unread) == (1, 0, 0)
    assert turn.book.known("s-1") and turn.book.unknown_reason("s-1") is None


def test_openllmetry_is_read_by_its_own_marker_though_its_spans_carry_genai_attributes_too():
    callback = json.dumps({"input_str": "{'rx_id': 'RX-2', 'date': '2027-01-20'}", "tags": [], "metadata": {},
                           "inputs": {"rx_id": "RX-2", "date": "2027-01-20"},
                           "kwargs": {"color": "green", "name": None, "tool_call_id": "call_3"}})
    turn = Turn(TraceBook(TOOLS))
    turn.add("execute_tool move_pickup", {TRACELOOP_SPAN_KIND: "tool", TRACELOOP_ENTITY_NAME: "move_pickup",
                                          TRACELOOP_ENTITY_INPUT: callback,
                                          "gen_ai.operation.name": "execute_tool",
                                          "gen_ai.tool.name": "move_pickup", "gen_ai.tool.call.arguments": callback})
    turn.add("execute_task agent", {TRACELOOP_SPAN_KIND: "task", TRACELOOP_ENTITY_NAME: "agent",
                                    "gen_ai.operation.name": "execute_task"})
    [event] = turn.book.events("s-1")
    assert (event["id"], event["record"], event["arguments"]) == ("call_3", "RX-2",
                                                                  {"rx_id": "RX-2", "date": "2027-01-20"})
    assert turn.book.counts.conventions == {OPENLLMETRY: {"spans": 2, "tool_calls": 1}}
    assert turn.book.counts.unnamed == 0


def test_genai_spans_are_read_as_before():
    turn = Turn(TraceBook(TOOLS))
    turn.add("execute_tool move_pickup", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "move_pickup",
                                          "gen_ai.tool.call.id": "c-1",
                                          "gen_ai.tool.call.arguments": '{"rx_id": "RX-1", "date": "2027-02-01"}'})
    assert [(e["id"], e["record"]) for e in turn.book.events("s-1")] == [("c-1", "RX-1")]
    assert turn.book.counts.conventions == {GENAI: {"spans": 1, "tool_calls": 1}}


def test_spans_of_no_convention_simrun_reads_leave_the_events_unknown_naming_what_they_were():
    turn = Turn(TraceBook(TOOLS))
    for _ in range(3):
        turn.add("tool move_pickup", {"pharmacy.tool": "move_pickup", "pharmacy.args": "{}"})
    assert turn.book.heard("s-1") and not turn.book.known("s-1")
    reason = turn.book.unknown_reason("s-1")
    assert reason.startswith("3 spans arrived, of no convention simrun reads (attributes pharmacy.*)")
    assert "[runtime.tools] names lookup_prescription, move_pickup, refill_prescription" in reason
    assert turn.book.counts.unread == 3 and turn.book.counts.unread_as == ["attributes pharmacy.*"]


def test_a_convention_simrun_is_not_reading_is_named_and_its_tool_calls_unknown_not_none():
    # The book of a simrun that read only the GenAI conventions, as before: OpenInference's spans
    # arrive, none is read, and the conversation's events are unknown, with the convention named.
    turn = Turn(TraceBook(TOOLS, readers=(GenAIReader(),)))
    turn.add("refill-desk", {SpanAttributes.OPENINFERENCE_SPAN_KIND: "AGENT"})
    turn.add("move_pickup", openinference_agents_tool("move_pickup", {"rx_id": "RX-2", "date": "2027-01-20"}))
    assert turn.book.events("s-1") == [] and not turn.book.known("s-1")
    assert "of no convention simrun reads (OpenInference)" in turn.book.unknown_reason("s-1")
    assert "simrun reads tool spans of OpenTelemetry GenAI" in turn.book.unknown_reason("s-1")


def test_no_span_at_all_is_unknown_too():
    book = TraceBook(TOOLS)
    book.begin("s-1", 1)
    assert not book.known("s-1") and "no span of this conversation arrived" in book.unknown_reason("s-1")


def test_openinference_arguments_without_an_input_are_taken_from_parameters_never_from_a_schema():
    turn = Turn(TraceBook(TOOLS))
    turn.add("move_pickup", {SpanAttributes.OPENINFERENCE_SPAN_KIND: "TOOL", SpanAttributes.TOOL_NAME: "move_pickup",
                             SpanAttributes.TOOL_PARAMETERS: json.dumps({"rx_id": "RX-2", "date": "2027-01-20"})})
    turn.add("move_pickup", {SpanAttributes.OPENINFERENCE_SPAN_KIND: "TOOL", SpanAttributes.TOOL_NAME: "move_pickup",
                             SpanAttributes.TOOL_PARAMETERS: json.dumps(
                                 {"type": "object", "properties": {"rx_id": {"type": "string"}}})})
    assert [(e["record"], e["arguments"]) for e in turn.book.events("s-1")] == [
        ("RX-2", {"rx_id": "RX-2", "date": "2027-01-20"}), (None, None)]
    assert turn.book.counts.unnamed == 1        # a write whose record is unknown: said, never guessed


def test_a_wrapper_too_large_to_parse_costs_its_arguments_not_the_call():
    huge = json.dumps({"inputs": {"rx_id": "RX-1"}, "metadata": {"x": "y" * 300_000}})
    turn = Turn(TraceBook(TOOLS))
    turn.add("execute_tool refill_prescription", {TRACELOOP_SPAN_KIND: "tool",
                                                  TRACELOOP_ENTITY_NAME: "refill_prescription",
                                                  TRACELOOP_ENTITY_INPUT: huge})
    [event] = turn.book.events("s-1")
    assert (event["operation"], event["record"], event["arguments"]) == ("refill_prescription", None, None)
    assert turn.book.counts.bad == 0


@pytest.mark.parametrize("attrs", [{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt"},
                                   {SpanAttributes.OPENINFERENCE_SPAN_KIND: "LLM"}])
def test_spans_of_model_calls_alone_leave_the_tool_calls_unknown(attrs):
    # An instrumented model client: the model asked for tools, and nothing shows the tools it ran.
    turn = Turn(TraceBook(TOOLS))
    turn.add("chat gpt", attrs)
    turn.add("chat gpt", attrs)
    assert not turn.book.known("s-1")
    assert "of model calls alone" in turn.book.unknown_reason("s-1")
    assert "its tool calls are untraced, not none" in turn.book.unknown_reason("s-1")
    turn.add("invoke_agent desk", {"gen_ai.operation.name": "invoke_agent"}) if "gen_ai.operation.name" in attrs \
        else turn.add("desk", {SpanAttributes.OPENINFERENCE_SPAN_KIND: "AGENT"})
    assert turn.book.known("s-1") and turn.book.events("s-1") == []     # an agent's span: none is none
