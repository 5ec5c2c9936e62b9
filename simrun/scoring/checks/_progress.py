"""Progress classes: the ways a conversation stops moving forward (CLASSES.md).

Each check is a pure function (transcript, goal, persona) -> CheckResult. A turn counts as
checked when its evidence was there, and as unverifiable when it was not; never as a pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from simrun._transcript import CheckResult, Finding, Transcript, UserTurn
from simrun.scoring.checks._answers import carries
from simrun.scoring.checks._evidence import MISSING, Answered, events_from, get, lookup, previous, runtime_gone
from simrun.scoring.checks._offers import Take, Takes, follow, tagged_step
from simrun.scoring.dataset import Goal, Persona, Question, patterns

# What a check is: a pure function of the conversation, its goal and its persona.
Check = Callable[[Transcript, Goal, Persona], CheckResult]

# Why a turn could not be checked, in the words `simrun show` and the report print.
NO_OFFERS = "the runtime gives no offers as data"
NO_EVENTS = "the runtime gives no events (no store, no tool spans)"


@dataclass
class Tally:
    """Collects one check's verdicts turn by turn, and why a turn could not be checked."""

    cls: str
    findings: list[Finding] = field(default_factory=list)
    checked: int = 0
    unverifiable: int = 0
    # reason -> turns, in the order first met: a plain dict, since a Counter costs more to make
    # than most checks cost to run, and thirteen are made for every conversation.
    reasons: dict[str, int] = field(default_factory=dict)

    def ok(self) -> None:
        self.checked += 1

    def unknown(self, reason: str) -> None:
        self.unverifiable += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def found(self, turn: int | None, detail: str, **evidence: object) -> None:
        self.checked += 1
        self.findings.append(Finding(self.cls, turn, detail, evidence))

    def events_of_take(self, transcript: Transcript, take: Take, keep: Callable[[dict[str, Any], Take], bool],
                       what: str, **evidence: object) -> None:
        """Judge an offer take by the events from its turn on: found at the first event `keep`
        picks (asked of each event with the take), with `what`, and the turn when it is later;
        clean when the events are complete and none is picked, unknown when they are not.
        Evidence: the offer, `evidence`, the events."""
        events, complete = events_from(transcript, take.turn)
        picked = [e for e in events if keep(e, take)]
        if not picked and not complete:
            self.unknown(NO_EVENTS)
        elif picked:
            at = picked[0].get("turn")
            self.found(at, what + ("" if at == take.turn else f" in turn {at}"), offer=take.offer, **evidence,
                       events=picked)
        else:
            self.ok()

    def result(self) -> CheckResult:
        # The two commonest reasons, commonest first (ties in the order first met: the sort is
        # stable, reversed too, as Counter.most_common is).
        reason = None
        if self.reasons:
            reason = "; ".join(sorted(self.reasons, key=self.reasons.__getitem__, reverse=True)[:2]) or None
        return CheckResult(self.cls, tuple(self.findings), self.checked, self.unverifiable, reason)


def answered_turns(transcript: Transcript) -> list[Answered]:
    # The cast says what the filter made sure of (a result), for the type checker only: the
    # turns themselves are handed on, not copied into another type.
    return cast("list[Answered]", [t for t in transcript.turns if t.result is not None])


def way_forward(result: dict[str, Any]) -> bool | None:
    """Whether a reply gives the user a way forward (a question, an ask, offers or a card); None
    when the reply lacks a field that would say."""
    if str(result.get("reply", "")).rstrip().endswith("?"):
        return True
    ways = [get(result, name) for name in ("ask", "next_steps", "card")]
    if any(w for w in ways if w is not MISSING):
        return True
    return None if any(w is MISSING for w in ways) else False


def dead_end(transcript: Transcript, goal: Goal, persona: Persona) -> CheckResult:
    tally = Tally("dead_end")
    for turn in answered_turns(transcript):
        forward = way_forward(turn.result)
        if forward:
            tally.ok()
        elif forward is None:
            tally.unknown("the reply is no question, and the runtime gives no asks, offers or cards as data")
        else:
            tally.found(turn.index, "the reply offers no way forward", reply=turn.result.get("reply"))
    return tally.result()


def ask_key(ask: dict[str, Any]) -> tuple[Any, Any, tuple[Any, ...]]:
    """What an ask asks for: its operation, record and arguments, whatever its words."""
    return (ask.get("operation"), ask.get("record"), tuple(sorted(ask.get("arguments") or [])))


