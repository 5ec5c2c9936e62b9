"""`simrun check-runtime`: a short conformance conversation against any runtime.

It says which protocol operations and turn-result fields the runtime supplies, the rung of the
evidence ladder it reaches (simulator/_ladder.py) and what the next rung would add, which classes
and guarantees will therefore be UNVERIFIABLE in a run (and for want of which evidence), and
every protocol violation it saw, with the offending JSON. The conversation follows the project's
first goal (or the one named): its first request, a click on the first offer, a click on an
offer that has expired, and one of its questions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from simrun import _secrets as secrets
from simrun._errors import RuntimeFault
from simrun._protocol import SNAPSHOT, TURN_FIELDS, Audit, Started, State, TurnResult, violations
from simrun._storable import Json
from simrun._transcript import TurnRecord, UserTurn
from simrun.scoring.checks import shown
from simrun.scoring.dataset import Goal, Persona, canonical_json
from simrun.simulator._ladder import NEEDS, Rung, level_of, rungs
from simrun.simulator.adapters import RuntimeAdapter, check_health

__all__ = ["NEEDS", "Conformance", "check_runtime"]

# The GenAI conventions' switch for recording a tool call's arguments, for a runtime whose spans
# named no convention (the frameworks' own switches: docs/any-assistant.md).
CONTENT_CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true"

V = TypeVar("V")

PROBE_PERSONA = Persona(id="conformance", name="Conformance probe")


@dataclass
class Violation:
    where: str
    problem: str
    json: str


@dataclass
class Conformance:
    runtime: str
    health: dict[str, Any] | None = None
    operations: dict[str, str] = field(default_factory=dict)
    turns: list[TurnRecord] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    audit: list[dict[str, Any]] | None = None
    crash: dict[str, Any] | None = None     # the evidence of a turn the runtime failed
    traces: dict[str, Any] | None = None    # what the trace receiver saw, for a runtime read through its traces
    tools: tuple[str, ...] = ()              # the tools [runtime.tools] names, for a runtime read through its traces
    reads: tuple[tuple[str, str], ...] = ()  # the conventions its book reads: (name, its content-capture switch)
    foreign: bool = False                    # an assistant with no protocol code (callable, chat, template)
    transport: str = ""                      # its transport: callable, chat or template
    goal_reads: set[str] | None = None       # what the project's goals read ("events", "records"), when known

    @property
    def ok(self) -> bool:
        return not self.violations

    def field_presence(self) -> dict[str, int]:
        answered = [t.result for t in self.turns if isinstance(t.result, dict)]
        return {name: sum(1 for r in answered if name in r) for name in TURN_FIELDS}

    def missing(self) -> set[str]:
        """Evidence the runtime did not give in every turn (fields), or at all (the store's
        events and records, the audit stream)."""
        answered = [t for t in self.turns if isinstance(t.result, dict)]
        gone = {name for name, n in self.field_presence().items() if n < len(answered)}
        states = [t.state for t in self.turns if isinstance(t.state, dict)]
        if not any(isinstance(s.get("events"), list) for s in states) or (self.traces is not None
                                                                           and not self.traces["spans"]):
            gone.add("events")     # (events read from traces, where none came, are not given)
        if not any(isinstance(s.get("records"), dict) for s in states):
            gone.add("records")
        if self.operations.get("audit") != "supplied":
            gone.add("audit")
        return gone

    def given(self) -> set[str]:
        """The evidence the runtime gave: the names of the ladder (simulator/_ladder.py)."""
        names = {e for needs in NEEDS.values() for e in needs} | {"reply"}
        return names - self.missing() if any(t.result is not None for t in self.turns) else set()

    def level(self) -> int:
        return level_of(self.given())

    def ladder(self) -> list[Rung]:
        return rungs(self.given())

    def trace_lines(self) -> list[tuple[str, str | None]]:
        """What the trace receiver saw, in words, with a style (None, or "yellow" for what to fix):
        the spans, the conventions they were written in and the tool calls read from each, the
        spans of no convention simrun reads, and the switch that records a tool call's arguments."""
        t = self.traces
        if t is None:
            return []
        if not t["spans"]:
            return [("traces: no span arrived; point the assistant's OpenTelemetry exporter at simrun "
                     "(OTEL_EXPORTER_OTLP_ENDPOINT, which simrun sets for a command it starts and for a callable)",
                     "yellow")]
        lines: list[tuple[str, str | None]] = [(
            f"traces: {t['spans']} spans, {t['tool_events']} tool calls kept as events, {t['reads']} reads, "
            f"{t['orphans']} of no turn, {t['bad']} unreadable, {t['dropped']} past a turn's limit", None)]
        conventions: dict[str, dict[str, int]] = t.get("conventions") or {}
        for name, seen in conventions.items():
            lines.append((f"traces: {name}: {seen['spans']} spans, {seen['tool_calls']} tool calls read", None))
            if not seen["tool_calls"] and self.tools:
                lines.append((f"traces: no tool call was read from the {name} spans, while [runtime.tools] names "
                              f"{', '.join(self.tools)}: if the assistant called a tool in the probe, its "
                              "instrumentation does not trace its tools", "yellow"))
        if t.get("unread"):
            looked = ", ".join(t.get("unread_as") or []) or "no attributes"
            lines.append((f"traces: {t['unread']} spans of no convention simrun reads ({looked}): a conversation "
                          "whose spans are all such has its events unknown (UNVERIFIABLE), never none; simrun "
                          f"reads tool spans of {', '.join(n for n, _ in self.reads)} (docs/any-assistant.md)",
                          "yellow"))
        if t.get("unnamed"):
            switches = "; ".join(f"{name}: {switch}" for name, switch in self.reads if name in conventions)
            lines.append((f"traces: {t['unnamed']} write tool calls came without their arguments, so the record "
                          "each wrote is unknown (wrong_record UNVERIFIABLE for them): turn on the instrumentation's "
                          f"content capture ({switches or CONTENT_CAPTURE}; per framework: docs/any-assistant.md)",
                          "yellow"))
        return lines

    def receipts_line(self) -> str | None:
        """For an assistant read through its traces: what its receipts are, with the ids it gave."""
        if not self.foreign:
            return None
        ids = list(dict.fromkeys(str(e["id"]) for t in self.turns if isinstance(t.state, dict)
                                 for e in (t.state.get("events") or [])
                                 if isinstance(e, dict) and e.get("status") == "committed" and "id" in e))
        shown_ids = f" (the probe's: {', '.join(ids[:3])})" if ids else ""
        carry = ('a field "receipts" of the assistant message' if self.transport in ("chat", "template")
                 else 'return {"reply": ..., "receipts": [...]}')
        return (f"receipts (phantom_receipt): the tool call ids of the writes a reply claims{shown_ids}; {carry}. "
                "Only the writes this reply claims, not every write of the turn")

    def unverifiable(self) -> dict[str, list[str]]:
        gone = self.missing()
        needs_of = dict(NEEDS)
        if self.goal_reads is not None:
            # goal reached needs only what the project's goals read: events for success.sql over
            # events, records for success.records, success.answered and queries over records.
            needs_of["goal_reached"] = tuple(n for n in NEEDS["goal_reached"] if n in self.goal_reads)
        return {cls: [n for n in needs if n in gone] for cls, needs in needs_of.items()
                if any(n in gone for n in needs)}


