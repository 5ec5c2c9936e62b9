"""Every path from an answer to the judge is guarded (issue 38, rule 7): one bad value costs one
conversation, on every check and goal kind, never the run.

Hypothesis puts hostile values (huge integers and digit strings, NaN-like strings, deep nesting,
odd Unicode) into what a runtime answers: every field of a turn result, the records and events of
its store, its audit stream. The demo's runtime plays, the scripted user talks to it, and the
conversation goes the whole way a real one goes: the protocol check at the adapter, the loop's
goal check after each turn, the scorer, the store, and a rescore from the store. Whatever the
value, the judge answers with a scorecard naming every class; a check that could not read a value
is UNVERIFIABLE with its reason (never clean, never a pass); the failure is the runtime's (a
malformed answer), never a traceback in simrun nor a fault blamed on the simulated user.

The kinds are read from the code: a new class, goal success kind, step kind, turn-result field or
store part that this file does not feed fails `test_the_properties_cover_every_kind_the_code_defines`.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from simrun._protocol import Audit, State, TurnEvent, TurnResult
from simrun._transcript import CheckResult, Transcript, TurnRecord
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.checks._goal import goal_status
from simrun.scoring.checks._guarantees import GUARANTEE_CHECKS
from simrun.scoring.checks._progress import PROGRESS_CHECKS
from simrun.scoring.checks._scorer import ALL_CLASSES, score
from simrun.scoring.dataset._files import load_dataset
from simrun.scoring.dataset._models import Goal, Step, Success
from simrun.scoring.store._database import Store
from simrun.scoring.store._rescore import rescore_run
from simrun.scoring.store._rows import Finished
from simrun.scoring.store._run_ids import new_run_id
from simrun.simulator._conversation import Cell, converse
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser
from tests.conftest import ROOT

# Modest, and no deadline: one example runs a conversation per goal (and a goal's SQL in its
# sandbox); the suite's time is what keeps this test in it, not a timed assertion.
HOSTILE_RUNS = settings(max_examples=12, deadline=None, derandomize=True,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                               HealthCheck.data_too_large, HealthCheck.large_base_example])
DEMO = load_dataset(ROOT / "personas", ROOT / "goals")

# --- the kinds, as the code defines them ------------------------------------------------------

# What the judge reads of a goal (every other field of Goal is words for people or the runtime).
SUCCESS_KINDS = ("records", "sql", "answered")
STEP_KINDS = ("operation", "question", "expect")
GOAL_FIELDS_JUDGED = ("steps", "success", "facts", "max_turns", "forbidden", "refusals", "questions", "date_order")
GOAL_FIELDS_NOT_JUDGED = ("id", "title", "instructions", "setup", "tags")
CLASSES = (*PROGRESS_CHECKS, *GUARANTEE_CHECKS, "simulator_error")
# What a runtime answers, field by field: each is fed hostile values, present or not.
TURN_FIELDS = tuple(k for k in TurnResult.__annotations__ if k != "state")   # the store is fed on its own
STATE_PARTS = tuple(State.__annotations__)
AUDIT_FIELDS = tuple(TurnEvent.__annotations__)


def test_the_properties_cover_every_kind_the_code_defines():
    """A kind added to the models or the judge without a hostile feed here fails this test."""
    assert set(CLASSES) == set(ALL_CLASSES) and len(CLASSES) == len(ALL_CLASSES)
    assert set(Success.model_fields) == set(SUCCESS_KINDS)
    assert set(GOAL_FIELDS_JUDGED) | set(GOAL_FIELDS_NOT_JUDGED) == set(Goal.model_fields)
    assert set(STEP_KINDS) <= set(Step.model_fields)
    assert set(TurnResult.__annotations__) == {*TURN_FIELDS, "state"}
    assert set(State.__annotations__) == {"records", "events"} and set(Audit.__annotations__) == {"turns"}
    # The goals the properties run cover every kind of success check, step and rule the judge reads.
    for kind in SUCCESS_KINDS:
        assert any(getattr(g.success, kind) for g in DEMO.goals), f"no demo goal has success.{kind}"
    for kind in STEP_KINDS:
        assert any(getattr(s, kind) is not None for g in DEMO.goals for s in g.steps), f"no demo step is a {kind}"
    for field in ("forbidden", "refusals", "questions"):
        assert any(getattr(g, field) for g in DEMO.goals), f"no demo goal has {field}"
    # A question found by `where`, one by `record`: both ways to a record.
    assert {q.where is None for g in DEMO.goals for q in g.questions} == {True, False}


# --- hostile values ---------------------------------------------------------------------------

def _nested(depth: int, inner: Any = 1) -> Any:
    for i in range(depth):
        inner = [inner] if i % 2 else {"a": inner}
    return inner


# Each hostile value is drawn as a small recipe (a kind and a size) and built from it: Hypothesis
# keeps the recipe, not a 5,000-digit value, so an example stays cheap to make and to shrink.
BUILD = {
    "digits": lambda n: "9" * n,
    "negative digits": lambda n: "-" + "9" * n,
    "decimal digits": lambda n: "0." + "9" * n,
    "digits and words": lambda n: "9" * n + " bags",
    "huge integer": lambda n: 10 ** min(n, 4250) - 1,       # the wire refuses one past 4,300 digits
    "huge negative integer": lambda n: 1 - 10 ** min(n, 4250),
    "deep nesting": lambda n: _nested(n % 3000 + 2),
    "long text": lambda n: "é" * n,
}
ODD = ["9" * 5000, "NaN", "nan", "-NaN", "Infinity", "-Infinity", "inf", "1e999", "-1e-999", "-0", "0x1F", "1_000",
       "1,000", "٣", "𝟝", "½", "Ⅻ", "²", "\u202e12", "e\u0301", "\ufeff", "İ", "ß", "\u2028", "🏳️‍🌈", "2026-02-30",
       "2026-13-45", "99999-01-01", "T-1\u200b", "trip:T-1 ", "", " ", 2**63, -(2**63) - 1, 2**64, 1e308, 5e-324,
       -0.0, None, True, False, [], {}]
hostile = st.one_of(
    # sizes about Python's limit on integer text (4,300 digits), where int(text) starts to raise
    st.tuples(st.sampled_from(sorted(BUILD)), st.one_of(st.integers(1, 40), st.integers(4290, 6000))).map(
        lambda r: BUILD[r[0]](r[1])),
    st.sampled_from(ODD),
    st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12))
seeds = st.integers(0, 2**32 - 1).map(random.Random)


class HostileDesk:
    """The demo's runtime, whose every answer passes through `spoil`: a leaf here and there, and
    each field a runtime may send, becomes one of the example's hostile values."""

    def __init__(self, rng: random.Random, values: list[Any], rate: float, store_rate: float) -> None:
        self.desk, self.rng, self.values, self.rate, self.store_rate = TripDesk(), rng, values, rate, store_rate

    def health(self):
        return self.desk.health()

    def start(self, request):
        return self.desk.start(request)

    def turn(self, session, request):
        result = self.desk.turn(session, request)
        state = result.pop("state", None)
        result = self.spoil(result)
        for field in TURN_FIELDS:          # each field, there or not, now and then a hostile value
            if self.rng.random() < self.rate / 4:
                result[field] = self.value()
        if state is not None:
            result["state"] = self.store(state)
        return result

    def state(self, session):
        return self.store(self.desk.state(session))

    def audit(self, session):
        audit = self.spoil(self.desk.audit(session))
        for event in audit.get("turns", []) if isinstance(audit, dict) else []:
            for field in AUDIT_FIELDS:
                if isinstance(event, dict) and self.rng.random() < self.rate / 4:
                    event[field] = self.value()
        return audit

    def close(self, session):
        return self.desk.close(session) if hasattr(self.desk, "close") else None

    def store(self, state):
        """The records' fields and the events' arguments, at the example's store rate (every one
        of them at 1.0): the values the goal's record checks, questions and SQL read. The
        protocol's own fields (ids, turn, status) now and then: those the adapter checks."""
        if not isinstance(state, dict):
            return state
        records, events = state.get("records"), state.get("events")
        if isinstance(records, dict):
            state["records"] = {rid: self.spoil(row, self.store_rate) for rid, row in records.items()}
        for event in events if isinstance(events, list) else ():
            if isinstance(event, dict):
                event["arguments"] = self.spoil(event.get("arguments"), self.store_rate)
                if self.rng.random() < self.rate / 4:
                    event[self.rng.choice([*event, "extra"])] = self.value()
        for part in STATE_PARTS:
            if self.rng.random() < self.rate / 8:
                state[part] = self.value()
        return state

    def value(self) -> Any:
        return self.rng.choice(self.values)

    def spoil(self, value: Any, rate: float | None = None) -> Any:
        rate = self.rate if rate is None else rate
        if isinstance(value, dict):
            return {k: self.spoil(v, rate) for k, v in value.items()}
        if isinstance(value, list):
            return [self.spoil(v, rate) for v in value]
        return self.value() if self.rng.random() < rate else value


