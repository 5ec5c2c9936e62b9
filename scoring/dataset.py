"""Personas and goals: the YAML files under `personas/` and `goals/`, validated at the boundary.

Every problem is reported as a `ConfigError` naming the file, the line and the field, before
anything runs. The validated models are frozen: they are the values the rest of simrun passes
around. The dataset hash (personas + goals, by content) is what makes two runs comparable.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from scoring import input_files, patterns
from scoring.errors import ConfigError
from scoring.goal_sql import check_goal_sql

MANNERS: dict[str, str] = {
    "terse": "share of messages written as short as possible, leaving arguments out for the runtime to ask",
    "wordy": "share of messages wrapped in greetings, context and thanks",
    "typos": "share of words (four letters or more, outside the goal's facts) given one typing error",
    "changes_mind": "share of steps where a value is first given wrong, then corrected (a date by day and month only)",
    "complains": "share of messages that carry a complaint",
    "stale_clicks": "share of clicks made on an offer from an earlier turn instead of the current one",
}
Manner = Literal["terse", "wordy", "typos", "changes_mind", "complains", "stale_clicks"]
_ID = r"^[a-z0-9][a-z0-9_.-]*$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Persona(_Model):
    """Who the simulated user is, and the manner in which it writes."""

    id: str = Field(pattern=_ID, description="Unique id, used in reports and seeds.")
    name: str = Field(description="How the persona is called in reports and prompts.")
    description: str = Field("", description="Who this user is; given to model-played users.")
    manners: dict[Manner, float] = Field(
        default_factory=dict,
        description="Manner -> rate in [0, 1]. See MANNERS for what each rate means.")
    clicks: float = Field(0.5, ge=0, le=1, description="Share of offers taken by clicking rather than in words.")
    patience: int = Field(6, ge=1, le=50, description="User turns spent on one step before giving up.")
    forbidden: tuple[str, ...] = Field((), description="Phrases no reply may contain for this persona.")
    max_message_chars: int = Field(1000, ge=10, description="Longer user messages are a simulator fault.")

    @field_validator("manners")
    @classmethod
    def _rates(cls, manners: dict[str, float]) -> dict[str, float]:
        for name, rate in manners.items():
            if not 0 <= rate <= 1:
                raise ValueError(f"manner {name!r}: rate must be between 0 and 1, got {rate}")
        return manners

    def rate(self, manner: str) -> float:
        return self.manners.get(manner, 0.0)


class Step(_Model):
    """One thing the scripted user pursues: an operation, a question, or a probe."""

    id: str | None = Field(None, pattern=_ID, description=(
        "Names the step; a user turn that serves it is tagged with it (default: step-1, step-2, ...)."))
    operation: str | None = Field(None, description="The runtime operation this step wants done.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Its arguments; '{fact}' refers to a fact.")
    say: tuple[str, ...] = Field((), description="Ways to ask for it in full words (templates).")
    terse: tuple[str, ...] = Field((), description="Short ways to ask, leaving arguments out.")
    answers: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, description="Argument -> ways to give it when the runtime asks for it.")
    correction: dict[str, str] = Field(
        default_factory=dict, description="Argument -> how a correction restates it (e.g. day and month only).")
    wrong_first: dict[str, Any] = Field(
        default_factory=dict, description="Argument -> a wrong value every persona gives first, then corrects.")
    record: str | None = Field(None, description="Id of the record this step works on, when the setup has several.")
    question: str | None = Field(None, description="Id of a goal question to ask in this step.")
    expect: Literal["refusal"] | None = Field(None, description="A probe: one message whose reply must refuse.")

    @model_validator(mode="after")
    def _one_kind(self) -> "Step":
        kinds = [self.operation is not None, self.question is not None, self.expect is not None]
        if sum(kinds) != 1:
            raise ValueError("a step has exactly one of: operation, question, expect")
        if self.operation and not self.say:
            raise ValueError("an operation step needs at least one way to say it ('say')")
        if self.expect and not self.say:
            raise ValueError("a probe step needs the message to send ('say')")
        return self


class Question(_Model):
    """A question the store can answer; asking it must not get 'unavailable'."""

    id: str = Field(pattern=_ID, description="Referred to by steps and success.answered.")
    ask: str = Field(description="How the user asks it.")
    match: str = Field(description="Regex (case-insensitive) that recognises the question in any user message.")
    record: str | None = Field(None, description="Id of the record holding the answer.")
    where: dict[str, Any] | None = Field(None, description="Or: fields that find the record.")
    field: str = Field(description="Dotted path of the answer within the record.")

    @model_validator(mode="after")
    def _record(self) -> "Question":
        if (self.record is None) == (self.where is None):
            raise ValueError("a question names its record with exactly one of: record, where")
        _compile(self.match, "match")
        return self


class Refusal(_Model):
    trigger: str = Field(description="Regex: a user message matching it must be refused.")
    reason: str = Field("", description="Why the runtime must refuse.")

    @field_validator("trigger")
    @classmethod
    def _regex(cls, value: str) -> str:
        return _compile(value, "trigger")


class RecordCheck(_Model):
    id: str | None = Field(None, description="The record's id; without it, any record may match.")
    match: dict[str, Any] = Field(description="Dotted field path -> expected value ('{fact}' allowed).")


class Success(_Model):
    records: tuple[RecordCheck, ...] = Field((), description="Records that must exist in the final store.")
    sql: tuple[str, ...] = Field((), description="DuckDB queries over `records` and `events` returning true.")
    answered: tuple[str, ...] = Field((), description="Question ids answered with the store's value.")


class Goal(_Model):
    """What the simulated user wants, how to tell it was reached, and what must never happen."""

    id: str = Field(pattern=_ID, description="Unique id, used in reports and seeds.")
    title: str = Field(description="One line saying what the user wants.")
    instructions: str = Field(description="The brief for a model-played user.")
    facts: dict[str, Any] = Field(default_factory=dict, description="What the user knows.")
    steps: tuple[Step, ...] = Field(min_length=1, description="What the scripted user pursues, in order.")
    setup: dict[str, Any] = Field(default_factory=dict, description="Fixtures passed to the runtime's start.")
    success: Success = Field(description="Checks on the final store; all must hold.")
    max_turns: int = Field(20, ge=1, le=200, description="User turns before the conversation ends as turn_cap.")
    forbidden: tuple[str, ...] = Field((), description="Phrases no reply may contain.")
    refusals: tuple[Refusal, ...] = Field((), description="Messages the runtime must refuse.")
    questions: tuple[Question, ...] = Field((), description="Questions whose answers the store holds.")
    date_order: Literal["day_first", "month_first"] | None = Field(None, description=(
        "How the runtime writes numeric dates: 10/12/2026 is 10 December (day_first) or October 12 "
        "(month_first). Unset, a numeric date never counts as an answer."))
    tags: tuple[str, ...] = Field((), description="Free labels (seed, question, correction, ...).")

    @model_validator(mode="after")
    def _references(self) -> "Goal":
        # Messages start with the dotted path of the offending field: the loader turns it into
        # a line number.
        qids = {q.id for q in self.questions}
        seen: dict[str, int] = {}
        for i in range(len(self.steps)):
            sid = self.step_id(i)
            if sid in seen:
                raise ValueError(f"steps.{i}.id: step id {sid!r} is also step {seen[sid] + 1}'s")
            seen[sid] = i
        for i, step in enumerate(self.steps):
            if step.question is not None and step.question not in qids:
                raise ValueError(f"steps.{i}.question: no question with id {step.question!r}")
            names = set(self.facts) | set(step.arguments)
            for arg, value in step.arguments.items():
                _check_fields(value, set(self.facts), f"steps.{i}.arguments.{arg}")
            values = {**self.facts, **{k: self.resolve(v) for k, v in step.arguments.items()}}
            for field in ("say", "terse"):
                for template in getattr(step, field):
                    _check_fields(template, names, f"steps.{i}.{field}")
                    _check_fills(template, values, f"steps.{i}.{field}")
            for field in ("answers", "correction"):
                for arg, templates in getattr(step, field).items():
                    for template in (templates,) if isinstance(templates, str) else templates:
                        _check_fields(template, names, f"steps.{i}.{field}.{arg}")
                        _check_fills(template, values, f"steps.{i}.{field}.{arg}")
        for i, question in enumerate(self.questions):
            for key, value in (question.where or {}).items():
                _check_fields(value, set(self.facts), f"questions.{i}.where.{key}")
            _check_fields(question.ask, set(self.facts), f"questions.{i}.ask")
            _check_fills(question.ask, self.facts, f"questions.{i}.ask")
        for i, check in enumerate(self.success.records):
            for key, value in check.match.items():
                _check_fields(value, set(self.facts), f"success.records.{i}.match.{key}")
        for i, qid in enumerate(self.success.answered):
            if qid not in qids:
                raise ValueError(f"success.answered.{i}: no question with id {qid!r}")
        return self

    def resolve(self, value: Any, extra: dict[str, Any] | None = None) -> Any:
        return resolve(value, {**self.facts, **(extra or {})})

    def step_id(self, index: int) -> str:
        """The id of step `index` (0-based): its own, or step-1, step-2, ... by position."""
        return self.steps[index].id or f"step-{index + 1}"

    def step_by_id(self, sid: str | None) -> "Step | None":
        return next((s for i, s in enumerate(self.steps) if self.step_id(i) == sid), None)


def _compile(pattern: str, what: str) -> str:
    try:
        patterns.compiled(pattern)
    except patterns.PatternError as exc:
        raise ValueError(f"{what}: {exc}") from None
    return pattern


def template_fields(template: Any) -> list[str]:
    if not isinstance(template, str):
        return []
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


_FACT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_SPEC_CHARS = 40
MAX_SPEC_NUMBER = 200


def _check_template(template: str, where: str) -> None:
    """A template fills facts in plainly: `{trip}` or `{date:%d %B}`. Attribute and index access
    (`{trip.__class__}`) would read Python objects, and a width like `{trip:>1500000000}` would
    build a string of gigabytes: a goal file may be hostile, so both are refused."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"{where}: not a valid template ({exc}); write a literal brace as {{{{ or }}}}") from None
    for _, name, spec, _ in parsed:
        if name is None:
            continue
        if not _FACT_NAME.fullmatch(name):
            raise ValueError(f"{where}: '{{{name}}}' must name a fact plainly, like {{trip}}; attribute, index "
                             "and positional fields are not allowed")
        if spec and ("{" in spec or len(spec) > MAX_SPEC_CHARS):
            raise ValueError(f"{where}: the format spec {spec[:MAX_SPEC_CHARS]!r} is nested or longer than "
                             f"{MAX_SPEC_CHARS} characters")
        widths = [int(n) for n in re.findall(r"\d+", spec or "")]
        if widths and max(widths) > MAX_SPEC_NUMBER:
            raise ValueError(f"{where}: the format spec {spec!r} asks for {max(widths)} characters; at most "
                             f"{MAX_SPEC_NUMBER}")