# Failures after which the runtime no longer answers: it is not asked anything more.
GONE = ("timeout", "connection", "exited", "closed")


def _excerpt(fault: RuntimeFault) -> str:
    """What shows the failure: the body it sent, else the traceback or stderr tail."""
    evidence = fault.evidence
    return secrets.tail(str(evidence.get("body") or evidence.get("traceback") or evidence.get("stderr") or ""), 1500)


def _json(value: Any) -> str:
    return secrets.cut(json.dumps(value, default=str), 1500)


def _offers(result: Any) -> list[str]:
    """The ids a turn offered, of a result that may be malformed."""
    return [i for i in shown(result if isinstance(result, dict) else None).offers if isinstance(i, str)]


def _probe_turns(goal: Goal | None) -> list[Callable[[list[Json]], UserTurn | None]]:
    """The user turns of the probe, each chosen from what the runtime showed so far."""
    step = next((s for s in goal.steps if s.say), None) if goal is not None else None
    values = {**goal.facts, **{k: goal.resolve(v) for k, v in step.arguments.items()}} \
        if goal is not None and step is not None else {}
    first = step.say[0].format(**values) if step else "Hello"
    question = goal.questions[0].ask.format(**goal.facts) if goal and goal.questions else "What can you do for me?"

    def click_current(results: list[Json]) -> UserTurn:
        offers = _offers(results[-1])
        return UserTurn("click", offer=offers[0]) if offers else UserTurn("message", "yes")

    def click_expired(results: list[Json]) -> UserTurn | None:
        current = set(_offers(results[-1]))
        old = [o for r in results[:-1] for o in _offers(r) if o not in current]
        return UserTurn("click", offer=old[0]) if old else None

    return [lambda results: UserTurn("message", first), click_current, click_expired,
            lambda results: UserTurn("message", question)]


