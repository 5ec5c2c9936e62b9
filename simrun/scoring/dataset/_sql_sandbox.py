"""The process a goal's success query runs in: DuckDB locked down, and the kernel's limits on top.

DuckDB's own `memory_limit` bounds its buffer pool, not every allocation: a string built by
`repeat()` inside an expression is outside it, and one ten-thousand-character query can ask for
gigabytes. So the query runs in a process of its own, started by scoring/dataset/_goal_sql.py,
whose address space the kernel caps (`RLIMIT_AS`) at what DuckDB holds once loaded plus
`MEMORY_HEADROOM_BYTES`. Past it an allocation fails: DuckDB says "Out of Memory", or the process
dies; either way the query fails, and the parent process (the run) goes on.

This module imports nothing of simrun's, so that the process starts in a fraction of a second
and holds nothing but DuckDB. It speaks one JSON line each way per query:

    <- {"ready": true}                                         (once, when it has started)
    -> {"sql": "...", "params": [...]}
    <- {"rows": n, "columns": m, "first": true|false}      (n and m counted up to 2)
    <- {"error": "OutOfMemoryException", "message": "first line of DuckDB's words"}

It ignores SIGINT (a Ctrl-C is the run's to handle: the conversations in flight still get their
checks), and it exits when its input closes, so it never outlives the process that started it.
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from typing import TypedDict

import duckdb

SANDBOX: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,        # no files, no network, no ATTACH, no COPY
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "threads": 1,
    "memory_limit": "256MB",
    "temp_directory": "",                   # an in-memory database with nowhere to spill
    "lock_configuration": True,             # last: nothing the query says can undo the above
}
MEMORY_HEADROOM_BYTES = 512 * 2**20


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory connection with the sandbox's settings, locked."""
    return duckdb.connect(":memory:", config=SANDBOX)


class Answer(TypedDict, total=False):
    """One answer on the pipe: the query's shape and first value, or its error."""

    rows: int           # counted up to 2
    columns: int
    first: bool
    error: str          # DuckDB's error class
    message: str        # the first line of DuckDB's words


def answer(con: duckdb.DuckDBPyConnection, line: bytes) -> Answer:
    """One request's answer. Only the shape and the first value leave this process: a query's
    other values (what a hostile one might have read) are never sent."""
    try:
        request = json.loads(line)
        cursor = con.execute(request["sql"], request["params"])
        rows = cursor.fetchmany(2)          # "exactly one row" needs no more, however many there are
        return {"rows": len(rows), "columns": len(rows[0]) if rows else len(cursor.description or ()),
                "first": bool(rows and rows[0] and rows[0][0])}
    except Exception as exc:                # noqa: BLE001 - every failure is an answer, never a crash
        return {"error": type(exc).__name__, "message": (str(exc).splitlines() or [""])[0][:300]}


def _cap_memory() -> None:
    with open("/proc/self/statm") as statm:          # Linux; elsewhere DuckDB's own limit alone
        loaded = int(statm.read().split()[0]) * resource.getpagesize()
    cap = loaded + MEMORY_HEADROOM_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))      # no file grows, whatever DuckDB is told
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    con = connect()
    con.execute("SELECT 1").fetchall()               # loaded before the cap is measured
    try:
        _cap_memory()
    except (OSError, ValueError):
        pass
    out = sys.stdout.buffer
    out.write(b'{"ready": true}\n')                 # the query's time starts after this
    out.flush()
    for line in sys.stdin.buffer:
        out.write(json.dumps(answer(con, line)).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
