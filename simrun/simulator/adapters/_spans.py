"""Tool spans as store events: which turn a span belongs to, and what event it is.

Attribution: simrun gives every turn its own W3C trace context (`traceparent`): a new trace id,
and a span id standing for simrun's side of the turn. Every span the runtime makes while it
answers that turn is in that trace, however deep it nests and in whatever order its exporter
sends it, so a span is attributed by its trace id alone, with no walk up its parents. A span of
no trace simrun gave is counted and ignored. A span whose parent is simrun's span is the
runtime's own span for the turn (an agent's `invoke_agent`, a framework's root): once it has
arrived the turn is settled, since a parent span ends after its children and exporters send
spans in the order they end. simrun waits for it after each reply, at most
`runtime.trace_wait_s`; a span that comes later still joins its turn's events, which the store
read after the next turn (and at the end) holds.

Events are read in the convention the span itself is written in (simulator/adapters/_conventions.py):
the OpenTelemetry GenAI conventions (`execute_tool` spans), OpenInference (`openinference.span.kind`
TOOL: the instrumentors of the OpenAI Agents SDK, LangChain and LangGraph, LlamaIndex, CrewAI) and
OpenLLMetry (`traceloop.span.kind` tool). Each tool call becomes one event: the tool's name is its
operation, the call's arguments (a JSON object) its arguments, the call's id its id, and the span's
status its status: an error status is `refused` (the status message, else `error.type`, its
reason), anything else `committed`. `[runtime.tools]` says which argument names the record a tool
writes, and which tools only read (their calls are not events).

Unread is not none. A conversation's events are known once a tool call was read from its spans,
or one of its spans is an agent's, a chain's or a tool's in a convention simrun reads (its tool
calls, had there been any, would have been read). Spans of no convention simrun reads, or of
model calls alone (an instrumented model client, which never shows the tools the agent ran),
leave them unknown, however many arrive: the checks over events and goal reached are
UNVERIFIABLE, never clean, and the book says why (`unknown_reason`), naming what the spans looked
like. Per convention it counts the spans and the tool calls read (`Counts.conventions`): spans of
a convention that gave no tool call in a whole run while `[runtime.tools]` names tools are an
instrumentation that does not trace its tools, which `simrun check-runtime` says.

A span sent again (an exporter retries a batch it saw no answer to; a callable's spans come
both in-process and through its exporter) is kept once. Until a span of a conversation has
arrived, its events are unknown (`heard`), not none.

Spans are untrusted: every string is cut to MAX_TEXT characters and redacted before it is kept,
arguments larger than MAX_ARGUMENTS_CHARS are dropped (the event keeps its operation), a turn
keeps at most `max_spans_per_turn` tool events, and a span that cannot be read is counted and
skipped: one bad span costs that span.
"""

from __future__ import annotations

import asyncio
import json
import os
import string
from dataclasses import dataclass, field
from typing import Any

from simrun import _secrets as secrets
from simrun.simulator.adapters._conventions import ERROR_TYPE, READERS, Reader, reader_for, seen_as

MAX_TEXT = 2000                 # characters of a tool name, a record id, a reason
MAX_ARGUMENTS_CHARS = 64_000    # of a tool call's arguments, as JSON text
MAX_SPANS_PER_TURN = 1000       # tool events kept per turn; the rest are counted as dropped
MAX_OPEN_TURNS = 100_000        # trace contexts remembered at once (a conversation's turns end with it)
MAX_SPANS_PER_CONVERSATION = 50_000   # spans of any kind; past it, its events are unknown (issue 39, rule 4)
MAX_ATTRIBUTES_PER_SPAN = 1000  # a span with more leaves its conversation's events unknown
STATUS_ERROR = 2                # opentelemetry.proto.trace.v1.Status.STATUS_CODE_ERROR


@dataclass(frozen=True)
class Tool:
    record: str | None = None       # an argument name, or a template over the arguments
    read_only: bool = False


