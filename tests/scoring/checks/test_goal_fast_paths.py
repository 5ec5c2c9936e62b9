"""What the goal check and the scripted user now work out once per goal gives what working it out
on every turn gave: the record checks' expected values (`goal._expected`), a step's arguments
filled in (the scripted user), and a turn stamped with its step without `dataclasses.replace`.
The old code is kept verbatim below and compared on arbitrary stores, and on a goal copied with
other facts (whose answers must be its own, not its original's)."""

from __future__ import annotations

import asyncio
import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simrun.scoring._transcript import Transcript, UserTurn
from simrun.scoring.checks._evidence import lookup
from simrun.scoring.checks._goal import goal_status
from simrun.scoring.checks._progress import same_value
from simrun.scoring.dataset._files import load_dataset
from simrun.simulator.users._scripted import ScriptedUser
from tests.conftest import ROOT

DEMO = load_dataset(ROOT / "personas", ROOT / "goals")
GOALS = [g for g in DEMO.goals if g.success.records]
# The same goals with other facts: a cache kept by goal object must not answer for these.
OTHERS = [g.model_copy(update={"facts": {k: (f"{v} (other)" if isinstance(v, str) else v)
                                         for k, v in g.facts.items()}}) for g in GOALS]
EMPTY = Transcript("p", "g", 1, 0, (), "")


def _old_records_part(goal, state):
    """The record checks of goal_status as they were at a6fe50d (what follows them is unchanged)."""
    records = state["records"]
    for i, check in enumerate(goal.success.records):
        expected = {path: goal.resolve(value) for path, value in check.match.items()}
        candidates = [records.get(check.id)] if check.id else list(records.values())
        if not any(rec is not None and all(same_value(lookup(rec, p), v) for p, v in expected.items())
                   for rec in candidates):
            said = ", ".join(f"{k} = {goal.resolve(v)}" for k, v in check.match.items())
            where = f"record {check.id}" if check.id else "a record"
            return False, f"success.records[{i}] does not hold: expected {where} with {said}"
    return None


def _fields_of(goal):
    """Records that hold some, all or none of what the goal's record checks expect."""
    values = []
    for check in goal.success.records:
        for path, value in check.match.items():
            values.append((check.id, path, goal.resolve(value)))
    return values


@st.composite
def stores(draw, goal):
    records = {}
    for rid, path, value in _fields_of(goal):
        rid = rid or draw(st.sampled_from(["trip:T-1", "trip:T-9"]))
        record = records.setdefault(rid, {"type": "trip"})
        kept = draw(st.sampled_from(["same", "other", "absent"]))
        if kept != "absent":
            leaf = value if kept == "same" else draw(st.one_of(st.integers(0, 3), st.text(max_size=4)))
            *parents, last = path.split(".")
            at = record
            for part in parents:
                at = at.setdefault(part, {})
            if isinstance(at, dict):
                at[last] = leaf.isoformat() if hasattr(leaf, "isoformat") and draw(st.booleans()) else leaf
    return {"records": records, "events": []}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_record_checks_answer_as_before(data):
    for goal in (*GOALS, *OTHERS):
        state = data.draw(stores(goal))
        old = _old_records_part(goal, state)
        new = goal_status(goal, EMPTY, state, lambda query, _: True)
        if old is not None:
            assert new == old
        else:
            assert not new[1].startswith("success.records")


def _text_facts(goal):
    return any(isinstance(goal.facts.get(str(v).strip("{}")), str)
               for c in goal.success.records for v in c.match.values())


def test_a_copied_goal_with_other_facts_gets_its_own_answers():
    original = next(g for g in GOALS if _text_facts(g))
    other = OTHERS[GOALS.index(original)]
    state = {"records": {}, "events": []}
    said = goal_status(original, EMPTY, state)[1], goal_status(other, EMPTY, state)[1]
    assert said[0] != said[1] and "(other)" in said[1] and "(other)" not in said[0]


def test_a_turn_is_stamped_with_its_step_as_replace_did():
    # The scripted user builds the stamped turn field by field: a field added to UserTurn must be
    # added there too (simulator/users/_scripted.py, next_turn), or this fails.
    assert [f.name for f in dataclasses.fields(UserTurn)] == ["kind", "text", "offer", "stop_reason", "meta", "step"]
    for goal in (*DEMO.goals, *OTHERS):
        talker = ScriptedUser().session(DEMO.personas[0], goal, 7, 0)
        turn = asyncio.run(talker.next_turn(()))
        assert turn == dataclasses.replace(turn, step=goal.step_id(talker.step_index))


def test_step_arguments_are_the_goals_own():
    """A goal copied with other facts, asked after its original, talks as a fresh copy of it does
    (nothing kept for the original is used for the copy)."""
    for goal, other in zip(GOALS, OTHERS):
        for persona in DEMO.personas:
            for g in (goal, other):
                asyncio.run(ScriptedUser().session(persona, g, 3, 0).next_turn(()))
            fresh = other.model_copy()
            assert (asyncio.run(ScriptedUser().session(persona, other, 3, 0).next_turn(())) ==
                    asyncio.run(ScriptedUser().session(persona, fresh, 3, 0).next_turn(())))


def test_a_conversation_with_no_fault_drawn_skips_the_fault_step_as_the_old_one_would():
    """The step returns the turn at once when no fault was drawn: what the old step did then too,
    since each of its `_fault` calls said no and changed nothing."""
    from simrun.simulator.users._scripted import SIMULATOR_FAULTS, ScriptedSession
    turn = UserTurn("message", "Move my trip to 12 March 2027.", meta={"step": 0})
    for faults in ({}, {name: 1.0 for name in SIMULATOR_FAULTS}, {"contradict_facts": 0.5, "role_leak": 0.3}):
        for goal in DEMO.goals:
            for seed in range(6):
                session = ScriptedUser(faults).session(DEMO.personas[0], goal, seed, 0)
                if session.faults_drawn:
                    continue        # the step runs as before (tests/test_simulator_faults.py)
                assert ScriptedSession._simulator_fault(session, turn) is turn
                assert not any(session._fault(name) for name in SIMULATOR_FAULTS)
                assert not session.faults_fired and not session.backend.planted