def _judged_whole(conversation) -> None:
    """What a hostile value may do to one conversation, and no more."""
    card, transcript = conversation.scorecard, conversation.transcript
    assert set(card.checks) == set(ALL_CLASSES)
    error = transcript.error or {}
    # The runtime's answer was bad, or the run went on: never a traceback of simrun's, never the
    # simulated user blamed for what the runtime sent.
    assert error.get("kind") not in ("unexpected", "simulator_crash"), error
    for name, check in card.checks.items():
        assert isinstance(check, CheckResult)
        if check.reason and "the check failed" in check.reason:
            assert check.unverifiable_turns > 0 and not check.findings, (name, check)
    if "could not read" in card.goal_detail or "the check failed" in card.goal_detail:
        assert card.goal_reached is None and card.goal_detail.startswith("UNVERIFIABLE"), card.goal_detail


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with Store(tmp_path_factory.mktemp("hostile") / "s.duckdb") as opened:
        yield opened


@HOSTILE_RUNS
@example(values=["9" * 5000], rng=random.Random(0), rate=0.0, store_rate=1.0)   # the value the issue met
@given(values=st.lists(hostile, min_size=1, max_size=6), rng=seeds,
       rate=st.sampled_from([0.0, 0.02, 0.1, 0.3]), store_rate=st.sampled_from([0.1, 0.5, 1.0]))
