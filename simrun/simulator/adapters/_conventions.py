"""The tracing conventions simrun reads tool calls from: one reader per convention, chosen by the
span's own attributes.

- OpenLLMetry (Traceloop's instrumentations): `traceloop.span.kind` is `tool`; the tool is
  `traceloop.entity.name`, the call `traceloop.entity.input` (LangChain's callback as JSON: the
  arguments under `inputs`, the call id under `kwargs.tool_call_id`).
- OpenInference (Arize's instrumentors of the OpenAI Agents SDK, LangChain and LangGraph,
  LlamaIndex, CrewAI): `openinference.span.kind` is `TOOL`; the tool is `tool.name`, the arguments
  `input.value` (a JSON object, or a one-argument tool's bare value), the call id `tool.id` or the
  `tool_call_id` of the tool message in `output.value`. A TOOL span with no `tool.name` (the
  Agents SDK's handoffs) is no tool call.
- The OpenTelemetry GenAI conventions: `gen_ai.operation.name` is `execute_tool` (or, without it,
  the span's name starts with `execute_tool`); `gen_ai.tool.name`, `gen_ai.tool.call.arguments`,
  `gen_ai.tool.call.id`.

A span is read by the first reader whose marker it carries, most specific first: OpenLLMetry's
spans carry GenAI attributes too (their `gen_ai.tool.call.arguments` is the whole callback, not the
arguments), so its own marker decides. The attribute names come from the conventions' published
packages where they are public (`openinference-semantic-conventions`, and the stable attributes of
`opentelemetry-semantic-conventions`). The GenAI names are written here: that package keeps them
in its private `_incubating` modules, which a release may move or rename; and OpenLLMetry's
package pulls in the OpenTelemetry SDK. Both sets are checked against their packages in the test
suite (tests/simulator/adapters/test_conventions.py), where a renaming shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes
from opentelemetry.semconv.attributes import error_attributes

from simrun import _secrets as secrets

GENAI = "OpenTelemetry GenAI"
OPENINFERENCE = "OpenInference"
OPENLLMETRY = "OpenLLMetry"

# OpenLLMetry's names (opentelemetry-semantic-conventions-ai: SpanAttributes.TRACELOOP_*,
# TraceloopSpanKindValues.TOOL), checked against that package by the tests.
TRACELOOP_SPAN_KIND = "traceloop.span.kind"
TRACELOOP_ENTITY_NAME = "traceloop.entity.name"
TRACELOOP_ENTITY_INPUT = "traceloop.entity.input"
TRACELOOP_ENTITY_OUTPUT = "traceloop.entity.output"
TRACELOOP_TOOL = "tool"

# The OpenTelemetry GenAI names (opentelemetry-semantic-conventions: gen_ai_attributes.GEN_AI_*,
# GenAiOperationNameValues, in its `_incubating` package), checked against that package by the tests.
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
EXECUTE_TOOL = "execute_tool"
GENAI_PREFIX = "gen_ai."
# The spans of a model call alone, in each convention: an instrumentation that makes only these
# traces the model client, not the agent, and shows no tool call it ran.
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
MODEL_KINDS = frozenset({OpenInferenceSpanKindValues.LLM.value, OpenInferenceSpanKindValues.EMBEDDING.value})
ERROR_TYPE = error_attributes.ERROR_TYPE


@dataclass(frozen=True)
class ToolCall:
    """One tool call as a span tells it, before simrun's rules ([runtime.tools], bounds) apply."""

    name: str
    arguments: Any                  # a JSON object as text or as a map, or None
    call_id: str | None
    bare: str | None = None         # a one-argument tool's input written as the bare value (no name)


class Reader:
    """One convention: whether a span is written in it, and the tool call it shows, if any."""

    name: str
    marker: str         # the attribute whose presence says a span is of this convention
    content_switch: str  # how the instrumentations of this convention are told to record arguments

    def claims(self, span_name: str, attrs: dict[str, Any]) -> bool:
        return self.marker in attrs

    def above_the_model(self, span_name: str, attrs: dict[str, Any]) -> bool:
        """Whether the span is an agent's, a chain's or a tool's, not only a model call's: the
        instrumentation that made it traces the agent, so its tool calls would have come as spans
        (an instrumentation of the model client alone shows the model ask for tools, never the
        tools it ran)."""
        return True

    def tool_call(self, span_name: str, attrs: dict[str, Any]) -> ToolCall | None:
        raise NotImplementedError


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# A span's text is untrusted: a wrapper (OpenLLMetry's callback, a tool message) longer than this
# is not parsed for what it holds; the event keeps its tool and loses its arguments or call id.
MAX_PARSE_CHARS = 256_000


def _json_object(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str) and len(raw) <= MAX_PARSE_CHARS and raw.lstrip().startswith("{"):
        try:
            found = json.loads(raw)
        except ValueError:
            return None
        return found if isinstance(found, dict) else None
    return None


class GenAIReader(Reader):
    name = GENAI
    marker = GEN_AI_OPERATION_NAME
    content_switch = ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true for the official instrumentations; "
                      "Pydantic AI: InstrumentationSettings(include_content=True)")

    def claims(self, span_name: str, attrs: dict[str, Any]) -> bool:
        return (self.marker in attrs or span_name.startswith(EXECUTE_TOOL)
                or any(str(key).startswith(GENAI_PREFIX) for key in attrs))

    def above_the_model(self, span_name: str, attrs: dict[str, Any]) -> bool:
        if GEN_AI_AGENT_NAME in attrs or span_name.startswith(EXECUTE_TOOL):
            return True
        operation = attrs.get(GEN_AI_OPERATION_NAME)
        return operation is not None and operation not in MODEL_OPERATIONS

    def tool_call(self, span_name: str, attrs: dict[str, Any]) -> ToolCall | None:
        operation = attrs.get(GEN_AI_OPERATION_NAME)
        if operation != EXECUTE_TOOL and not (operation is None and span_name.startswith(EXECUTE_TOOL)):
            return None
        name = attrs.get(GEN_AI_TOOL_NAME) or span_name.removeprefix(EXECUTE_TOOL).strip()
        if not isinstance(name, str) or not name:
            raise ValueError("a tool span without a tool name")
        return ToolCall(name, attrs.get(GEN_AI_TOOL_CALL_ARGUMENTS), _str(attrs.get(GEN_AI_TOOL_CALL_ID)))