def goal_reads(goals: list[Goal]) -> set[str]:
    """What deciding these goals reads of a store: "events", "records" (the tables their queries
    name, as DuckDB's parser reads them; records for record checks and answered questions)."""
    import duckdb

    reads: set[str] = set()
    for goal in goals:
        if goal.success.records or goal.success.answered:
            reads.add("records")
        for query in goal.success.sql:
            try:
                reads |= {name for name in duckdb.get_table_names(query) if name in ("events", "records")}
            except duckdb.Error:
                reads |= {"events", "records"}     # unread: assume both (simrun validate says why)
    return reads


async def check_runtime(runtime: RuntimeAdapter, goal: Goal | None = None,
                        goals: list[Goal] | None = None) -> Conformance:
    """The probe conversation (the goal's), and what the runtime gives; `goals`, the project's,
    say what goal reached needs of it."""
    runtime.strict = False
    report = Conformance(runtime.description, foreign=runtime.builds_state,
                         transport=runtime.description.split(":", 1)[0],
                         goal_reads=goal_reads(goals) if goals is not None else None)
    try:
        return await _converse(runtime, goal, report)
    finally:
        if runtime.book is not None:
            report.traces = dataclasses.asdict(runtime.book.counts)
            report.tools = tuple(sorted(runtime.book.tools))
            report.reads = tuple((r.name, r.content_switch) for r in runtime.book.readers)
        await runtime.aclose()