def _check_fields(template: Any, known: set[str], where: str) -> None:
    if isinstance(template, str):
        _check_template(template, where)
    for name in template_fields(template):
        if name.split(".")[0].split("[")[0] not in known:
            raise ValueError(f"{where}: '{{{name}}}' names a fact the goal does not define; "
                             f"known: {', '.join(sorted(known)) or 'none'}")


def _check_fills(template: str, values: dict[str, Any], where: str) -> None:
    """A template must fill with the goal's own values, or the run would fail midway."""
    try:
        template.format(**values)
    except (ValueError, KeyError, IndexError, AttributeError, TypeError) as exc:
        hint = ""
        for _, name, spec, _ in string.Formatter().parse(template):
            if name and spec and "%" in spec and not isinstance(values.get(name), (dt.date, dt.datetime)):
                hint = (f"; '{name}' is text, not a date: write dates unquoted in YAML "
                        f"(2027-02-20, not '2027-02-20')")
        raise ValueError(f"{where}: cannot fill {template!r}: {exc}{hint}") from None


def resolve(value: Any, names: dict[str, Any]) -> Any:
    """'{fact}' alone keeps the fact's type (a date stays a date); other templates format."""
    if not isinstance(value, str):
        return value
    fields = list(string.Formatter().parse(value))
    if len(fields) == 1 and fields[0][0] == "" and fields[0][1] and not fields[0][2]:
        return names[fields[0][1]]
    return value.format(**names) if any(f[1] for f in fields) else value


