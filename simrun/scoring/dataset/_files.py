"""Personas and goals: the YAML files under `personas/` and `goals/`, validated at the boundary.

Every problem is reported as a `ConfigError` naming the file, the line and the field, before
anything runs. The validated models are frozen: they are the values the rest of simrun passes
around. The dataset hash (personas + goals, by content) is what makes two runs comparable.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from simrun import _input_files as input_files
from simrun._errors import ConfigError
from simrun._field_errors import first_problem
from simrun._storable import first_unstorable
from simrun.scoring.dataset._goal_sql import check_goal_sql
from simrun.scoring.dataset._models import MANNERS, Goal, Persona

# What a YAML file of the dataset holds: a persona or a goal.
Item = TypeVar("Item", Persona, Goal)


@dataclass(frozen=True)
class Dataset:
    personas: tuple[Persona, ...]
    goals: tuple[Goal, ...]
    hash: str
    item_hashes: dict[str, str]

    def persona(self, pid: str) -> Persona:
        return next(p for p in self.personas if p.id == pid)

    def goal(self, gid: str) -> Goal:
        return next(g for g in self.goals if g.id == gid)


def canonical_json(value: Any) -> str:
    return _CANONICAL.encode(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


# What `json.dumps(value, sort_keys=True, ...)` builds anew on every call (most of its time on a
# short value; a model call encodes several). An encoder keeps nothing between calls, so one
# serves every caller, from any thread.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_json_default)


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """The line (1-based) of the YAML node at a pydantic error location."""
    best = node
    for i, part in enumerate(loc):
        if part == "[key]":
            break
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if match is None:
                break
            key, node = match
            # The key's line for the last part: a value may span many lines.
            best = key if i == len(loc) - 1 or loc[i + 1] == "[key]" else node
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = best = node.value[part]
        else:
            break
    return best.start_mark.line + 1 if best is not None else None


def _load_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    try:
        return input_files.load_yaml(input_files.read_text(path, "YAML file"))
    except input_files.InputRefused as exc:
        raise ConfigError(str(exc), path=str(path), line=exc.line) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", path=str(path)) from None


def load_model(path: Path, model: type[Item]) -> Item:
    data, root = _load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"must be a YAML mapping of {model.__name__.lower()} fields", path=str(path), line=1)
    try:
        item = model.model_validate(data)
    except ValidationError as exc:
        problem = first_problem(exc, model, choices={"manners": ("manner", tuple(MANNERS))})
        raise ConfigError(problem.message, path=str(path), line=_line_of(root, problem.loc),
                          field=problem.field) from None
    # Checked on the file's own values, where a line can be named: a goal's setup, arguments and
    # expected values go to the runtime as JSON and into the store, and a value neither can hold
    # would otherwise be met at the runtime's first answer, as the runtime's fault.
    found = first_unstorable(data, dates=True)
    if found is not None:
        where, what = found
        raise ConfigError(f"{what}: a {model.__name__.lower()}'s values are sent to the runtime as JSON and kept "
                          "in the store, which cannot hold it", path=str(path), line=_line_of(root, where),
                          field=".".join(map(str, where)) or None)
    return item


def load_dataset(personas_dir: Path, goals_dir: Path) -> Dataset:
    """Load and validate every persona and goal; raise ConfigError on the first problem."""
    personas = _load_dir(Path(personas_dir), Persona, "persona")
    goals = _load_dir(Path(goals_dir), Goal, "goal")
    for path, goal in goals:
        for i, query in enumerate(goal.success.sql):
            problem = check_goal_sql(query)
            if problem:
                data, root = _load_yaml(path)
                raise ConfigError(problem, path=str(path), line=_line_of(root, ("success", "sql", i)),
                                  field=f"success.sql.{i}")
    items = {f"persona:{p.id}": p for _, p in personas} | {f"goal:{g.id}": g for _, g in goals}
    item_hashes = {key: hashlib.sha256(canonical_json(m.model_dump()).encode()).hexdigest()[:16]
                   for key, m in sorted(items.items())}
    dataset_hash = hashlib.sha256(canonical_json(item_hashes).encode()).hexdigest()[:16]
    return Dataset(tuple(p for _, p in personas), tuple(g for _, g in goals), dataset_hash, item_hashes)


def _load_dir(folder: Path, model: type[Item], kind: str) -> list[tuple[Path, Item]]:
    if not folder.is_dir():
        raise ConfigError(f"no {kind}s folder here; create it or pass --{kind}s DIR", path=str(folder))
    files = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")])
    if not files:
        raise ConfigError(f"no {kind} files (*.yaml) in this folder", path=str(folder))
    loaded: list[tuple[Path, Item]] = []
    seen: dict[str, Path] = {}
    for path in files:
        item = load_model(path, model)
        if item.id in seen:
            raise ConfigError(f"{kind} id {item.id!r} is also used by {seen[item.id]}", path=str(path),
                              line=_line_of(_load_yaml(path)[1], ("id",)), field="id")
        seen[item.id] = path
        loaded.append((path, item))
    return loaded


def json_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schemas published for editors (schemas/persona.json, schemas/goal.json)."""
    return {"persona": Persona.model_json_schema(), "goal": Goal.model_json_schema()}
