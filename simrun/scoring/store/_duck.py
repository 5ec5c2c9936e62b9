"""Small DuckDB helpers for the store: transactions, and bulk inserts with secrets cut out of
every string."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

import duckdb

from simrun import _secrets as secrets
from simrun._errors import StoreError
from simrun._storable import json_text_problem

# A row as DuckDB gives it, each value of its column's type: what the query names, which
# DuckDB's own types leave as Any. In the columns' order, or by their names.
Row = tuple[Any, ...]
NamedRow = dict[str, Any]

_names = itertools.count()
# What the operating system said, which DuckDB quotes after the file's name: fixed words, so
# they are shown whatever else the message is cut from.
_OS_REASONS = tuple(os.strerror(code) for code in (errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EDQUOT,
                                                    errno.EIO, errno.ENOENT, errno.EPERM, errno.EISDIR))


def reason(exc: duckdb.Error) -> str:
    """DuckDB's reason for an error, in one line, cut before the first thing it quotes: DuckDB
    quotes the values it could not read or convert, a value may come from a file made by someone
    else (or from what a crafted view read), and a value may itself hold quotes, so nothing after
    the first quote is kept but the operating system's own words."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    head = re.split("['\"`]", first, maxsplit=1)[0].rstrip(" :")
    said = [words for words in _OS_REASONS if words in first[len(head):]]
    return (head + (" …" if len(head) < len(first) else "") + "".join(f": {w}" for w in said))[:300]


def one_row(result: duckdb.DuckDBPyConnection) -> Row:
    """The row of an aggregate query without GROUP BY (a count, a sum, a min and max), which SQL
    gives whatever the table holds."""
    row = result.fetchone()
    if row is None:     # never, for such a query: said as the store's error rather than a TypeError
        raise StoreError("an aggregate query gave no row: the database was changed, or not written by simrun")
    return row


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[Sequence[Any]], *,
                leading: tuple[Any, ...] = ()) -> None:
    """Insert many rows at once: through a DataFrame, which DuckDB reads in bulk, since binding
    parameters row by row (or in one huge statement) costs more than the conversation did.
    `leading`: values that come first in every row (a batch's run id), bound once."""
    if not rows:
        return
    # Every string bound for the database passes here: a secret a runtime echoed is cut out. The
    # batch is searched once, all its strings together; only one that holds a secret is redacted
    # string by string.
    if secrets.active() and secrets.found_in(
            [v for v in leading if isinstance(v, str)] + [v for row in rows for v in row if isinstance(v, str)]):
        leading = tuple(secrets.redact(v) if isinstance(v, str) else v for v in leading)
        rows = [[secrets.redact(v) if isinstance(v, str) else v for v in row] for row in rows]
    # Imported here: pandas takes almost half a second to import, which a command that writes
    # nothing (`simrun --help`, `runs`, `show`, `gate`) need not pay.
    import pandas as pd

    name = f"_rows_{next(_names)}"
    frame = pd.DataFrame(rows, columns=[f"c{i}" for i in range(len(rows[0]))], dtype=object)
    con.register(name, frame)
    try:
        con.execute(f"INSERT INTO {table} SELECT {'?, ' * len(leading)}* FROM {name}", list(leading))
    finally:
        con.unregister(name)


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """All of it or nothing. When COMMIT itself fails (a full disk), DuckDB has already ended the
    transaction, and ROLLBACK would fail too, with a message ("no transaction is active") that
    would hide the one that matters: so the first error is the one raised."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


def first_unstorable(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...],
                     run_id: str | None = None) -> tuple[str, str, str] | None:
    """(table, column, problem) of the first JSON value in `tables` (of run `run_id`, or all) that
    breaks the rule the store's own values are written by (`json_text_problem`: NaN, 1e999, a bare
    nan, no JSON at all), else None. A store from elsewhere (a shard, a history file) may hold one:
    DuckDB keeps them in a JSON column without a word. Read in batches: a crafted file's size is
    bounded, not its rows."""
    for table in tables:
        columns = [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall() if row[1] == "JSON"]
        if not columns:
            continue
        where = " WHERE run_id = ?" if run_id is not None else ""
        cursor = con.execute(f"SELECT {', '.join(columns)} FROM {table}{where}", [run_id] if run_id else [])
        while rows := cursor.fetchmany(1024):
            for row in rows:
                for column, text in zip(columns, row):
                    problem = json_text_problem(text) if text is not None else None
                    if problem:
                        return table, column, problem
    return None
