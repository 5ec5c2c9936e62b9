"""Goal SQL in a sandbox: a goal's `success.sql` queries, read as hostile code.

A goal file may come from an untrusted pull request, and DuckDB runs every statement of a string
it is given: file reads and writes, ATTACH, INSTALL, SET. So a success query is
- exactly one statement, and a SELECT, as DuckDB's own parser reads it (never a regex), with no
  parameters, and no longer than MAX_QUERY_CHARS;
- run on an in-memory connection with no file system or network (`enable_external_access` off),
  no extension installed or loaded, one thread, a memory cap and no spilling to disk, and its
  configuration locked before any query runs;
- given only the `records` and `events` of one conversation, as inline tables;
- stopped after QUERY_TIMEOUT_S through DuckDB's `interrupt()`. A query that ran past its limit
  once is not run again in this process: every later check fails at once, so one hostile goal
  costs one stall, not one per turn.

A failure is never a pass: the caller reports it as UNVERIFIABLE with the goal's name. Messages
name DuckDB's error class; DuckDB's own words are shown only when the query ran on empty tables
(validation), so that a message can never carry a value from a runtime's store.
"""

from __future__ import annotations

import collections
import hashlib
import heapq
import itertools
import json
import threading
import time

import duckdb

MAX_QUERY_CHARS = 10_000
QUERY_TIMEOUT_S = 2.0
SANDBOX = {
    "enable_external_access": False,        # no files, no network, no ATTACH, no COPY
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "threads": 1,
    "memory_limit": "256MB",
    "temp_directory": "",                   # an in-memory database with nowhere to spill
    "lock_configuration": True,             # last: nothing the query says can undo the above
}
# The two tables a success query sees, as typed columns. They are built inline for each check
# (a CTE of VALUES), which costs a third of inserting into tables and needs no cleaning up.
RECORDS = (("id", "VARCHAR"), ("type", "VARCHAR"), ("data", "JSON"))
EVENTS = (("id", "VARCHAR"), ("turn", "INTEGER"), ("operation", "VARCHAR"), ("record", "VARCHAR"),
          ("status", "VARCHAR"), ("offer", "VARCHAR"), ("reason", "VARCHAR"), ("arguments", "JSON"))
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


def _table(columns: tuple, rows: list[tuple]) -> tuple[str, list]:
    names = ", ".join(name for name, _ in columns)
    if not rows:
        return "SELECT " + ", ".join(f"NULL::{kind} AS {name}" for name, kind in columns) + " WHERE false", []
    one = "(" + ", ".join(f"?::{kind}" for _, kind in columns) + ")"
    return f"SELECT * FROM (VALUES {', '.join([one] * len(rows))}) t({names})", [v for row in rows for v in row]


# --- the sandboxed connection and its watchdog ---------------------------------------------------

_local = threading.local()


def _connection() -> duckdb.DuckDBPyConnection:
    """This thread's sandbox (a DuckDB connection must not be shared between threads)."""
    con = getattr(_local, "con", None)
    if con is None:
        con = _local.con = duckdb.connect(":memory:", config=SANDBOX)
    return con


class _Watchdog:
    """One daemon thread that interrupts queries past their deadline: no thread per query."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, duckdb.DuckDBPyConnection]] = []
        self._live: set[int] = set()
        self._ids = itertools.count()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self, con: duckdb.DuckDBPyConnection, seconds: float) -> int:
        with self._cv:
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="simrun-sql-watchdog", daemon=True)
                self._thread.start()
            ticket = next(self._ids)
            heapq.heappush(self._due, (time.monotonic() + seconds, ticket, con))
            self._live.add(ticket)
            self._cv.notify()
            return ticket

    def done(self, ticket: int) -> None:
        with self._cv:
            self._live.discard(ticket)

    def _watch(self) -> None:
        with self._cv:
            while True:
                while self._due and self._due[0][1] not in self._live:
                    heapq.heappop(self._due)
                if not self._due:
                    self._cv.wait()
                    continue
                deadline, ticket, con = self._due[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                heapq.heappop(self._due)
                self._live.discard(ticket)
                con.interrupt()


_watchdog = _Watchdog()
_runaway: set[str] = set()                   # queries that ran past their limit in this process
_answers: collections.OrderedDict[tuple[str, str], bool] = collections.OrderedDict()
_answers_lock = threading.Lock()


def run_select(select: str, records: list[tuple], events: list[tuple], *,
               timeout_s: float = QUERY_TIMEOUT_S) -> list[tuple]:
    """Run a parsed SELECT over the two tables, in the sandbox, within its time limit."""
    if select in _runaway:
        raise QueryFailed(f"ran past its {timeout_s:g} s limit earlier in this run; not run again")
    rec_sql, rec_args = _table(RECORDS, records)
    ev_sql, ev_args = _table(EVENTS, events)
    con = _connection()
    ticket = _watchdog.start(con, timeout_s)
    try:
        return con.execute(wrapped(select, rec_sql, ev_sql), rec_args + ev_args).fetchall()
    except duckdb.InterruptException:
        _runaway.add(select)
        raise QueryFailed(f"ran past its {timeout_s:g} s limit (stopped)") from None
    finally:
        _watchdog.done(ticket)


def check_goal_sql(query: str) -> str | None:
    """Why a success query cannot be used, or None if it can: it must be one SELECT, run on the
    store schema with empty tables within its time limit, and give exactly one value."""
    try:
        rows = run_select(parse_select(query), [], [])
    except QueryRefused as exc:
        return str(exc)
    except QueryFailed as exc:
        return f"success query {exc}"
    except duckdb.Error as exc:
        # Empty tables: DuckDB's words cannot carry a store's value here, and they help the author.
        return f"success query does not run on the store schema (records, events): {_first_line(exc)}"
    if len(rows) != 1 or len(rows[0]) != 1:
        return "a success query must return exactly one value (true when the goal is reached)"
    return None


def sql_holds(query: str, state: dict) -> bool:
    """Whether the query returns true over this store. QueryFailed when it cannot say."""
    records = [(rid, _as_text(rec.get("type")), json.dumps(rec))
               for rid, rec in (state.get("records") or {}).items()]
    events = [(e.get("id"), e.get("turn"), e.get("operation"), e.get("record"), e.get("status"), e.get("offer"),
               e.get("reason"), json.dumps(e.get("arguments"))) for e in state.get("events") or []]
    # The loop checks the goal after every turn and the scorer checks the final store again,
    # often the same store: a query costs about a millisecond of DuckDB planning, a lookup here
    # a hash of the rows. The key is a digest, so the cache's size does not grow with the store's.
    key = (query, hashlib.sha256(json.dumps([records, events, "records" in state], default=str).encode()).hexdigest())
    with _answers_lock:
        if key in _answers:
            _answers.move_to_end(key)
            return _answers[key]
    try:
        select = parse_select(query)
        if "records" not in state and "records" in duckdb.get_table_names(select):
            raise QueryFailed("reads records, and the runtime gives no records as data (a state hook gives "
                              "them: runtime.state)")
        rows = run_select(select, records, events)
    except QueryRefused as exc:
        raise QueryFailed(str(exc)) from None
    except duckdb.Error as exc:
        raise QueryFailed(f"failed with a DuckDB {type(exc).__name__} on this store (`simrun validate` "
                          "shows DuckDB's message on an empty store)") from None
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


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]