async def _converse(runtime: RuntimeAdapter, goal: Goal | None, report: Conformance) -> Conformance:
    def note(where: str, model: type, value: Any) -> None:
        for problem in violations(model, value):
            report.violations.append(Violation(where, problem, _json(value)))

    # A runtime with no protocol code has its state built by simrun, from what it gives (tool
    # spans, a state hook): what is absent there is a rung not reached, not a violation.
    state_model = None if runtime.builds_state else State
    report.health = check_health(await runtime.health(), runtime.description)
    report.operations["health"] = "supplied"
    setup = json.loads(canonical_json(goal.setup)) if goal else {}
    try:
        session = await runtime.start({"seed": 1, "persona": PROBE_PERSONA.id,
                                       "goal": goal.id if goal else "conformance", "setup": setup})
    except RuntimeFault as fault:
        report.operations["start"] = f"failed: {fault}"
        report.crash = {**fault.evidence, "turn": None}
        report.violations.append(Violation("start", f"{fault.kind}: {fault}", _excerpt(fault)))
        return report
    report.operations["start"] = "supplied"
    first = runtime.first_state(session) if state_model is not None else None
    note("start", Started, {"session": session, **({SNAPSHOT: first} if first is not None else {})})
    if first is not None:
        # As for a turn's: the store sent with the start reply must be what `state` answers then.
        # (The state operation itself is judged after each turn, where a failure of it is reported.)
        try:
            state = await runtime.state(session)
        except RuntimeFault:
            state = None
        if state is not None and first != state:
            report.violations.append(Violation("start", "state: the store sent with the start reply is not what "
                                               "the state operation answers right after it", _json(first)))
    results: list[Json] = []     # the turn results as they came (a malformed one too)
    for choose in _probe_turns(goal):
        user = choose(results)
        if user is None:
            continue
        turn_no = len(report.turns) + 1
        try:
            result = await runtime.turn(session, user.payload())
        except RuntimeFault as fault:
            report.operations["turn"] = f"failed in turn {turn_no}: {fault}"
            report.crash = {**fault.evidence, "turn": turn_no}
            report.violations.append(Violation(f"turn {turn_no}", f"{fault.kind}: {fault}", _excerpt(fault)))
            report.turns.append(TurnRecord(turn_no, user, None, None))
            break
        report.operations["turn"] = "supplied"
        if not isinstance(result, dict) or not isinstance(result.get("reply"), str):
            report.violations.append(Violation(f"turn {turn_no}", "reply: a turn result needs a string 'reply'",
                                               _json(result)))
        else:
            note(f"turn {turn_no}", TurnResult, result)
        state = await _optional(runtime.state, session, report, "state", note, state_model)
        sent = result.get(SNAPSHOT) if isinstance(result, dict) and state_model is not None else None
        if sent is not None and state is not None and sent != state:
            report.violations.append(Violation(f"turn {turn_no}", "state: the store sent with the turn is not what "
                                               "the state operation answers right after it", _json(sent)))
        results.append(result)
        report.turns.append(TurnRecord(turn_no, user, result if isinstance(result, dict) else None, state))
    if report.crash is not None and (report.crash["kind"] in GONE or report.crash.get("collateral")):
        for op in ("state", "audit", "close"):
            report.operations.setdefault(op, f"not called: the runtime was gone after turn {report.crash['turn']}")
        return report
    if "state" not in report.operations:    # a turn failed before the store was ever read
        await _optional(runtime.state, session, report, "state", note, state_model)
    audit = await _optional(runtime.audit, session, report, "audit", note, Audit, wrap="turns")
    report.audit = audit
    if isinstance(audit, list):
        logged = {e.get("turn") for e in audit if isinstance(e, dict)}
        for t in report.turns:
            if t.result is not None and t.index not in logged:
                report.violations.append(Violation("audit", f"no turn event for turn {t.index}", _json(audit)))
    try:
        sent = await runtime.close(session)
        report.operations["close"] = "supplied"
    except RuntimeFault as fault:
        report.operations["close"] = f"failed: {fault}"
        return report
    if isinstance(sent, list) and audit is not None and sent != audit:
        # As for the stores sent with start and turn: the audit sent with the close answer must be
        # what `audit` answered right before it, since simrun reads it there instead.
        report.violations.append(Violation("close", "audit: the audit sent with the close answer is not what "
                                           "the audit operation answered right before it", _json(sent)))
    return report


async def _optional(method: Callable[[str], Awaitable[V | None]], session: str, report: Conformance, op: str,
                    note: Callable[[str, type, Any], None], model: type | None, wrap: str | None = None) -> V | None:
    try:
        value = await method(session)
    except RuntimeFault as fault:
        report.operations[op] = f"failed: {fault}"
        report.violations.append(Violation(op, f"{fault.kind}: {fault}", _excerpt(fault)))
        return None
    if value is None:
        report.operations[op] = _absent(op, report)
        return None
    report.operations[op] = _given(op, value, report)
    if model is not None:
        note(op, model, {wrap: value} if wrap else value)
    return value


def _absent(op: str, report: Conformance) -> str:
    """An operation the runtime does not answer, in the words of its transport: an HTTP runtime's
    404, a function's missing hook."""
    if not report.foreign:
        return "not supported (404)"
    if op == "state":
        return "not given: no traces and no state hook (runtime.state); the checks over the store are UNVERIFIABLE"
    if op == "audit":
        return f"not given: a {report.transport or 'foreign'} assistant keeps no audit log simrun can read"
    return "not given"


def _given(op: str, value: Any, report: Conformance) -> str:
    """A supplied operation; for an assistant with no protocol code, what simrun built its state from."""
    if not report.foreign or op != "state" or not isinstance(value, dict):
        return "supplied"
    parts = []
    if "events" in value or "events_unknown" in value:
        parts.append("its tool spans" + (" (events unknown: their spans were not read)"
                                         if "events" not in value else ""))
    if "records" in value:
        parts.append("the state hook (runtime.state)")
    else:
        parts.append("no state hook (records not given)")
    return "built by simrun from " + " and ".join(parts)
