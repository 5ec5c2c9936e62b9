"""Goal SQL in a sandbox: a goal's `success.sql` queries, read as hostile code.

A goal file may come from an untrusted pull request, and DuckDB runs every statement of a string
it is given: file reads and writes, ATTACH, INSTALL, SET. So a success query is
- exactly one statement, and a SELECT, as DuckDB's own parser reads it (never a regex), with no
  parameters, and no longer than MAX_QUERY_CHARS;
- run in a process of its own (scoring/dataset/_sql_sandbox.py): an in-memory DuckDB with no file
  system or network (`enable_external_access` off), no extension installed or loaded, one
  thread, no spilling to disk, its configuration locked, and an address space the kernel caps,
  because DuckDB's own memory limit does not bound every allocation (a `repeat()` inside an
  expression asks for gigabytes past it);
- given only the `records` and `events` of one conversation, as inline tables;
- stopped after QUERY_TIMEOUT_S by ending that process. A query that ran past its time or its
  memory is run again on the next store it is asked about: its limit bounds what it costs each
  check, and a slow moment of the machine costs one conversation's goal (UNVERIFIABLE, with the
  reason), never the goal for the rest of the run nor its next load.

A failure is never a pass: the caller reports it as UNVERIFIABLE with the goal's name. Messages
name DuckDB's error class; DuckDB's own words are shown only when the query ran on empty tables
(validation), so that a message can never carry a value from a runtime's store.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import duckdb

from simrun import _secrets as secrets

if TYPE_CHECKING:       # the sandbox's module is the child process's; here only its answer's type
    from simrun.scoring.dataset._sql_sandbox import Answer

MAX_QUERY_CHARS = 10_000
QUERY_TIMEOUT_S = 2.0
STARTUP_TIMEOUT_S = 60.0
# The two tables a success query sees, as typed columns. They are built inline for each check
# (a CTE of VALUES), which costs a third of inserting into tables and needs no cleaning up.
RECORDS = (("id", "VARCHAR"), ("type", "VARCHAR"), ("data", "JSON"))
EVENTS = (("id", "VARCHAR"), ("turn", "INTEGER"), ("operation", "VARCHAR"), ("record", "VARCHAR"),
          ("status", "VARCHAR"), ("offer", "VARCHAR"), ("reason", "VARCHAR"), ("arguments", "JSON"))
Row = tuple[Any, ...]                        # a row of one of the two, in its columns' order
ANSWERS_KEPT = 4096                          # (query, store digest) -> answer, least recent out


class QueryRefused(ValueError):
    """The query is not one plain SELECT (found before it runs)."""


class QueryFailed(Exception):
    """The query ran and failed, or ran past its time limit: never a pass."""


def parse_select(query: str) -> str:
    """The query's one SELECT statement, ready to wrap; QueryRefused says why it is not one."""
    if not isinstance(query, str) or not query.strip():
        raise QueryRefused("a success query must be a SELECT statement, not empty")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryRefused(f"a success query may be at most {MAX_QUERY_CHARS:,} characters, this one has "
                           f"{len(query):,}")
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise QueryRefused(f"not valid SQL: {_first_line(exc)}") from None
    if len(statements) != 1:
        raise QueryRefused(f"a success query must be exactly one SELECT statement, found {len(statements)}")
    statement = statements[0]
    if statement.type != duckdb.StatementType.SELECT:
        raise QueryRefused(f"a success query must be a SELECT statement, not {statement.type.name}")
    if statement.named_parameters:
        raise QueryRefused("a success query takes no parameters ($1, ?)")
    # A line comment at the end would swallow the closing parenthesis of the wrapper.
    return statement.query.rstrip().rstrip(";").rstrip() + "\n"


def wrapped(select: str, records_sql: str, events_sql: str) -> str:
    """The query over the two inline tables. The whole text is parsed again: whatever the query's
    text does at its edges, what runs is one SELECT, or nothing."""
    sql = f"WITH records AS ({records_sql}), events AS ({events_sql}) SELECT * FROM (\n{select})"
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(f"not valid SQL once placed over the store's tables: {_first_line(exc)}") from None
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        raise QueryRefused("the query does not stay one SELECT once placed over the store's tables")
    return sql


def _table(columns: tuple[tuple[str, str], ...], rows: list[Row]) -> tuple[str, list[Any]]:
    names = ", ".join(name for name, _ in columns)
    if not rows:
        return "SELECT " + ", ".join(f"NULL::{kind} AS {name}" for name, kind in columns) + " WHERE false", []
    one = "(" + ", ".join(f"?::{kind}" for _, kind in columns) + ")"
    return f"SELECT * FROM (VALUES {', '.join([one] * len(rows))}) t({names})", [v for row in rows for v in row]


