"""Small DuckDB helpers shared by the store and the goal checks."""

from __future__ import annotations

import duckdb


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: list) -> None:
    """Insert rows in one statement: executemany costs a round trip per row."""
    if rows:
        one = "(" + ", ".join("?" * len(rows[0])) + ")"
        con.execute(f"INSERT INTO {table} VALUES " + ", ".join([one] * len(rows)),
                    [value for row in rows for value in row])
