"""Progress classes: the ways a conversation stops moving forward (CLASSES.md).

Each check is a pure function (transcript, goal, persona) -> CheckResult. A turn counts as
checked when its evidence was there, and as unverifiable when it was not; never as a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scoring import patterns
from scoring.evidence import MISSING, events_at, get, lookup, previous, shown_before
from scoring.transcript import CheckResult, Finding, Transcript
from scoring.dataset import Goal, Persona


@dataclass
class Tally:
    """Collects one check's verdicts turn by turn."""

    cls: str
    findings: list[Finding] = field(default_factory=list)
    checked: int = 0
    unverifiable: int = 0

    def ok(self) -> None:
        self.checked += 1

    def unknown(self) -> None:
        self.unverifiable += 1

    def found(self, turn: int | None, detail: str, **evidence: object) -> None:
        self.checked += 1
        self.findings.append(Finding(self.cls, turn, detail, evidence))

    def result(self) -> CheckResult:
        return CheckResult(self.cls, tuple(self.findings), self.checked, self.unverifiable)


def answered_turns(transcript: Transcript):
    return [t for t in transcript.turns if t.result is not None]


def dead_end(transcript: Transcript, goal: Goal, persona: Persona) -> CheckResult:
    tally = Tally("dead_end")
    for turn in answered_turns(transcript):
        result = turn.result
        if str(result.get("reply", "")).rstrip().endswith("?"):
            tally.ok()
            continue
        ways = [get(result, name) for name in ("ask", "next_steps", "card")]
        if any(w for w in ways if w is not MISSING):
            tally.ok()
        elif any(w is MISSING for w in ways):
            tally.unknown()
        else:
            tally.found(turn.index, "the reply offers no way forward", reply=result.get("reply"))
    return tally.result()


def _ask_key(ask: dict) -> tuple:
    return (ask.get("operation"), ask.get("record"), tuple(sorted(ask.get("arguments") or [])))


def loop(transcript: Transcript, goal: Goal, persona: Persona) -> CheckResult:
    tally = Tally("loop")
    for turn in answered_turns(transcript):
        before = previous(transcript, turn)
        if before is None or before.result is None:
            continue
        now, then = get(turn.result, "ask"), get(before.result, "ask")
        if now is MISSING or then is MISSING:
            tally.unknown()
        elif now and then and _ask_key(now) == _ask_key(then) and not now.get("repeat_reason"):
            tally.found(turn.index, "the same ask again, with no reason given", ask=now, previous_ask=then)
        else:
            tally.ok()
    return tally.result()


def taken_offer(transcript: Transcript, turn) -> tuple[str | None, bool]:
    """(offer id the user took up from the previous turn, whether that is known)."""
    offers = shown_before(transcript, turn)
    if turn.user.kind == "click":
        was_shown = offers.has(turn.user.offer)
        if was_shown is None:
            return None, False
        return (turn.user.offer if was_shown else None), True
    taken = get(turn.result, "taken_offer")
    if taken is MISSING:
        return None, False
    return (taken if taken and offers.has(taken) is not False else None), True


def refused_offer(transcript: Transcript, goal: Goal, persona: Persona) -> CheckResult:
    tally = Tally("refused_offer")
    for turn in answered_turns(transcript):
        offer, known = taken_offer(transcript, turn)
        if not known:
            tally.unknown()
            continue
        if offer is None:
            continue
        events = events_at(turn.state, turn.index)
        if events is None:
            tally.unknown()
            continue
        refused = [e for e in events if e.get("status") == "refused" and e.get("offer") in (None, offer)]
        if refused:
            tally.found(turn.index, f"offer {offer} was taken and the domain refused it",
                        offer=offer, events=refused)
        else:
            tally.ok()
    return tally.result()


def not_understood(transcript: Transcript, goal: Goal, persona: Persona) -> CheckResult:
    tally = Tally("not_understood")
    for turn in answered_turns(transcript):
        understood = get(turn.result, "understood")
        if understood is MISSING:
            tally.unknown()
        elif understood is False:
            tally.found(turn.index, "the runtime could not read the message", message=turn.user.text)
        else:
            tally.ok()
    return tally.result()


def resolve_question_record(goal: Goal, question, state: dict) -> dict | None:
    records = state.get("records") or {}
    if question.record is not None:
        return records.get(question.record)
    where = {k: goal.resolve(v) for k, v in question.where.items()}
    for record in records.values():
        if all(same_value(lookup(record, k), v) for k, v in where.items()):
            return record
    return None


def same_value(actual, expected) -> bool:
    """A store value equals an expected one: dates by ISO form, numbers and text by value."""
    if hasattr(expected, "isoformat"):
        expected = expected.isoformat()
    return actual == expected or (actual is not MISSING and str(actual) == str(expected))


def unanswered(transcript: Transcript, goal: Goal, persona: Persona) -> CheckResult:
    tally = Tally("unanswered")
    for turn in answered_turns(transcript):
        text = turn.user.text or ""
        asked = [q for q in goal.questions if patterns.search(q.match, text)]
        if not asked:
            continue
        answer = get(turn.result, "answer")
        if answer is MISSING:
            tally.unknown()
            continue
        if answer != "unavailable":
            tally.ok()
            continue
        if turn.state is None:
            tally.unknown()
            continue
        held = []
        for q in asked:
            record = resolve_question_record(goal, q, turn.state)
            value = lookup(record, q.field) if record else MISSING
            if value is not MISSING and value is not None:
                held.append({"question": q.id, "value": value})
        if held:
            tally.found(turn.index, "answered 'unavailable' while the store holds the answer", held=held)
        else:
            tally.ok()
    return tally.result()


PROGRESS_CHECKS = {
    "dead_end": dead_end,
    "loop": loop,
    "refused_offer": refused_offer,
    "not_understood": not_understood,
    "unanswered": unanswered,
}