def test_hostile_values_in_a_runtime_s_answers_cost_one_conversation_on_every_kind(store, values, rng, rate,
                                                                                  store_rate):
    persona = DEMO.personas[rng.randrange(len(DEMO.personas))]

    async def run_all():
        adapter = PythonRuntime(HostileDesk(rng, values, rate, store_rate))
        return [await converse(Cell(persona, goal, 0, rng.randrange(1000)), ScriptedUser(), adapter)
                for goal in DEMO.goals]

    conversations = asyncio.run(run_all())
    for conversation in conversations:
        _judged_whole(conversation)
    # The store keeps them, and the judge reads them again from it: a rescore is one more path.
    run_id = new_run_id()
    store.create_run(run_id, config={}, dataset_hash=DEMO.hash, dataset=DEMO.item_hashes, scorer_version="t",
                     simrun_version="t", user_backend="scripted", runtime="hostile", seed=0, repetitions=1,
                     budget_usd=0)
    store.record_many(run_id, [Finished(c.cell.id, c.transcript, c.scorecard, c.started_at, c.duration_s)
                               for c in conversations])
    assert rescore_run(store, run_id, DEMO).conversations == len(conversations)


# --- the judge on its own: values no adapter would have let through ---------------------------

def _with_hostile_leaves(value: Any, rng: random.Random, values: list[Any]) -> Any:
    if isinstance(value, dict):
        return {k: _with_hostile_leaves(v, rng, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_hostile_leaves(v, rng, values) for v in value]
    return rng.choice(values) if rng.random() < 0.3 else value


@pytest.fixture(scope="module")
def clean_transcripts():
    async def run_all():
        adapter = PythonRuntime(TripDesk())
        return [await converse(Cell(DEMO.personas[0], goal, 0, 3), ScriptedUser(), adapter) for goal in DEMO.goals]
    return [c.transcript for c in asyncio.run(run_all())]


@HOSTILE_RUNS
@given(values=st.lists(st.one_of(hostile, st.integers(4300, 5000).map(lambda n: 10**n), st.just(float("nan")),
                                 st.just(float("inf"))), min_size=1, max_size=6),
       rng=seeds)
def test_the_scorer_answers_any_stored_value_with_a_scorecard(clean_transcripts, values, rng):
    """A bundle or an old store may hold what no adapter lets through today (5,000-digit
    integers, NaN): scoring it gives every class a verdict, never a traceback."""
    for transcript in clean_transcripts:
        goal = DEMO.goal(transcript.goal)
        turns = tuple(TurnRecord(t.index, t.user,
                                 _with_hostile_leaves(t.result, rng, values) if t.result is not None else None,
                                 _with_hostile_leaves(t.state, rng, values) if t.state is not None else None,
                                 t.latency_ms) for t in transcript.turns)
        spoiled = Transcript(transcript.persona, transcript.goal, transcript.seed, transcript.repetition, turns,
                             transcript.end, initial_state=transcript.initial_state,
                             final_state=turns[-1].state if turns else None,
                             audit=_with_hostile_leaves(transcript.audit, rng, values))
        card = score(spoiled, goal, DEMO.persona(transcript.persona))
        assert set(card.checks) == set(ALL_CLASSES)
        if card.goal_reached is None:
            assert card.goal_detail.startswith("UNVERIFIABLE")


# Success queries that read the values themselves (a record's JSON, an event's arguments), where
# a hostile value meets DuckDB's casts and JSON functions in the sandbox.
READING_SQL = ("SELECT count(*) >= 0 FROM records WHERE TRY_CAST(data->>'bags' AS INTEGER) > 0 "
               "OR CAST(data->>'bags' AS DOUBLE) > 0 OR json_extract(data, '$.segments.outbound.date') IS NOT NULL",
               "SELECT count(*) >= 0 FROM events WHERE CAST(arguments->>'trip' AS VARCHAR) <> '' "
               "OR CAST(arguments->>'bags' AS BIGINT) > 1")


@HOSTILE_RUNS
@given(values=st.lists(hostile, min_size=1, max_size=6), rng=seeds)
def test_a_success_query_over_hostile_values_is_decided_or_unverifiable_for_its_goal(clean_transcripts, values, rng):
    base = DEMO.goal("cancel-trip")
    goal = base.model_copy(update={"success": base.success.model_copy(update={"records": (), "sql": READING_SQL})})
    for transcript in clean_transcripts:
        if transcript.final_state is None:
            continue
        state = _with_hostile_leaves(transcript.final_state, rng, values)
        reached, why = goal_status(goal, transcript, state)
        assert reached in (True, False, None)
        if reached is None:
            assert why.startswith(f"UNVERIFIABLE: goal {goal.id}: ") or why.startswith("UNVERIFIABLE: the runtime"), why
