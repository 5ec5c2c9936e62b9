"""Was the goal reached? Decided on the store's state, never on what the replies claim.

A goal's success is three kinds of check, all of which must hold:
- record matches: a record (by id, or any record) holds the expected fields;
- SQL: DuckDB queries over two tables built from the store, each returning true:
    records(id VARCHAR, type VARCHAR, data JSON)
    events(id VARCHAR, turn INTEGER, operation VARCHAR, record VARCHAR, status VARCHAR,
           offer VARCHAR, reason VARCHAR, arguments JSON)
- answered questions: the question was asked, not answered 'unavailable', and the reply
  carries the value the store held at that turn, in any form `scoring.answers` accepts.
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading

import duckdb

from scoring.evidence import MISSING, lookup
from scoring.answers import carries
from scoring.progress import asked_questions, resolve_question_record, same_value
from scoring.transcript import Transcript
from scoring.dataset import Goal

# The two tables a success query sees, as typed columns. They are built inline for each check
# (a CTE of VALUES), which costs a third of inserting into tables and needs no cleaning up.
RECORDS = (("id", "VARCHAR"), ("type", "VARCHAR"), ("data", "JSON"))
EVENTS = (("id", "VARCHAR"), ("turn", "INTEGER"), ("operation", "VARCHAR"), ("record", "VARCHAR"),
          ("status", "VARCHAR"), ("offer", "VARCHAR"), ("reason", "VARCHAR"), ("arguments", "JSON"))
_local = threading.local()
ANSWERS_KEPT = 4096                                   # (query, store digest) -> answer, least recent out
_answers: collections.OrderedDict[tuple[str, str], bool] = collections.OrderedDict()
_answers_lock = threading.Lock()


def _connection() -> duckdb.DuckDBPyConnection:
    con = getattr(_local, "con", None)
    if con is None:
        con = _local.con = duckdb.connect(":memory:")
    return con


def _table(columns: tuple, rows: list[tuple]) -> tuple[str, list]:
    names = ", ".join(name for name, _ in columns)
    if not rows:
        return "SELECT " + ", ".join(f"NULL::{kind} AS {name}" for name, kind in columns) + " WHERE false", []
    one = "(" + ", ".join(f"?::{kind}" for _, kind in columns) + ")"
    return f"SELECT * FROM (VALUES {', '.join([one] * len(rows))}) t({names})", [v for row in rows for v in row]


def _run_query(query: str, records: list[tuple], events: list[tuple]) -> list[tuple]:
    rec_sql, rec_args = _table(RECORDS, records)
    ev_sql, ev_args = _table(EVENTS, events)
    return _connection().execute(f"WITH records AS ({rec_sql}), events AS ({ev_sql}) SELECT * FROM ({query})",
                                 rec_args + ev_args).fetchall()


def check_goal_sql(query: str) -> str | None:
    """Why a success query cannot run against the store schema, or None if it can."""
    try:
        rows = _run_query(query, [], [])
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0]
        return f"success query does not run on the store schema (records, events): {first}"
    if len(rows) != 1 or len(rows[0]) != 1:
        return "a success query must return exactly one value (true when the goal is reached)"
    return None


def _sql_holds(query: str, state: dict) -> bool:
    records = [(rid, _as_text(rec.get("type")), json.dumps(rec)) for rid, rec in (state.get("records") or {}).items()]
    events = [(e.get("id"), e.get("turn"), e.get("operation"), e.get("record"), e.get("status"), e.get("offer"),
               e.get("reason"), json.dumps(e.get("arguments"))) for e in state.get("events") or []]
    # The loop checks the goal after every turn and the scorer checks the final store again,
    # often the same store: a query costs about a millisecond of DuckDB planning, a lookup here
    # a hash of the rows. The key is a digest, so the cache's size does not grow with the store's.
    key = (query, hashlib.sha256(json.dumps([records, events], default=str).encode()).hexdigest())
    with _answers_lock:
        if key in _answers:
            _answers.move_to_end(key)
            return _answers[key]
    rows = _run_query(query, records, events)
    holds = bool(rows and rows[0] and rows[0][0])
    with _answers_lock:
        _answers[key] = holds
        if len(_answers) > ANSWERS_KEPT:
            _answers.popitem(last=False)
    return holds


def forget_answers() -> None:
    """Empty the cache of query answers: a cold start, for a benchmark's second pass."""
    with _answers_lock:
        _answers.clear()


def _as_text(value):
    """A record's type may be any JSON value (protocol 1 leaves records open); the column is
    text, so anything but a string or null goes in as its JSON."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _record_holds(goal: Goal, check, records: dict) -> bool:
    expected = {path: goal.resolve(value) for path, value in check.match.items()}
    candidates = [records.get(check.id)] if check.id else list(records.values())
    return any(rec is not None and all(same_value(lookup(rec, p), v) for p, v in expected.items())
               for rec in candidates)


def _answered(goal: Goal, qid: str, transcript: Transcript) -> str | None:
    """None if the question was answered with the store's value, else why not.

    Asked: a turn tagged with the question's step, or whose words match it. Answered: the
    reply carries the value the store held after that turn, in any form scoring.answers
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
    return why


def goal_status(goal: Goal, transcript: Transcript, state: dict | None) -> tuple[bool | None, str]:
    """(reached, why). reached is None when the store gives no state to check."""
    if state is None or not isinstance(state.get("records"), dict):
        return None, "UNVERIFIABLE: the runtime exposes no store state"
    records = state["records"]
    for i, check in enumerate(goal.success.records):
        if not _record_holds(goal, check, records):
            expected = ", ".join(f"{k} = {goal.resolve(v)}" for k, v in check.match.items())
            where = f"record {check.id}" if check.id else "a record"
            return False, f"success.records[{i}] does not hold: expected {where} with {expected}"
    for qid in goal.success.answered:
        why = _answered(goal, qid, transcript)
        if why is not None:
            return False, f"question {qid!r} was not answered from the store: {why}"
    for i, query in enumerate(goal.success.sql):
        try:
            if not _sql_holds(query, state):
                return False, f"success.sql[{i}] is false"
        except duckdb.Error as exc:
            return None, f"UNVERIFIABLE: success.sql[{i}] failed: {str(exc).splitlines()[0]}"
    return True, "every success check holds"