class OpenInferenceReader(Reader):
    name = OPENINFERENCE
    marker = SpanAttributes.OPENINFERENCE_SPAN_KIND
    content_switch = ("on by default; OPENINFERENCE_HIDE_INPUTS / TraceConfig(hide_inputs=True) turn it off "
                      "(arguments are input.value)")

    def above_the_model(self, span_name: str, attrs: dict[str, Any]) -> bool:
        return str(attrs.get(self.marker, "")).upper() not in MODEL_KINDS

    def tool_call(self, span_name: str, attrs: dict[str, Any]) -> ToolCall | None:
        if str(attrs.get(self.marker, "")).upper() != OpenInferenceSpanKindValues.TOOL.value:
            return None
        name = _str(attrs.get(SpanAttributes.TOOL_NAME))
        if name is None:
            return None      # a handoff (the Agents SDK's), or a tool span that names no tool: no call
        call_id = _str(attrs.get(SpanAttributes.TOOL_ID))
        if call_id is None:
            # LangChain's tool message, as OpenInference's LangChain instrumentor writes the output.
            output = _json_object(attrs.get(SpanAttributes.OUTPUT_VALUE))
            data = output.get("data") if output is not None else None
            call_id = _str(data.get("tool_call_id")) if isinstance(data, dict) else None
        raw = attrs.get(SpanAttributes.INPUT_VALUE)
        if raw is None:
            # No input: `tool.parameters`, when it holds the call's values rather than the tool's
            # JSON schema (the Agents SDK's instrumentor writes the schema there).
            given = _json_object(attrs.get(SpanAttributes.TOOL_PARAMETERS))
            if given is not None and not {"properties", "type", "$schema"} & set(given):
                return ToolCall(name, given, call_id)
        if isinstance(raw, str) and not raw.lstrip().startswith(("{", "[")) and raw:
            # LangChain's instrumentor writes a one-argument tool's input as its bare value.
            return ToolCall(name, None, call_id, bare=raw)
        return ToolCall(name, raw, call_id)


class OpenLLMetryReader(Reader):
    name = OPENLLMETRY
    marker = TRACELOOP_SPAN_KIND
    content_switch = "on by default; TRACELOOP_TRACE_CONTENT=false turns it off"

    def tool_call(self, span_name: str, attrs: dict[str, Any]) -> ToolCall | None:
        if attrs.get(self.marker) != TRACELOOP_TOOL:
            return None
        name = _str(attrs.get(TRACELOOP_ENTITY_NAME))
        if name is None:
            raise ValueError("a tool span without traceloop.entity.name")
        raw = attrs.get(TRACELOOP_ENTITY_INPUT)
        found = _json_object(raw)
        if found is None:
            return ToolCall(name, raw if isinstance(raw, str) and len(raw) <= MAX_PARSE_CHARS else None, None)
        kwargs = found.get("kwargs")
        call_id = _str(kwargs.get("tool_call_id")) if isinstance(kwargs, dict) else None
        if "inputs" in found:     # LangChain's callback: the arguments are its `inputs`
            arguments = found["inputs"]
        elif "input_str" in found:
            arguments = found["input_str"]
        else:                     # a decorated tool (@tool of the Traceloop SDK): its arguments as given
            arguments = found.get("kwargs", found) if set(found) <= {"args", "kwargs"} else found
        return ToolCall(name, arguments, call_id)


READERS: tuple[Reader, ...] = (OpenLLMetryReader(), OpenInferenceReader(), GenAIReader())
CONVENTIONS = tuple(r.name for r in READERS)


def reader_for(span_name: str, attrs: dict[str, Any], readers: tuple[Reader, ...] = READERS) -> Reader | None:
    """The reader of the convention the span is written in, or None (a convention simrun does not read)."""
    return next((r for r in readers if r.claims(span_name, attrs)), None)


# Conventions simrun has no reader for, known by their marker, so that a message can name them.
OTHERS = {"langsmith.span.kind": "LangSmith", "mlflow.spanType": "MLflow", "logfire.msg": "Logfire",
          "logfire.span_type": "Logfire", "ai.operationId": "the Vercel AI SDK"}


def seen_as(span_name: str, attrs: dict[str, Any]) -> str | None:
    """What an unread span looks like, for a message: the convention it is written in when its
    marker says so (one simrun reads but was told not to, or a known other), else the commonest
    first part of its attributes' names (`attributes pharmacy.*`), or None."""
    for reader in READERS:
        if reader.claims(span_name, attrs):
            return reader.name
    for marker, name in OTHERS.items():
        if marker in attrs:
            return name
    parts: dict[str, int] = {}
    for key in attrs:
        head = secrets.cut(str(key).split(".", 1)[0], 40)
        if head and head not in ("service", "telemetry", "otel", "code", "thread", "exception"):
            parts[head] = parts.get(head, 0) + 1
    return f"attributes {max(parts, key=lambda k: parts[k])}.*" if parts else None
