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
from dataclasses import dataclass, field
from typing import Any

from simrun.scoring import (
    SNAPSHOT,
    TURN_FIELDS,
    Audit,
    RuntimeFault,
    Started,
    State,
    TurnRecord,
    TurnResult,
    UserTurn,
    secrets,
    violations,
)
from simrun.scoring.checks import shown
from simrun.scoring.dataset import Goal, Persona, canonical_json
from simrun.simulator._ladder import NEEDS, Rung, level_of, rungs
from simrun.simulator.adapters import RuntimeAdapter, check_health

__all__ = ["NEEDS", "Conformance", "check_runtime"]

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
    audit: list[dict] | None = None
    crash: dict[str, Any] | None = None     # the evidence of a turn the runtime failed
    traces: dict[str, int] | None = None    # what the trace receiver saw, for a runtime read through its traces

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

    def unverifiable(self) -> dict[str, list[str]]:
        gone = self.missing()
        return {cls: [n for n in needs if n in gone] for cls, needs in NEEDS.items()
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


def _probe_turns(goal: Goal | None):
    """The user turns of the probe, each chosen from what the runtime showed so far."""
    step = next((s for s in goal.steps if s.say), None) if goal is not None else None
    values = {**goal.facts, **{k: goal.resolve(v) for k, v in step.arguments.items()}} \
        if goal is not None and step is not None else {}
    first = step.say[0].format(**values) if step else "Hello"
    question = goal.questions[0].ask.format(**goal.facts) if goal and goal.questions else "What can you do for me?"

    def click_current(results):
        offers = _offers(results[-1])
        return UserTurn("click", offer=offers[0]) if offers else UserTurn("message", "yes")

    def click_expired(results):
        current = set(_offers(results[-1]))
        old = [o for r in results[:-1] for o in _offers(r) if o not in current]
        return UserTurn("click", offer=old[0]) if old else None

    return [lambda results: UserTurn("message", first), click_current, click_expired,
            lambda results: UserTurn("message", question)]


async def check_runtime(runtime: RuntimeAdapter, goal: Goal | None = None) -> Conformance:
    runtime.strict = False
    report = Conformance(runtime.description)
    try:
        return await _converse(runtime, goal, report)
    finally:
        if runtime.book is not None:
            report.traces = dataclasses.asdict(runtime.book.counts)
        await runtime.aclose()


async def _converse(runtime: RuntimeAdapter, goal: Goal | None, report: Conformance) -> Conformance:
    def note(where: str, model, value: Any) -> None:
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
    results: list[Any] = []
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


async def _optional(method, session, report, op, note, model, wrap: str | None = None):
    try:
        value = await method(session)
    except RuntimeFault as fault:
        report.operations[op] = f"failed: {fault}"
        report.violations.append(Violation(op, f"{fault.kind}: {fault}", _excerpt(fault)))
        return None
    if value is None:
        report.operations[op] = "not supported (404)"
        return None
    report.operations[op] = "supplied"
    if model is not None:
        note(op, model, {wrap: value} if wrap else value)
    return value
