"""Goals that name what no store ever held: a problem in the goal file, not the runtime's failure.

`match: {bag: 1}` where the runtime's records have `bags` can never hold, and a run that reports
it as 0% goal reached blames the runtime for a typo. So the names a goal uses are compared with
everything the stores of a run (or of a short scripted run, `simrun validate --runtime`) held:

- record fields: `success.records[].match` paths, a question's `field` and `where` keys, and the
  JSON paths a success query reads from `data`; checked against the records of the same type
  (the type of the record the check names by id, else of any type);
- record types: `match: {type: ...}`, a question's `where: {type: ...}`, `type = '...'` in SQL;
- operations: each step's `operation`, and `operation = '...'` in SQL; checked against every
  event, offer, card and ask of the run;
- event arguments: the JSON paths a success query reads from `arguments` (where it names its
  operation), against the events and asks of that operation.

Only what the run could have shown is checked: no fields when no store held a record, no
operation when none was seen, no argument of an operation whose events and asks carried none.
A record or an operation the runtime never produced at all is not named by id: that may be the
runtime's failure. Each problem is one line, with what was seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from simrun._field_errors import nearest
from simrun._untrusted_text import one_line
from simrun.scoring.dataset import Goal, sql_names

SHOWN = 8            # names listed after "seen:"
NAME_CHARS = 40      # a runtime's names are anyone's text: each shown as one short line


@dataclass(frozen=True)
class Seen:
    """What the stores of a run held."""

    fields: Mapping[str, frozenset[str]]      # record type ("" untyped) -> every dotted field path it had
    types_of: Mapping[str, str]               # record id -> its type
    operations: frozenset[str]                # of events, offers, card actions and asks
    arguments: Mapping[str, frozenset[str]]   # operation -> the argument names its events and asks had


def _listed(names: Iterable[str]) -> str:
    names = sorted(names)
    shown = ", ".join(one_line(n, NAME_CHARS) or "?" for n in names[:SHOWN])
    return shown + (", …" if len(names) > SHOWN else "") if names else "none"


def _suggest(word: str, known: Iterable[str]) -> str:
    close = nearest(word, known)
    return f" (did you mean `{one_line(close, NAME_CHARS)}`?)" if close else ""


class _Problems:
    def __init__(self, goal: Goal, seen: Seen) -> None:
        self.goal, self.seen = goal, seen
        self.lines: list[str] = []
        setup = found if isinstance(found := goal.setup.get("records"), dict) else {}
        self.setup_types = {rid: r.get("type") for rid, r in setup.items()
                            if isinstance(r, dict) and isinstance(r.get("type"), str)}

    def say(self, text: str) -> None:
        line = f"goal {self.goal.id}: {text}"
        if line not in self.lines:
            self.lines.append(line)

    def type_of(self, record_id: Any) -> str | None:
        if not isinstance(record_id, str):
            return None
        return self.seen.types_of.get(record_id) or self.setup_types.get(record_id)

    def field(self, path: str, rtype: str | None) -> None:
        fields = self.seen.fields
        if not fields or not isinstance(path, str):
            return
        types = [rtype] if rtype is not None and rtype in fields else list(fields)
        known = set().union(*(fields[t] for t in types))
        if path in known:
            return
        parts = path.split(".")
        depth = max((i for i in range(1, len(parts)) if ".".join(parts[:i]) in known), default=0)
        prefix = ".".join(parts[:depth])
        under = {k[len(prefix) + 1:] for k in known if k.startswith(prefix + ".")} if prefix else known
        children = {k.split(".")[0] for k in under}
        missing = ".".join(parts[:depth + 1])
        whose = f"of type {rtype} " if rtype in fields else ""
        seen_what = f"fields seen under {prefix}" if prefix else "fields seen"
        self.say(f"no record {whose}ever had field `{missing}`{_suggest(parts[depth], children)}; "
                 f"{seen_what}: {_listed(children)}")

    def record_type(self, value: Any) -> None:
        if self.seen.fields and isinstance(value, str) and value not in self.seen.fields:
            self.say(f"no record of type `{value}` ever existed{_suggest(value, self.seen.fields)}; "
                     f"types seen: {_listed(t for t in self.seen.fields if t)}")

    def operation(self, op: Any) -> None:
        operations = self.seen.operations
        if operations and isinstance(op, str) and op not in operations:
            self.say(f"no event, offer or ask ever had operation `{op}`{_suggest(op, operations)}; "
                     f"operations seen: {_listed(operations)}")

    def argument(self, op: str, name: str) -> None:
        known = self.seen.arguments.get(op)
        if known and name not in known:
            self.say(f"no event or ask of operation {op} ever had argument `{name}`{_suggest(name, known)}; "
                     f"arguments seen: {_listed(known)}")


def goal_problems(goal: Goal, seen: Seen) -> list[str]:
    """One line per name in `goal` that nothing in `seen` ever held."""
    check = _Problems(goal, seen)
    for record in goal.success.records:
        rtype = check.type_of(record.id)
        for path, value in record.match.items():
            if path == "type":
                check.record_type(goal.resolve(value))
            else:
                check.field(path, rtype)
    for question in goal.questions:
        where = question.where or {}
        rtype = check.type_of(question.record) if question.record else where.get("type")
        check.record_type(where.get("type"))
        for key in where:
            if key != "type":
                check.field(key, rtype if isinstance(rtype, str) else None)
        check.field(question.field, rtype if isinstance(rtype, str) else None)
    for step in goal.steps:
        # A step's arguments are not checked: some only tell the user which record it means
        # (`trip: Porto visit`), and a runtime rightly never stores them as an argument.
        check.operation(step.operation)
    for query in goal.success.sql:
        names = sql_names(query)
        for rtype in sorted(names.types):
            check.record_type(rtype)
        for op in sorted(names.operations):
            check.operation(op)
        only = next(iter(names.types)) if len(names.types) == 1 else None
        for path in sorted(names.record_fields):
            check.field(path, only)
        for name in sorted({path.split(".")[0] for path in names.argument_fields}):
            for op in sorted(names.operations):
                check.argument(op, name)
    return check.lines