# --- loading ---------------------------------------------------------------------------------

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
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


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


def load_model(path: Path, model: type[_Model]) -> _Model:
    data, root = _load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"must be a YAML mapping of {model.__name__.lower()} fields", path=str(path), line=1)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        message = err["msg"].removeprefix("Value error, ")
        raw_loc = tuple(err["loc"])
        m = re.match(r"^([A-Za-z_][\w.]*): (.*)$", message, re.S)
        if m and ("." in m.group(1) or m.group(1) in _fields_at(model, tuple(p for p in raw_loc if p != "[key]"))):
            # A model-level check names its field at the start of its message.
            raw_loc += tuple(int(p) if p.isdigit() else p for p in m.group(1).split("."))
            message = m.group(2)
        loc = tuple(p for p in raw_loc if p != "[key]")
        field = ".".join(str(p) for p in loc) or None
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(_fields_at(model, loc[:-1]))
            message = f"unknown field {loc[-1]!r}; allowed here: {allowed}"
        elif err["type"] == "literal_error" and loc and loc[0] == "manners":
            message = f"unknown manner {loc[-1]!r}; manners are: {', '.join(MANNERS)}"
        elif err["type"] == "missing":
            message = "this field is required"
        raise ConfigError(message, path=str(path), line=_line_of(root, raw_loc), field=field) from None


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    current: Any = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        annotation = current.model_fields.get(part).annotation if part in current.model_fields else None
        current = next((a for a in getattr(annotation, "__args__", (annotation,))
                        if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return list(current.model_fields) if current else []


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


def _load_dir(folder: Path, model: type[_Model], kind: str) -> list[tuple[Path, Any]]:
    if not folder.is_dir():
        raise ConfigError(f"no {kind}s folder here; create it or pass --{kind}s DIR", path=str(folder))
    files = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")])
    if not files:
        raise ConfigError(f"no {kind} files (*.yaml) in this folder", path=str(folder))
    loaded, seen = [], {}
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
