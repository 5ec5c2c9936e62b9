"""The persona and goal files as pydantic models: every field documented, extra fields forbidden.

The validated models are frozen: they are the values the rest of simrun passes around. A
model-level check names the field it found wrong at the start of its message, so that the
loader (`simrun.scoring.dataset._files`) can point at its line.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from simrun.scoring.dataset import _patterns as patterns
from simrun.scoring.dataset._facts import check_fields, check_fills, resolve
from simrun.scoring.dataset._per_goal import per_goal

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


class YamlModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Persona(YamlModel):
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
        """The persona's rate of `manner`, 0 for a manner it does not name. Callers name a manner
        as text (the cast is for the type checker only): a word that is no manner has no rate."""
        return cast("dict[str, float]", self.manners).get(manner, 0.0)


class Step(YamlModel):
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
    def _one_kind(self) -> Step:
        kinds = [self.operation is not None, self.question is not None, self.expect is not None]
        if sum(kinds) != 1:
            raise ValueError("a step has exactly one of: operation, question, expect")
        if self.operation and not self.say:
            raise ValueError("an operation step needs at least one way to say it ('say')")
        if self.expect and not self.say:
            raise ValueError("a probe step needs the message to send ('say')")
        return self


class Question(YamlModel):
    """A question the store can answer; asking it must not get 'unavailable'."""

    id: str = Field(pattern=_ID, description="Referred to by steps and success.answered.")
    ask: str = Field(description="How the user asks it.")
    match: str = Field(description="Regex (case-insensitive) that recognises the question in any user message.")
    record: str | None = Field(None, description="Id of the record holding the answer.")
    where: dict[str, Any] | None = Field(None, description="Or: fields that find the record.")
    field: str = Field(description="Dotted path of the answer within the record.")

    @model_validator(mode="after")
    def _record(self) -> Question:
        if (self.record is None) == (self.where is None):
            raise ValueError("a question names its record with exactly one of: record, where")
        _compile(self.match, "match")
        return self


class Refusal(YamlModel):
    trigger: str = Field(description="Regex: a user message matching it must be refused.")
    reason: str = Field("", description="Why the runtime must refuse.")

    @field_validator("trigger")
    @classmethod
    def _regex(cls, value: str) -> str:
        return _compile(value, "trigger")


class RecordCheck(YamlModel):
    id: str | None = Field(None, description="The record's id; without it, any record may match.")
    match: dict[str, Any] = Field(description="Dotted field path -> expected value ('{fact}' allowed).")


class Success(YamlModel):
    records: tuple[RecordCheck, ...] = Field((), description="Records that must exist in the final store.")
    sql: tuple[str, ...] = Field((), description="DuckDB queries over `records` and `events` returning true.")
    answered: tuple[str, ...] = Field((), description="Question ids answered with the store's value.")


class Goal(YamlModel):
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
    def _references(self) -> Goal:
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
                check_fields(value, set(self.facts), f"steps.{i}.arguments.{arg}")
            values = {**self.facts, **{k: self.resolve(v) for k, v in step.arguments.items()}}
            for field in ("say", "terse"):
                for template in getattr(step, field):
                    check_fields(template, names, f"steps.{i}.{field}")
                    check_fills(template, values, f"steps.{i}.{field}")
            for field in ("answers", "correction"):
                for arg, templates in getattr(step, field).items():
                    for template in (templates,) if isinstance(templates, str) else templates:
                        check_fields(template, names, f"steps.{i}.{field}.{arg}")
                        check_fills(template, values, f"steps.{i}.{field}.{arg}")
        for i, question in enumerate(self.questions):
            for key, value in (question.where or {}).items():
                check_fields(value, set(self.facts), f"questions.{i}.where.{key}")
            check_fields(question.ask, set(self.facts), f"questions.{i}.ask")
            check_fills(question.ask, self.facts, f"questions.{i}.ask")
        for i, check in enumerate(self.success.records):
            for key, value in check.match.items():
                check_fields(value, set(self.facts), f"success.records.{i}.match.{key}")
        for i, qid in enumerate(self.success.answered):
            if qid not in qids:
                raise ValueError(f"success.answered.{i}: no question with id {qid!r}")
        return self

    def resolve(self, value: Any, extra: dict[str, Any] | None = None) -> Any:
        return resolve(value, {**self.facts, **(extra or {})})

    def step_id(self, index: int) -> str:
        """The id of step `index` (0-based): its own, or step-1, step-2, ... by position."""
        return self.steps[index].id or f"step-{index + 1}"

    def step_by_id(self, sid: str | None) -> Step | None:
        # The checks look a step up for every user turn: the index is kept per goal value
        # (simrun.scoring.dataset._per_goal), not as a cached property, which model_copy would carry stale.
        return per_goal(self, "steps by id", _steps_by_id).get(sid)


def _steps_by_id(goal: Goal) -> dict[str | None, Step]:
    """Each step id's first step (the first step of an id is the one). Keyed by text only; typed
    to be asked with None too (a user turn tagged with no step), which finds nothing."""
    found: dict[str | None, Step] = {}
    for i, step in enumerate(goal.steps):
        found.setdefault(goal.step_id(i), step)
    return found


def _compile(pattern: str, what: str) -> str:
    try:
        patterns.compiled(pattern)
    except patterns.PatternError as exc:
        raise ValueError(f"{what}: {exc}") from None
    return pattern
