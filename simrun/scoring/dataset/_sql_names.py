"""What a goal's success query names: record types, operations, and field paths in JSON.

Read from DuckDB's own parse tree (`json_serialize_sql`), never a regex, and conservatively: only
what the query says plainly counts, so that a name listed here is a name the query really uses:

- `type = 'trip'`, `type IN ('trip', 'traveler')`: record types (any table alias: `records.type`);
- `operation = 'rebook'`, `operation IN (...)`: operations;
- `data->>'bags'`, `data->'segments'->>'outbound'`, `json_extract(data, '$.a.b')`: record fields;
  the same over `arguments`: event arguments. Array steps and wildcards end a path there.

A query that does not parse names nothing (loading refuses it before a run anyway).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import duckdb

JSON_FUNCTIONS = {"->", "->>", "json_extract", "json_extract_string", "json_extract_path",
                  "json_extract_path_text", "json_exists", "json_value"}
_PLAIN_KEY = re.compile(r"^[A-Za-z_][\w-]*$")


@dataclass
class SqlNames:
    types: set[str] = field(default_factory=set)
    operations: set[str] = field(default_factory=set)
    record_fields: set[str] = field(default_factory=set)      # dotted paths inside records.data
    argument_fields: set[str] = field(default_factory=set)    # dotted paths inside events.arguments


def sql_names(query: str) -> SqlNames:
    """The names `query` uses plainly (see the module's docstring)."""
    names = SqlNames()
    tree = _parse_tree(query)
    if tree is not None:
        _walk(tree, names)
    return names


_parser: duckdb.DuckDBPyConnection | None = None
_parser_lock = threading.Lock()


@functools.lru_cache(maxsize=1024)
def _parse_tree(query: str) -> dict[str, Any] | None:
    """DuckDB's parse tree of `query` (shared: read it, never change it), or None where it does
    not parse. Remembered: each run asks again for the same goals' queries. One in-memory
    database serves every call, through a cursor of each caller's own (a connection is not
    shared between threads): opening a database took about a tenth of a second, a cursor a
    millisecond."""
    global _parser
    try:
        with _parser_lock:
            if _parser is None:
                _parser = duckdb.connect()
            cursor = _parser.cursor()
        try:
            # One row, always; were there none, json.loads(None) fails as a TypeError, caught below.
            row = cursor.execute("SELECT json_serialize_sql(?)", [query]).fetchone() or (None,)
            tree: dict[str, Any] = json.loads(row[0])
        finally:
            cursor.close()
    except (duckdb.Error, TypeError, ValueError):
        return None
    return None if tree.get("error") else tree


def _walk(node: Any, names: SqlNames) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, names)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind == "COMPARE_EQUAL" and "left" in node:
        for column, value in ((node["left"], node["right"]), (node["right"], node["left"])):
            _named(_column(column), [_text(value)], names)
    elif kind == "COMPARE_IN" and node.get("children"):
        column, *values = node["children"]
        _named(_column(column), [_text(v) for v in values], names)
    elif (extraction := _extraction(node)) is not None:
        base, path = _json_path(extraction)
        if base == "data" and path:
            names.record_fields.add(path)
        elif base == "arguments" and path:
            names.argument_fields.add(path)
    for value in node.values():
        _walk(value, names)


def _named(column: str | None, values: list[str | None], names: SqlNames) -> None:
    if column in ("type", "operation") and all(v is not None for v in values):
        (names.types if column == "type" else names.operations).update(v for v in values if v is not None)


def _column(node: Any) -> str | None:
    if isinstance(node, dict) and node.get("class") == "COLUMN_REF" and node.get("column_names"):
        name: str | None = node["column_names"][-1]
        return name
    return None


def _text(node: Any) -> str | None:
    if isinstance(node, dict) and node.get("class") == "CONSTANT":
        literal = node.get("literal") or {}
        if literal.get("kind") == "STRING":
            text: str | None = literal.get("text")
            return text
    return None


def _extraction(node: Any) -> tuple[Any, Any] | None:
    """(what is read from, the key) of a JSON extraction; DuckDB parses `a->'k'` as a lambda."""
    if not isinstance(node, dict):
        return None
    if node.get("class") == "FUNCTION" and node.get("function_name") in JSON_FUNCTIONS:
        args = [a.get("expression") for a in node.get("arguments") or []]
        return (args[0], args[1]) if len(args) == 2 else None
    if node.get("class") == "LAMBDA" and node.get("syntax_type") == "SINGLE_ARROW":
        return node.get("lhs"), node.get("expr")
    return None


def _json_path(extraction: tuple[Any, Any]) -> tuple[str | None, str | None]:
    """(the column at the bottom of a chain of JSON extractions, the dotted path it reads), for a
    JSON extraction (`_extraction`'s answer); the path is None where a step is not a plain key (an
    array index, a wildcard, an expression)."""
    inner, key = extraction
    if (deeper := _extraction(inner)) is not None:
        base, prefix = _json_path(deeper)
    else:
        base, prefix = _column(inner), ""
    key = _text(key)
    parts = _path_parts(key) if key is not None and prefix is not None else None
    return base, ".".join([*filter(None, [prefix]), *parts]) if parts else None


def _path_parts(key: str) -> list[str] | None:
    """'$.a.b' -> [a, b]; '/a/b' -> [a, b]; 'a' -> [a]; None if a step is not a plain key."""
    if key.startswith("$"):
        raw = key[1:].lstrip(".").split(".")
    elif key.startswith("/"):
        raw = key[1:].split("/")
    else:
        raw = [key]
    return raw if raw and all(_PLAIN_KEY.match(part) for part in raw) else None
