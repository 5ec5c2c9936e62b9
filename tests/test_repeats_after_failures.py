"""A repeat after the runtime's own failure is the runtime's, on both reference runtimes: a user
that says its last message again whenever the reply to it failed (an unanswered, loop, dead_end,
not_understood or card_not_actionable finding on that turn), against each failure fault at a
high rate, is never blamed for repeating, in the conversation loop or by the scorer; the same
user repeating after replies that did not fail is."""

from __future__ import annotations

import asyncio

import pytest

from simrun._transcript import Transcript, UserTurn
from simrun.examples.libdesk import LibDesk
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.checks._simulated_user import RUNTIME_FAILURES
from simrun.simulator._conversation import converse
from simrun.simulator._runner import matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser

pytestmark = pytest.mark.xdist_group("repeats-after-failures")


class Parrot(ScriptedUser):
    """The scripted user, except that after a reply that failed (or, `always`, after any reply
    to a message) it says its last message again, up to three times a conversation."""

    def __init__(self, always: bool = False) -> None:
        super().__init__()
        self.always = always

    def session(self, persona, goal, seed, repetition):
        return _ParrotSession(super().session(persona, goal, seed, repetition), goal, persona, self.always)


class _ParrotSession:
    def __init__(self, inner, goal, persona, always: bool) -> None:
        self.inner, self.goal, self.persona, self.always = inner, goal, persona, always
        self.repeats = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _failed(self, turns) -> bool:
        so_far = Transcript(self.persona.id, self.goal.id, 0, 0, tuple(turns), "")
        last = turns[-1].index
        return any(f.turn == last for check in RUNTIME_FAILURES
                   for f in check(so_far, self.goal, self.persona).findings)

    async def next_turn(self, turns):
        last = turns[-1] if turns else None
        if last is not None and last.user.kind == "message" and last.user.text and self.repeats < 3 \
                and (self.always or self._failed(turns)):
            self.repeats += 1
            return UserTurn("message", last.user.text, step=last.user.step, meta={"parroted": True})
        return await self.inner.next_turn(turns)


def run(runtime, dataset, user, repetitions: int = 1):
    adapter = PythonRuntime(runtime)

    async def go():
        return [await converse(cell, user, adapter) for cell in matrix(dataset, repetitions, 9)]

    return asyncio.run(go())


def thrice(conversation) -> bool:
    texts = [t.user.text if t.user.kind == "message" else None for t in conversation.transcript.turns]
    return any(a is not None and a == b == c for a, b, c in zip(texts, texts[1:], texts[2:]))


FAILURES = {TripDesk: ("demo", ("not_understood", "unanswered", "dead_end", "loop", "card_not_actionable")),
            LibDesk: ("library", ("not_understood", "unanswered", "dead_end", "loop", "card_not_actionable"))}


@pytest.mark.parametrize("runtime_class", [TripDesk, LibDesk], ids=["tripdesk", "libdesk"])
def test_repeating_after_the_runtimes_failures_is_never_the_users(request, runtime_class):
    dataset, faults = FAILURES[runtime_class]
    runtime = runtime_class(faults={name: 0.6 for name in faults}, fault_seed=5)
    conversations = run(runtime, request.getfixturevalue(dataset), Parrot())
    made = [c for c in conversations if thrice(c)]
    assert len(made) >= 5, len(made)
    blamed = [c.cell.id for c in conversations
              if any(f.evidence.get("kind") == "repeated" for f in c.scorecard.checks["simulator_error"].findings)]
    assert blamed == []
    assert not any(c.scorecard.end == "simulator_error" for c in made)


@pytest.mark.parametrize("runtime_class", [TripDesk, LibDesk], ids=["tripdesk", "libdesk"])
def test_repeating_after_replies_that_did_not_fail_is_the_users(request, runtime_class):
    dataset, _ = FAILURES[runtime_class]
    conversations = run(runtime_class(), request.getfixturevalue(dataset), Parrot(always=True))
    stuck = [c for c in conversations if c.scorecard.end == "simulator_error"]
    assert len(stuck) >= 5
    assert all(f.evidence["kind"] == "repeated" for c in stuck for f in c.scorecard.checks["simulator_error"].findings)