# --- the sandbox process -------------------------------------------------------------------------

_CHILD = [sys.executable, "-I", str(Path(__file__).with_name("_sql_sandbox.py"))]


class _Sandbox:
    """A sandbox process (requests on its pipe are answered in turn), started on first use and
    again after it was ended. Idle ones wait in `_idle` for the next query, from any thread."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None

    def ask(self, request: bytes, timeout_s: float) -> Answer:
        if self.process is None or self.process.poll() is not None:
            # Its own session: a Ctrl-C at the terminal is the run's to handle, not the sandbox's.
            # No environment: the process needs none, and a query could not read it anyway.
            self.process = subprocess.Popen(_CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, start_new_session=True,
                                            env={"PATH": os.defpath})
            _started.add(self.process)
            # Starting is not the query's time: a loaded machine may take seconds to load DuckDB.
            ready, _, _ = select.select([_pipe(self.process.stdout)], [], [], STARTUP_TIMEOUT_S)
            if not ready or not _pipe(self.process.stdout).readline().startswith(b'{"ready"'):
                self.end()
                raise QueryFailed(f"could not be run: the SQL sandbox process did not start within "
                                  f"{STARTUP_TIMEOUT_S:g} s")
        process = self.process
        stdin, stdout = _pipe(process.stdin), _pipe(process.stdout)
        try:
            stdin.write(request)
            stdin.flush()
            ready, _, _ = select.select([stdout], [], [], timeout_s)
            line = stdout.readline() if ready else None
        except (BrokenPipeError, OSError):
            line = b""
        if line is None:
            self.end()
            raise _Runaway(f"ran past its {timeout_s:g} s limit (stopped)")
        try:
            got: Answer = json.loads(line)      # the sandbox's own line (sql_sandbox.answer)
            return got
        except ValueError:
            # The process died mid-query: the kernel's memory cap, most likely, or a crash.
            self.end()
            raise _Runaway("ended its sandbox process (past its memory limit, most likely)") from None

    def end(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            _started.discard(self.process)
            self.process = None


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    """A pipe of the sandbox process: never None, since every one is opened with PIPE (which the
    type of `Popen`'s streams cannot say)."""
    return cast("IO[bytes]", stream)


class _Runaway(Exception):
    """The query cost the sandbox its process (its time or its memory): this check fails."""


_idle: list[_Sandbox] = []                  # as many as queries ever ran at once, no more
_idle_lock = threading.Lock()
_started: set[subprocess.Popen[bytes]] = set()
_answers: collections.OrderedDict[tuple[str, str], bool] = collections.OrderedDict()
_answers_lock = threading.Lock()


@atexit.register
def _end_all() -> None:
    for process in list(_started):
        process.kill()
        process.wait()              # reaped: no zombie, and its CPU time is counted as this process's


def run_select(select_sql: str, records: list[Row], events: list[Row], *,
               timeout_s: float = QUERY_TIMEOUT_S) -> tuple[int, int, bool]:
    """Run a parsed SELECT over the two tables, in an idle sandbox process of the pool, within its
    limits: the number of rows (counted up to 2), of columns, and whether the first value is
    true. SandboxError when DuckDB fails it; QueryFailed when it ran past a limit. A query that ran
    past a limit is run again on the next store it is asked about: its limit bounds what it costs
    each conversation, and a slow moment of the machine costs one conversation, never the goal."""
    rec_sql, rec_args = _table(RECORDS, records)
    ev_sql, ev_args = _table(EVENTS, events)
    request = json.dumps({"sql": wrapped(select_sql, rec_sql, ev_sql), "params": rec_args + ev_args},
                         default=str).encode() + b"\n"
    with _idle_lock:
        sandbox = _idle.pop() if _idle else _Sandbox()
    try:
        got = sandbox.ask(request, timeout_s)
    except _Runaway as exc:
        raise QueryFailed(str(exc)) from None
    finally:
        with _idle_lock:
            _idle.append(sandbox)
    if "error" in got:
        if got["error"] == "OutOfMemoryException":
            raise QueryFailed("ran past its memory limit (stopped)")
        raise SandboxError(str(got["error"]), str(got.get("message", "")))
    return int(got["rows"]), int(got["columns"]), bool(got["first"])


class SandboxError(Exception):
    """DuckDB refused or failed the query in the sandbox: its error class, and its first line
    (shown only where the tables were empty, so that it can carry no store value)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message


def check_goal_sql(query: str) -> str | None:
    """Why a success query cannot be used, or None if it can: it must be one SELECT, run on the
    store schema with empty tables within its limits, and give exactly one value."""
    try:
        rows, columns, _ = run_select(parse_select(query), [], [])
    except QueryRefused as exc:
        return str(exc)
    except QueryFailed as exc:
        return f"success query {exc}"
    except SandboxError as exc:
        # Empty tables: DuckDB's words cannot carry a store's value here, and they help the author.
        return f"success query does not run on the store schema (records, events): {exc.message or exc.kind}"
    if rows != 1 or columns != 1:
        return "a success query must return exactly one value (true when the goal is reached)"
    return None


def _rows(state: dict[str, Any]) -> tuple[list[Row], list[Row]]:
    """The store's two tables, as rows."""
    records = [(rid, _as_text(rec.get("type")), json.dumps(rec))
               for rid, rec in (state.get("records") or {}).items()]
    events = [(e.get("id"), e.get("turn"), e.get("operation"), e.get("record"), e.get("status"), e.get("offer"),
               e.get("reason"), json.dumps(e.get("arguments"))) for e in state.get("events") or []]
    return records, events


# `default=str`: a key is made of whatever a store holds, JSON's own or not (one built in Python).
_KEY_ENCODER = json.JSONEncoder(default=str)


def _key(query: str, state: dict[str, Any]) -> tuple[str, str]:
    """The query's key in the cache of answers. The loop checks the goal after every turn and the
    scorer checks the final store again, often the same store: a query costs about a millisecond
    of DuckDB planning and a round trip to the sandbox, a lookup here a hash. The digest is of the
    store as it came, which fixes the tables built from it (the same store, the same rows), so
    that a lookup builds no rows (half its time); and the cache's size does not grow with the
    store's."""
    whole = [state.get("records"), state.get("events"), "records" in state]
    return query, hashlib.sha256(_KEY_ENCODER.encode(whole).encode()).hexdigest()


def _kept_answer(key: tuple[str, str]) -> bool | None:
    with _answers_lock:
        if key in _answers:
            _answers.move_to_end(key)
            return _answers[key]
    return None


class NotAnswered(Exception):
    """The query's answer over this store is not known yet: asking would run it (`known_answer`)."""


def known_answer(query: str, state: dict[str, Any]) -> bool:
    """`sql_holds`'s answer when it is already known (the query ran over this very store), without
    running anything; NotAnswered otherwise. For a caller that must not block: the conversation
    loop, which checks a goal inline when it can and hops to a thread only to run a query."""
    answer = _kept_answer(_key(query, state))
    if answer is None:
        raise NotAnswered(query)
    return answer


# The key of a store built from spans (a runtime with no protocol code) that says why its events are
# unknown, where they would be: simulator/adapters/_foreign.py puts it there.
EVENTS_UNKNOWN = "events_unknown"


def sql_holds(query: str, state: dict[str, Any]) -> bool:
    """Whether the query returns true over this store. QueryFailed when it cannot say."""
    key = _key(query, state)
    answer = _kept_answer(key)
    if answer is not None:
        return answer
    records, events = _rows(state)
    try:
        select_sql = parse_select(query)
        if "records" not in state and "records" in duckdb.get_table_names(select_sql):
            raise QueryFailed("reads records, and the runtime gives no records as data (a state hook gives "
                              "them: runtime.state)")
        if "events" not in state and "events" in duckdb.get_table_names(select_sql):
            # Unknown events are not none: a store built from spans that could not be read (another
            # convention, none at all) says why, and the query's being false would say nothing.
            why = state.get(EVENTS_UNKNOWN)
            raise QueryFailed("reads events, and the runtime's events are unknown" + (
                f": {secrets.cut(str(why), 600)}" if why else " (no store gives them, and no tool spans were read)"))
        _, _, holds = run_select(select_sql, records, events)
    except QueryRefused as exc:
        raise QueryFailed(str(exc)) from None
    except SandboxError as exc:
        raise QueryFailed(f"failed with a DuckDB {exc.kind} on this store (`simrun validate` shows DuckDB's "
                          "message on an empty store)") from None
    with _answers_lock:
        _answers[key] = holds
        if len(_answers) > ANSWERS_KEPT:
            _answers.popitem(last=False)
    return holds


def forget_answers() -> None:
    """Empty the cache of query answers: a cold start, for a benchmark's second pass."""
    with _answers_lock:
        _answers.clear()


def _as_text(value: Any) -> str | None:
    """A record's type may be any JSON value (protocol 1 leaves records open); the column is
    text, so anything but a string or null goes in as its JSON."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _first_line(exc: BaseException) -> str:
    return secrets.cut((str(exc).splitlines() or [type(exc).__name__])[0], 300)
