"""The loop checks a goal with SQL inline when no query has to run, and gives the answer the
check in a worker thread gave: on every store the demo's conversations reach (with the cache of
query answers cold and warm), and on a store whose query never ran (then it hops, as before)."""

from __future__ import annotations

import asyncio

import pytest

import simrun.simulator._conversation as conversation
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.checks._goal import goal_status
from simrun.scoring.dataset._goal_sql import NotAnswered, forget_answers, known_answer
from simrun.simulator._runner import matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser


def _converse_with(name: str, replacement, cells) -> None:
    """Run the cells' conversations with the loop's `name` replaced (by a wrapper of the real one)."""
    real = getattr(conversation, name)

    async def go():
        for cell in cells:
            await conversation.converse(cell, ScriptedUser(), PythonRuntime(TripDesk()))

    setattr(conversation, name, replacement(real))
    try:
        asyncio.run(go())
    finally:
        setattr(conversation, name, real)


@pytest.fixture(scope="module")
def checks(demo):
    """Every (goal, transcript so far, store) the loop checked, over SQL goals of the demo."""
    seen = []

    def recording(real):
        async def record(goal, transcript, state):
            seen.append((goal, transcript, state))
            return await real(goal, transcript, state)
        return record

    _converse_with("_reached", recording, [c for c in matrix(demo, 2, seed=3) if c.goal.success.sql])
    assert len(seen) > 20 and len({g.id for g, _, _ in seen}) >= 2
    return seen


def _hops(monkeypatch) -> list:
    hops = []
    real = asyncio.to_thread

    async def counting(fn, *args):
        hops.append(fn)
        return await real(fn, *args)

    monkeypatch.setattr(conversation.asyncio, "to_thread", counting)
    return hops


@pytest.mark.parametrize("warm", [False, True])
def test_the_inline_check_answers_as_the_thread_did(checks, warm, monkeypatch):
    hops = _hops(monkeypatch)
    for goal, transcript, state in checks:
        if not warm:
            forget_answers()
        old = goal_status(goal, transcript, state)     # the old path: sql_holds, which may run it
        if not warm:
            forget_answers()
        assert asyncio.run(conversation._reached(goal, transcript, state)) == old
    if warm:
        assert hops == []       # every answer known: nothing left the loop's thread


def test_a_query_not_yet_run_is_run_off_the_loop(checks, monkeypatch):
    def reaches_sql(goal, transcript, state):
        asked = []
        goal_status(goal, transcript, state, lambda query, _: asked.append(query) or True)
        return asked

    goal, transcript, state = next(c for c in checks if reaches_sql(*c))
    forget_answers()
    with pytest.raises(NotAnswered):
        known_answer(reaches_sql(goal, transcript, state)[0], state)
    hops = _hops(monkeypatch)
    first = asyncio.run(conversation._reached(goal, transcript, state))
    assert hops == [goal_status]             # the query ran in a worker thread
    assert asyncio.run(conversation._reached(goal, transcript, state)) == first
    assert hops == [goal_status]             # and its answer, known now, is read inline
    forget_answers()
    assert first == goal_status(goal, transcript, state)


def test_the_empty_transcript_stands_in_only_where_it_changes_nothing(demo):
    """For a goal without answered questions the loop checks the goal with one empty transcript:
    on every store the demo reaches, the answer is the one the conversation so far gave."""
    from simrun._transcript import Transcript

    pairs = []

    def both(real):
        def partial(cell, turns, initial):
            made = real(cell, turns, initial)
            full = Transcript(cell.persona.id, cell.goal.id, cell.seed, cell.repetition, tuple(turns), "",
                              initial_state=initial)
            pairs.append((cell.goal, made, full, turns[-1].state))
            return made
        return partial

    _converse_with("_partial", both, matrix(demo, 1, seed=5))
    stood_in = [(g, m, f, s) for g, m, f, s in pairs if m is not f and not m.turns]
    assert stood_in and any(m.turns for _, m, _, _ in pairs)       # both kinds of goal were seen
    for goal, made, full, state in pairs:
        assert goal_status(goal, made, state) == goal_status(goal, full, state)


def test_a_large_store_is_checked_off_the_loop_even_when_its_answer_is_known(checks, monkeypatch):
    """Looking an answer up encodes and hashes the whole store: for a store past OFF_LOOP_ITEMS
    that is done in a worker thread, as the scoring of a large transcript is, answer known or not."""
    goal, transcript, state = checks[-1]
    events = list(state.get("events") or [])
    padding = [{"id": f"pad-{i}", "turn": 0, "operation": "noop", "status": "refused"}
               for i in range(conversation.OFF_LOOP_ITEMS + 1)]
    large = {**state, "events": events + padding}
    answers = [asyncio.run(conversation._reached(goal, transcript, s)) for s in (large, state)]   # cached now
    hops = _hops(monkeypatch)
    assert (asyncio.run(conversation._reached(goal, transcript, large))
            == answers[0] == goal_status(goal, transcript, large))
    assert hops == [goal_status]
    assert asyncio.run(conversation._reached(goal, transcript, state)) == answers[1]
    assert hops == [goal_status]             # the small store, its answer known: inline
