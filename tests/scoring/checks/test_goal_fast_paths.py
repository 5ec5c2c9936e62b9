"""What the goal check and the scripted user work out once per goal (`per_goal`, kept by the
goal's value) is each goal's own: the record checks decide as their rule says on arbitrary stores
(a record, the one named or any, holds every field the check names, with the goal's facts filled
in), a goal copied with other facts gets its own answers, not its original's, and a step's
arguments are the goal's own. A turn is stamped with its step field by field."""

from __future__ import annotations

import asyncio
import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simrun._transcript import Transcript, UserTurn
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


def _rule(goal, state):
    """The record checks' rule, read off the goal file (CLASSES.md, goals.md): each check is met by
    a record (the one it names by id, else any) that holds every field it names, `{fact}` filled
    in; the first check not met is named, with what it expected. None when every check is met."""
    for i, check in enumerate(goal.success.records):
        wanted = {path: goal.resolve(value) for path, value in check.match.items()}
        candidates = [state["records"].get(check.id)] if check.id else list(state["records"].values())
        if not any(record is not None and all(same_value(lookup(record, path), value) for path, value in wanted.items())
                   for record in candidates):
            said = ", ".join(f"{path} = {value}" for path, value in wanted.items())
            return False, (f"success.records[{i}] does not hold: expected "
                           f"{f'record {check.id}' if check.id else 'a record'} with {said}")
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
def test_record_checks_decide_by_their_rule(data):
    for goal in (*GOALS, *OTHERS):
        state = data.draw(stores(goal))
        ruled = _rule(goal, state)
        for _ in range(2):                   # worked out, then from what was kept for the goal
            found = goal_status(goal, EMPTY, state, lambda query, _: True)
            if ruled is not None:
                assert found == ruled
            else:
                assert not found[1].startswith("success.records")


def _text_facts(goal):
    return any(isinstance(goal.facts.get(str(v).strip("{}")), str)
               for c in goal.success.records for v in c.match.values())


def test_a_copied_goal_with_other_facts_gets_its_own_answers():
    original = next(g for g in GOALS if _text_facts(g))
    other = OTHERS[GOALS.index(original)]
    state = {"records": {}, "events": []}
    said = goal_status(original, EMPTY, state)[1], goal_status(other, EMPTY, state)[1]
    assert said[0] != said[1] and "(other)" in said[1] and "(other)" not in said[0]


def test_a_turn_is_stamped_with_its_step_field_by_field():
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


def test_a_conversation_with_no_fault_drawn_skips_the_fault_step():
    """The step returns the turn at once when no fault was drawn: each of its `_fault` calls
    would say no and change nothing."""
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