@dataclass(frozen=True)
class Span:
    """One span as decoded from OTLP: ids in hex, attributes as plain values."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    attributes: dict[str, Any]
    status_code: int = 0
    status_message: str = ""
    start_ns: int = 0


@dataclass
class _Turn:
    session: str
    index: int
    span_id: str
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)   # (start time, event)
    spans: int = 0                                   # spans of this turn received, of any kind
    ids: set[str] = field(default_factory=set)       # the tool spans kept: an exporter's retry sends them again
    calls: int = 0                                   # tool calls read (reads of read-only tools too)
    conventions: set[str] = field(default_factory=set)   # the conventions its spans were written in
    above: set[str] = field(default_factory=set)     # ...of those, the ones of an agent's, chain's or tool's span
    unread: set[str] = field(default_factory=set)    # what its spans of no convention simrun reads looked like


@dataclass
class Counts:
    """What the receiver saw, for `simrun check-runtime` and the tests."""

    spans: int = 0          # spans received
    tool_events: int = 0    # kept as events
    reads: int = 0          # calls of read-only tools
    orphans: int = 0        # spans of no turn simrun gave a context to
    bad: int = 0            # spans that could not be read
    dropped: int = 0        # tool spans past a turn's limit
    repeats: int = 0        # tool spans received again (an exporter's retry), kept once
    unnamed: int = 0        # write tool events whose record is unknown (no arguments on the span)
    # convention -> {"spans": spans of it received, "tool_calls": tool calls read from them}
    conventions: dict[str, dict[str, int]] = field(default_factory=dict)
    unread: int = 0         # spans of no convention simrun reads
    unread_as: list[str] = field(default_factory=list)   # what they looked like (a convention, or "attributes x.*")


class TraceBook:
    """The trace context of every open turn, and the events their spans became."""

    def __init__(self, tools: dict[str, Tool] | None = None, *, max_spans_per_turn: int = MAX_SPANS_PER_TURN,
                 max_spans_per_conversation: int = MAX_SPANS_PER_CONVERSATION,
                 readers: tuple[Reader, ...] = READERS) -> None:
        self.tools = dict(tools or {})
        self.max_spans_per_turn = max_spans_per_turn
        self.max_spans_per_conversation = max_spans_per_conversation
        self._spans_of: dict[str, int] = {}            # session -> its spans received
        self._unbounded: dict[str, str] = {}           # session -> why its spans passed a bound (events unknown)
        self.readers = readers
        self.counts = Counts()
        self._turns: dict[str, _Turn] = {}             # trace id -> turn
        self._sessions: dict[str, list[str]] = {}      # session -> its turns' trace ids, in order

    def begin(self, session: str, index: int) -> str:
        """A new trace context for turn `index` of `session`: its `traceparent` header value."""
        trace_id, span_id = os.urandom(16).hex(), os.urandom(8).hex()
        if len(self._turns) >= MAX_OPEN_TURNS:
            raise RuntimeError(f"more than {MAX_OPEN_TURNS:,} turns hold a trace context; are sessions closed?")
        self._turns[trace_id] = _Turn(session, index, span_id)
        self._sessions.setdefault(session, []).append(trace_id)
        return f"00-{trace_id}-{span_id}-01"

    def owns(self, trace_id: str) -> bool:
        """Whether the trace is one simrun gave a turn (safe from any thread)."""
        return trace_id in self._turns

    def add(self, span: Span) -> None:
        """File one span under its turn; a span that cannot be read is counted and skipped."""
        self.counts.spans += 1
        turn = self._turns.get(span.trace_id)
        if turn is None:
            self.counts.orphans += 1
            return
        turn.spans += 1
        # Traces cost what their bytes allow: past a bound, a conversation's events are unknown with
        # the reason, never judged on the part of its spans that was kept (the receiver refuses an
        # export before this; a callable's own spans come here one by one).
        spans = self._spans_of[turn.session] = self._spans_of.get(turn.session, 0) + 1
        if spans > self.max_spans_per_conversation or len(span.attributes) > MAX_ATTRIBUTES_PER_SPAN:
            past = (f"more than {self.max_spans_per_conversation:,} spans arrived"
                    if spans > self.max_spans_per_conversation
                    else f"a span of more than {MAX_ATTRIBUTES_PER_SPAN:,} attributes arrived")
            self._unbounded[turn.session] = f"{past}: its spans past the bound were not read, so its tool calls are " \
                                            "unread, not none"
            return
        if span.span_id in turn.ids:     # sent again (an exporter retries a batch it saw no answer to)
            self.counts.repeats += 1
            return
        reader = reader_for(span.name, span.attributes, self.readers)
        if reader is None:
            self.counts.unread += 1
            seen = seen_as(span.name, span.attributes)      # (an attribute's name is the span's: untrusted)
            seen = secrets.cut(seen, 120) if seen is not None else None
            if seen is not None and len(turn.unread) < 5:
                turn.unread.add(seen)
            if seen is not None and seen not in self.counts.unread_as and len(self.counts.unread_as) < 5:
                self.counts.unread_as.append(seen)
            event = None
        else:
            turn.conventions.add(reader.name)
            if reader.name not in turn.above and reader.above_the_model(span.name, span.attributes):
                turn.above.add(reader.name)
            tally = self.counts.conventions.setdefault(reader.name, {"spans": 0, "tool_calls": 0})
            tally["spans"] += 1
            try:
                event = self._event(span, turn, reader, tally)
            except Exception:    # any shape the span came in: this span only
                self.counts.bad += 1
                return
        if event is not None:
            if len(turn.events) >= self.max_spans_per_turn:
                self.counts.dropped += 1
            else:
                turn.events.append((span.start_ns, event))
                turn.ids.add(span.span_id)
                self.counts.tool_events += 1
        if span.parent_span_id == turn.span_id:
            turn.settled.set()

    async def settle(self, session: str, index: int, wait_s: float) -> bool:
        """Wait until turn `index`'s own span has arrived, at most `wait_s`; whether it did."""
        trace = next((t for t in self._sessions.get(session, ()) if self._turns[t].index == index), None)
        if trace is None:
            return False
        if self._turns[trace].settled.is_set():
            return True
        try:
            await asyncio.wait_for(self._turns[trace].settled.wait(), wait_s)
        except TimeoutError:
            return False
        return True

    def heard(self, session: str) -> bool:
        """Whether any span of the session's turns has arrived. Until one has, its tool events are
        unknown, not none: an exporter that sends nowhere looks exactly like an assistant that
        calls no tool."""
        return any(self._turns[t].spans for t in self._sessions.get(session, ()))

    def past_bound(self, spans: list[Span]) -> tuple[str, ...]:
        """A trace id of each conversation these spans would take past its bound on spans."""
        adding: dict[str, tuple[str, int]] = {}
        for span in spans:
            turn = self._turns.get(span.trace_id)
            if turn is not None:
                adding[turn.session] = (span.trace_id, adding.get(turn.session, ("", 0))[1] + 1)
        return tuple(trace for session, (trace, count) in adding.items()
                     if self._spans_of.get(session, 0) + count > self.max_spans_per_conversation)

    def unbounded(self, reason: str, traces: tuple[str, ...] | None) -> None:
        """Spans of the conversations of `traces` (None: of any conversation open now, when an
        export could not be read far enough to tell) were refused past a bound: their events are
        unknown, for `reason`."""
        if traces is None:
            sessions = set(self._sessions)
        else:
            sessions = {self._turns[t].session for t in traces if t in self._turns}
        for session in sessions:
            self._unbounded.setdefault(session, reason)

    def known(self, session: str) -> bool:
        """Whether the session's tool events are known (an empty list of them is none): a tool
        call was read from its spans, or a span of it is an agent's, a chain's or a tool's in a
        convention simrun reads, whose tool calls would have been read. Spans of no convention
        simrun reads, or of model calls alone, leave them unknown."""
        if session in self._unbounded:
            return False
        turns = [self._turns[t] for t in self._sessions.get(session, ())]
        return any(t.calls or t.above for t in turns)

    def unknown_reason(self, session: str) -> str | None:
        """Why the session's events are unknown, naming the conventions its spans were written in;
        None when they are known."""
        if session in self._unbounded:
            return self._unbounded[session]
        if self.known(session):
            return None
        turns = [self._turns[t] for t in self._sessions.get(session, ())]
        spans = sum(t.spans for t in turns)
        if not spans:
            return ("no span of this conversation arrived: point the assistant's OpenTelemetry exporter at "
                    "simrun's receiver (OTEL_EXPORTER_OTLP_ENDPOINT)")
        unread = sorted(set().union(*(t.unread for t in turns)))
        models = sorted(set().union(*(t.conventions for t in turns)))
        looked = f" ({', '.join(unread)})" if unread else ""
        reads = ", ".join(r.name for r in self.readers)
        named = f", while [runtime.tools] names {', '.join(sorted(self.tools))}" if self.tools else ""
        if models:
            return (f"{spans} spans arrived, of model calls alone ({', '.join(models)}: no agent, chain or tool "
                    f"span){' and of no convention simrun reads' + looked if unread else ''}{named}: the "
                    "instrumentation traces the model, not the tools it runs; its tool calls are untraced, "
                    "not none")
        return (f"{spans} spans arrived, of no convention simrun reads{looked}{named}: its tool calls are "
                f"unread, not none (simrun reads tool spans of {reads})")

    def events(self, session: str) -> list[dict[str, Any]]:
        """The session's tool events, by turn, and within a turn in the order the calls started."""
        found = []
        for trace in self._sessions.get(session, ()):
            found += [event for _, event in sorted(self._turns[trace].events, key=lambda pair: pair[0])]
        return found

    def forget(self, session: str) -> None:
        self._spans_of.pop(session, None)
        self._unbounded.pop(session, None)
        for trace in self._sessions.pop(session, ()):
            self._turns.pop(trace, None)

    def _event(self, span: Span, turn: _Turn, reader: Reader, tally: dict[str, int]) -> dict[str, Any] | None:
        attrs = span.attributes
        call = reader.tool_call(span.name, attrs)
        if call is None:
            return None
        name = call.name
        turn.calls += 1
        tally["tool_calls"] += 1
        tool = self.tools.get(name, Tool())
        if tool.read_only:
            self.counts.reads += 1
            return None
        bare = call.bare
        arguments = _arguments(call.arguments)
        refused = span.status_code == STATUS_ERROR
        reason = (span.status_message or str(attrs.get(ERROR_TYPE) or "") or "error status") if refused else None
        call_id = call.call_id
        record = _record(tool.record, arguments)
        if record is None and bare is not None and tool.record is not None and "{" not in tool.record:
            # A one-argument tool whose input the instrumentation wrote as the bare value (OpenInference's
            # LangChain instrumentor does): that value is the argument the record is named by.
            record = _text(bare)
            arguments = {tool.record: record}
        if record is None and tool.record is not None:
            self.counts.unnamed += 1
        return {"id": _text(call_id if isinstance(call_id, str) and call_id else f"span-{span.span_id}"),
                "turn": turn.index, "operation": _text(name), "record": record,
                "status": "refused" if refused else "committed", "offer": None,
                "reason": _text(reason) if reason else None, "arguments": arguments}


