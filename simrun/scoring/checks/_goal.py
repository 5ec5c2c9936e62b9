"""Was the goal reached? Decided on the store's state, never on what the replies claim.

A goal's success is three kinds of check, all of which must hold:
- record matches: a record (by id, or any record) holds the expected fields;
- SQL: DuckDB queries over two tables built from the store, each returning true (a runtime
  that gives events but no records, one read through its traces, decides a query over `events`
  alone; one that reads `records` is UNVERIFIABLE there):
    records(id VARCHAR, type VARCHAR, data JSON)
    events(id VARCHAR, turn INTEGER, operation VARCHAR, record VARCHAR, status VARCHAR,
           offer VARCHAR, reason VARCHAR, arguments JSON)
  run in a sandbox (scoring/dataset/_goal_sql.py): a goal file may be hostile; a query that is
  false while events of an operation it names carry neither arguments nor record (tool spans
  without their opt-in arguments) is UNVERIFIABLE, not false;
- answered questions: the question was asked, not answered 'unavailable', and the reply
  carries the value the store held at that turn, in any form `simrun.scoring.checks._answers` accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simrun._secrets import cut
from simrun._transcript import Transcript
from simrun.scoring.checks._answers import carries
from simrun.scoring.checks._evidence import MISSING, lookup, runtime_gone
from simrun.scoring.checks._progress import asked_questions, resolve_question_record, same_value
from simrun.scoring.dataset import Goal, NotAnswered, QueryFailed, RecordCheck, per_goal, sql_holds


def _expected(goal: Goal, i: int) -> dict[str, Any]:
    """Record check `i`'s fields and values, filled in from the goal's facts: the same on every
    turn of every conversation of the goal, so worked out once per goal (`per_goal`), and shared."""
    return per_goal(goal, f"success.records[{i}]",
                    lambda g: {path: g.resolve(value) for path, value in g.success.records[i].match.items()})


def _record_holds(check: RecordCheck, expected: dict[str, Any], records: dict[str, Any]) -> bool:
    candidates = [records.get(check.id)] if check.id else list(records.values())
    return any(rec is not None and all(same_value(lookup(rec, p), v) for p, v in expected.items())
               for rec in candidates)


def _answered(goal: Goal, qid: str, transcript: Transcript) -> str | None:
    """None if the question was answered with the store's value, else why not.

    Asked: a turn tagged with the question's step, or whose words match it. Answered: the
    reply carries the value the store held after that turn, in any form simrun.scoring.checks._answers
    accepts, and does not say the answer is unavailable."""
    question = next(q for q in goal.questions if q.id == qid)
    why = "it was never asked"
    for turn in transcript.turns:
        if turn.result is None or question not in asked_questions(goal, turn.user):
            continue
        if turn.result.get("answer") == "unavailable" or turn.state is None:
            why = "the reply said it was unavailable" if turn.state is not None else "no store to check"
            continue
        record = resolve_question_record(goal, question, turn.state)
        value = lookup(record, question.field) if record else MISSING
        if value is MISSING:
            why = (f"the store has no field {question.field!r} in that record" if record
                   else "the store has no record it names")
            continue
        if carries(str(turn.result.get("reply", "")), value, goal.date_order):
            return None
        why = f"no reply carried the store's value {value!r}"
    gone = runtime_gone(transcript) if why == "it was never asked" else None
    return f"{why}: {gone}" if gone else why     # not asked: the runtime was gone before it could be


def _blind(query: str, state: dict[str, Any]) -> list[str]:
    """The operations a query names whose committed events carry neither arguments nor record:
    what the query may read is unknown, so its being false says nothing (a runtime read through
    its traces, whose tool spans leave the opt-in arguments out)."""
    events = found if isinstance(found := state.get("events"), list) else []
    return sorted({e["operation"] for e in events if isinstance(e, dict) and e.get("status") == "committed"
                   and isinstance(e.get("operation"), str) and e.get("arguments") is None
                   and e.get("record") is None and e["operation"] in query})


def goal_status(goal: Goal, transcript: Transcript, state: dict[str, Any] | None,
                holds: Callable[[str, dict[str, Any]], bool] | None = None) -> tuple[bool | None, str]:
    """(reached, why). reached is None when the store gives no state to check. `holds` answers a
    success query (`sql_holds`, which may run it; the loop passes `known_answer`, which never does).

    The one door from a runtime's store to the goal: whatever value the store holds (a number of
    5,000 digits, a shape no test foresaw), a check that cannot read it makes the goal UNVERIFIABLE
    for this conversation, with the reason, and the run goes on; never a pass, never the run."""
    try:
        return _goal_status(goal, transcript, state, holds or sql_holds)
    except NotAnswered:
        raise           # `known_answer`'s word that the query must run: the loop runs it off the loop
    except Exception as exc:
        return None, (f"UNVERIFIABLE: goal {goal.id}: the goal check could not read this store "
                      f"({_in_its_words(exc)})")


def _in_its_words(exc: Exception) -> str:
    """Why a check could not read a store, in words about the store: Python's own message for a
    number too long to read ("use sys.set_int_max_str_digits() to increase the limit") names a fix
    that is the runtime's to make, not the user's."""
    if isinstance(exc, ValueError) and "int_max_str_digits" in str(exc):
        return "a number of more digits than any check reads (over 4,300): the runtime's store holds it"
    if isinstance(exc, RecursionError):
        return "a value nested deeper than any check reads: the runtime's store holds it"
    return f"{type(exc).__name__}: {cut(str(exc), 200)}"


def _goal_status(goal: Goal, transcript: Transcript, state: dict[str, Any] | None,
                 holds: Callable[[str, dict[str, Any]], bool]) -> tuple[bool | None, str]:
    if state is None or not (isinstance(state.get("records"), dict) or isinstance(state.get("events"), list)):
        return None, "UNVERIFIABLE: the runtime exposes no store state"
    records = state.get("records")
    if not isinstance(records, dict):
        if goal.success.records or goal.success.answered:
            # Tool events alone (a runtime read through its traces): what needs records cannot be decided.
            return None, ("UNVERIFIABLE: the goal checks records, and the runtime gives no records as data "
                          "(a state hook gives them: runtime.state)")
        records = {}    # no record checks to read it
    for i, check in enumerate(goal.success.records):
        expected = _expected(goal, i)
        if not _record_holds(check, expected, records):
            said = ", ".join(f"{k} = {v}" for k, v in expected.items())
            where = f"record {check.id}" if check.id else "a record"
            return False, f"success.records[{i}] does not hold: expected {where} with {said}"
    for qid in goal.success.answered:
        why = _answered(goal, qid, transcript)
        if why is not None:
            return False, f"question {qid!r} was not answered from the store: {why}"
    for i, query in enumerate(goal.success.sql):
        try:
            if not holds(query, state):
                blind = _blind(query, state)
                if blind:
                    return None, (f"UNVERIFIABLE: success.sql[{i}] is false, and the {', '.join(blind)} events it "
                                  "names carry neither arguments nor record (tool spans without "
                                  "gen_ai.tool.call.arguments: turn on the instrumentation's content capture)")
                return False, f"success.sql[{i}] is false"
        except QueryFailed as exc:
            # Never a pass: the goal is UNVERIFIABLE, and the detail names the goal and the query.
            return None, f"UNVERIFIABLE: goal {goal.id}: success.sql[{i}] {exc}"
    return True, "every success check holds"
