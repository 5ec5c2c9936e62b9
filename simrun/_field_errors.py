"""One formatter for every pydantic boundary a user writes by hand (personas, goals, simrun.toml,
budgets.toml): the error a user should read first, in words that name the field and the fix.

An unknown key is reported before anything else in its file: a misspelt key (`sucess:`) also
leaves the key it meant missing, and "this field is required" alone would blame the wrong
line. A key or a choice that is close to a known one gets "did you mean", from difflib.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from types import UnionType
from typing import Any, Union, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails


@dataclass(frozen=True)
class FieldProblem:
    message: str
    loc: tuple[Any, ...]          # pydantic's location, "[key]" markers kept (for finding the line)

    @property
    def path(self) -> tuple[Any, ...]:
        return tuple(p for p in self.loc if p != "[key]")

    @property
    def field(self) -> str | None:
        return ".".join(str(p) for p in self.path) or None


def nearest(word: str | int, known: Iterable[object]) -> str | None:
    """The known word closest to `word`, if one is close enough to be a misspelling of it."""
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str | int, known: list[str] | tuple[str, ...]) -> str:
    """"; did you mean 'x'?" when one known word is close to `word`, else ""."""
    close = nearest(word, known)
    return f"; did you mean {close!r}?" if close else ""


def fields_at(model: type[BaseModel], path: tuple[Any, ...]) -> list[str]:
    """The field names of the pydantic model found at `path` inside `model` ([] if none)."""
    current: Any = model
    keyed = False                  # the last field was a mapping: the next part is one of its keys
    for part in path:
        if current is None:
            return []
        if isinstance(part, int) or keyed:
            keyed = False
            continue
        field = current.model_fields.get(part)
        if field is None:
            return []
        keyed = get_origin(_optional(field.annotation)) is dict
        current = next((a for a in _members(field.annotation)
                        if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return list(current.model_fields) if current else []


def _optional(annotation: Any) -> Any:
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    return args[0] if get_origin(annotation) in (Union, UnionType) and len(args) == 1 else annotation


def _members(annotation: Any) -> list[Any]:
    """The types an annotation may hold, through unions and containers (dict[str, Price] -> Price)."""
    args = getattr(annotation, "__args__", None)
    if not args:
        return [annotation]
    return [m for a in args for m in _members(a)]


def _choices(err: ErrorDetails) -> list[str]:
    expected = (err.get("ctx") or {}).get("expected", "")
    return re.findall(r"'([^']*)'", str(expected))


def first_problem(exc: ValidationError, model: type[BaseModel], *, noun: str = "field",
                  choices: dict[str, tuple[str, tuple[str, ...]]] | None = None) -> FieldProblem:
    """The problem to show for `exc`, raised validating `model`.

    noun: what the file calls a key ("field" in YAML, "setting" in TOML).
    choices: top-level field -> (what one key of it is called, the known keys) for mappings whose
    keys are a fixed set (a persona's manners), so that a wrong key lists the right ones.
    """
    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    message = err["msg"].removeprefix("Value error, ")
    loc = tuple(err["loc"])
    path = tuple(p for p in loc if p != "[key]")
    m = re.match(r"^([A-Za-z_][\w.]*): (.*)$", message, re.S)
    if m and ("." in m.group(1) or m.group(1) in fields_at(model, path)):
        # A model-level check names its field at the start of its message.
        loc += tuple(int(p) if p.isdigit() else p for p in m.group(1).split("."))
        return FieldProblem(m.group(2), loc)
    if err["type"] == "extra_forbidden":
        known = fields_at(model, path[:-1])
        return FieldProblem(f"unknown {noun} {path[-1]!r}{did_you_mean(path[-1], known)} "
                            f"(allowed here: {', '.join(known)})", loc)
    if err["type"] == "missing":
        return FieldProblem("this field is required", loc)
    if err["type"] == "literal_error":
        known = _choices(err)
        if path and choices and path[0] in choices:
            what, known = choices[path[0]][0], list(choices[path[0]][1])
            return FieldProblem(f"unknown {what} {path[-1]!r}{did_you_mean(path[-1], known)} "
                                f"({what}s are: {', '.join(known)})", loc)
        if "[key]" in loc:
            return FieldProblem(f"unknown key {path[-1]!r}{did_you_mean(path[-1], known)} "
                                f"(allowed here: {', '.join(known)})", loc)
        value = err.get("input")
        if isinstance(value, str) and known:
            return FieldProblem(f"{value!r} is not one of {', '.join(map(repr, known))}"
                                f"{did_you_mean(value, known)}", loc)
    return FieldProblem(message, loc)
