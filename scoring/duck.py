"""Small DuckDB helpers shared by the store and the goal checks."""

from __future__ import annotations

import itertools

import duckdb
import pandas as pd

_names = itertools.count()


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: list) -> None:
    """Insert many rows at once: through a DataFrame, which DuckDB reads in bulk, since binding
    parameters row by row (or in one huge statement) costs more than the conversation did."""
    if not rows:
        return
    name = f"_rows_{next(_names)}"
    frame = pd.DataFrame(rows, columns=[f"c{i}" for i in range(len(rows[0]))], dtype=object)
    con.register(name, frame)
    try:
        con.execute(f"INSERT INTO {table} SELECT * FROM {name}")
    finally:
        con.unregister(name)
