"""Opening a DuckDB file that may come from elsewhere: nothing in it runs before it is checked.

A store can be a CI artifact, a shard to merge or a baseline run, written by anyone. DuckDB
binds a view or a macro when a query names it, so a `schema_migrations` that is a view over
`read_text('/proc/self/environ')` would run inside simrun's first query. So every store is
opened the same way, here, before any query reads a table of it:

- external access is off and the configuration locked, so no query (simrun's or one the file
  smuggles in) can read a local file, a URL or an extension; the only files it may reach are
  the ones simrun names (the shards `simrun merge` attaches);
- the file's catalog, read from DuckDB's own metadata functions (which run nothing from the
  file), must be a part of the schema simrun's migrations create: known tables, known columns
  with their types and defaults, no generated column, no CHECK constraint, no view, macro,
  sequence, type, index or schema of its own.

A refusal names what kind of object is wrong, never a value from the file.
"""

from __future__ import annotations

import functools
from pathlib import Path

import duckdb

from simrun import _secrets as secrets
from simrun._errors import StoreError
from simrun.scoring.store._duck import Row
from simrun.scoring.store._migrations import MIGRATIONS

_COLUMNS = ("SELECT table_name, column_name, data_type, coalesce(column_default, ''), is_generated "
            "FROM duckdb_columns() WHERE database_name = current_database()")
_CONSTRAINTS = ("SELECT table_name, constraint_type, constraint_text FROM duckdb_constraints() "
                "WHERE database_name = current_database()")
# What simrun never creates, each kind by a query that lists its names in this file.
_NEVER = {
    "views": "SELECT view_name FROM duckdb_views() WHERE NOT internal AND database_name = current_database()",
    "macros": "SELECT function_name FROM duckdb_functions() WHERE NOT internal "
              "AND function_type IN ('macro', 'table_macro') AND database_name = current_database()",
    "sequences": "SELECT sequence_name FROM duckdb_sequences() WHERE database_name = current_database()",
    "types": "SELECT type_name FROM duckdb_types() WHERE NOT internal AND database_name = current_database()",
    "indexes": "SELECT index_name FROM duckdb_indexes() WHERE database_name = current_database()",
    "schemas": "SELECT schema_name FROM duckdb_schemas() WHERE NOT internal AND database_name = current_database()",
}


@functools.cache
def _known() -> tuple[frozenset[Row], frozenset[Row]]:
    """The columns and constraints of the newest schema, as DuckDB reports them: an older file
    holds a part of them, and nothing else."""
    con = duckdb.connect(":memory:")
    try:
        con.execute("CREATE TABLE schema_migrations "
                    "(version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)")
        for _, _, sql in MIGRATIONS:
            con.execute(sql)
        return frozenset(con.execute(_COLUMNS).fetchall()), frozenset(con.execute(_CONSTRAINTS).fetchall())
    finally:
        con.close()


def connect(path: str | Path, *, read_only: bool, attach: tuple[str | Path, ...] = ()) -> duckdb.DuckDBPyConnection:
    """A connection to the file with external access off and the configuration locked.
    `attach`: database files simrun itself will ATTACH (with their write-ahead logs)."""
    con = duckdb.connect(str(path), read_only=read_only)
    try:
        allowed = [str(Path(p).resolve()) + suffix for p in attach for suffix in ("", ".wal")]
        allowed += [str(p) + suffix for p in attach for suffix in ("", ".wal")]
        if allowed:
            con.execute("SET allowed_paths = ?", [allowed])
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def refuse_crafted(con: duckdb.DuckDBPyConnection) -> None:
    """Raise a StoreError when the file holds anything simrun's migrations do not create."""
    wrong: list[str] = []
    names = sorted({name for kind in ("views", "macros") for (name,) in con.execute(_NEVER[kind]).fetchall()})
    if names:
        # Names only, written by whoever made the file: never a value a view could compute.
        named = secrets.cut(", ".join(names), 200)
        raise StoreError(f"the database holds views or macros simrun never writes ({named}); "
                         "it may have been crafted, so it is not read")
    for kind in ("sequences", "types", "indexes", "schemas"):
        if con.execute(_NEVER[kind]).fetchone():
            wrong.append(kind)
    columns, constraints = _known()
    if not set(con.execute(_COLUMNS).fetchall()) <= columns:
        wrong.append("tables or columns")
    if not set(con.execute(_CONSTRAINTS).fetchall()) <= constraints:
        wrong.append("constraints")
    if wrong:
        raise StoreError(f"the database holds {', '.join(wrong)} that simrun's schema does not have; "
                         "it may have been crafted, so it is not read")