def _text(value: str) -> str:
    # Through the one door: every secret cut out of the whole text, then clipped (a secret across
    # the clip would leave a part of itself that no longer matches it).
    return secrets.cut(value, MAX_TEXT)


def _arguments(raw: Any) -> dict[str, Any] | None:
    """A tool call's arguments: a JSON object as text (or, from some SDKs, a map already)."""
    if raw is None:
        return None
    if isinstance(raw, str):
        if len(raw) > MAX_ARGUMENTS_CHARS:
            return None
        raw = json.loads(raw)
    if not isinstance(raw, dict):
        raise ValueError("the tool call's arguments are not a JSON object")
    if len(json.dumps(raw, default=str)) > MAX_ARGUMENTS_CHARS:
        return None
    arguments: dict[str, Any] = secrets.redact_value(raw)
    return arguments


def _record(rule: str | None, arguments: dict[str, Any] | None) -> str | None:
    """The record a call writes: its argument named by `rule`, or `rule` as a template over them."""
    if rule is None or arguments is None:
        return None
    if "{" not in rule:
        value = arguments.get(rule)
        return None if value is None else _text(str(value))
    names = [name for _, name, _, _ in string.Formatter().parse(rule) if name]
    if any(name not in arguments for name in names):
        return None
    return _text(rule.format_map({name: arguments[name] for name in names}))