def loop(transcript: Transcript, goal: Goal, persona: Persona) -> CheckResult:
    tally = Tally("loop")
    for turn in answered_turns(transcript):
        before = previous(transcript, turn)
        if before is None or before.result is None:
            continue
        now, then = get(turn.result, "ask"), get(before.result, "ask")
        if now is MISSING or then is MISSING:
            tally.unknown("the runtime gives no asks as data")
        elif now and then and ask_key(now) == ask_key(then) and not now.get("repeat_reason"):
            tally.found(turn.index, "the same ask again, with no reason given", ask=now, previous_ask=then)
        else:
            tally.ok()
    return tally.result()


def refused_offer(transcript: Transcript, goal: Goal, persona: Persona, takes: Takes | None = None) -> CheckResult:
    """An offer the user took up from the previous turn (click or words) whose command the store
    shows refused, in that turn or any later one (docs/reference/classes.md)."""
    tally = Tally("refused_offer")
    takes = takes if takes is not None else follow(transcript)     # the scorer's, worked out once
    for turn in answered_turns(transcript):
        take = takes.by_turn.get(turn.index)
        if turn.index in takes.unknown:
            tally.unknown("the runtime does not say which offer a message took up (taken_offer)")
            continue
        if take is not None and take.fresh is None:
            tally.unknown(NO_OFFERS)
            continue
        if take is None or not take.fresh:
            continue   # a stale click the runtime refuses is the stale_click guarantee working
        tally.events_of_take(transcript, take,
                             lambda e, t: e.get("status") == "refused" and takes.attributed(e) == t,
                             f"offer {take.offer}, taken in turn {take.turn}, was refused by the domain",
                             taken_at=take.turn)
    return tally.result()


def not_understood(transcript: Transcript, goal: Goal, persona: Persona) -> CheckResult:
    tally = Tally("not_understood")
    for turn in answered_turns(transcript):
        understood = get(turn.result, "understood")
        if understood is MISSING:
            tally.unknown("the runtime does not say whether it understood a message (understood)")
        elif understood is False:
            tally.found(turn.index, "the runtime could not read the message", message=turn.user.text)
        else:
            tally.ok()
    return tally.result()


def asked_questions(goal: Goal, user: UserTurn) -> list[Question]:
    """The goal's questions a user turn asks: the one its step tag names, and any whose `match`
    is found in its words."""
    step = tagged_step(goal, user)
    text = user.text or ""
    return [q for q in goal.questions
            if (step is not None and step.question == q.id) or patterns.search(q.match, text)]


def resolve_question_record(goal: Goal, question: Question, state: dict[str, Any]) -> dict[str, Any] | None:
    records: dict[str, dict[str, Any]] = state.get("records") or {}
    if question.record is not None:
        return records.get(question.record)
    # A question names its record by id or by `where`, exactly one of them: `where` is set here.
    where = {k: goal.resolve(v) for k, v in (question.where or {}).items()}
    for record in records.values():
        if all(same_value(lookup(record, k), v) for k, v in where.items()):
            return record
    return None


def same_value(actual: Any, expected: Any) -> bool:
    """A store value equals an expected one: dates by ISO form, numbers and text by value."""
    if hasattr(expected, "isoformat"):
        expected = expected.isoformat()
    return actual == expected or (actual is not MISSING and str(actual) == str(expected))


def unanswered(transcript: Transcript, goal: Goal, persona: Persona) -> CheckResult:
    """A question of the goal answered 'unavailable' while the store holds its answer and the
    reply does not carry it in any form (simrun.scoring.checks._answers)."""
    tally = Tally("unanswered")
    for turn in answered_turns(transcript):
        asked = asked_questions(goal, turn.user)
        if not asked:
            continue
        answer = get(turn.result, "answer")
        if answer not in (MISSING, "unavailable"):
            tally.ok()
            continue
        if turn.state is None:
            gone = runtime_gone(transcript)
            tally.unknown(f"no store was read: {gone}" if gone else
                          "the runtime exposes no store to look the answer up in")
            continue
        reply = str(turn.result.get("reply", ""))
        held = []
        for q in asked:
            record = resolve_question_record(goal, q, turn.state)
            value = lookup(record, q.field) if record else MISSING
            if value is not MISSING and value is not None and not carries(reply, value, goal.date_order):
                held.append({"question": q.id, "value": value})
        if not held:
            tally.ok()        # nothing to answer from the store, or the reply says it in words
        elif answer is MISSING:
            tally.unknown("the runtime does not say whether it answered (answer), and the reply does not "
                          "carry the value")
        else:
            tally.found(turn.index, "answered 'unavailable' while the store holds the answer", held=held)
    return tally.result()


PROGRESS_CHECKS: dict[str, Check] = {
    "dead_end": dead_end,
    "loop": loop,
    "refused_offer": refused_offer,
    "not_understood": not_understood,
    "unanswered": unanswered,
}
