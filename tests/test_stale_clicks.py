"""stale_click on both reference runtimes, with stale clicks the scripted user never makes: a
user that, while an ask is pending, presses a button from an older message. The runtimes honour
expired buttons (their stale_click faults at rate 1): at once, through an ask that commits turns
later with an event that names no offer (TripDesk's stale_click_ask, LibDesk's
stale_click_unnamed), or by going on with the draft pending. The scorer must agree with each
runtime's truth log exactly, conversation by conversation."""

from __future__ import annotations

import asyncio

import pytest

from simrun._transcript import UserTurn
from simrun.examples.libdesk import LibDesk
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.checks._evidence import shown
from simrun.simulator._conversation import converse
from simrun.simulator._runner import matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser

pytestmark = pytest.mark.xdist_group("stale-clicks")


DOABLE = ("add_bag", "remove_bag", "renew", "move_pickup", "cancel_hold")


class PendingClicker(ScriptedUser):
    """The scripted user, except that once per conversation, when the last reply asks something
    and an older reply showed buttons, it presses one of those instead of answering."""

    def session(self, persona, goal, seed, repetition):
        inner = super().session(persona, goal, seed, repetition)
        return _PendingSession(inner, seed)


class _PendingSession:
    def __init__(self, inner, seed: int) -> None:
        self.inner, self.seed, self.pressed = inner, seed, False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def next_turn(self, turns):
        last = turns[-1].result if turns else None
        if not self.pressed and isinstance(last, dict) and isinstance(last.get("ask"), dict):
            now = set(shown(last).offers)
            # Not a button taken before: pressing that again while its own ask is pending looks
            # the same whether the runtime declines or honours it (the event names that button
            # either way), and the scorer holds the latest take of an offer to be the one in force.
            taken = {t.user.offer for t in turns} | {(t.result or {}).get("taken_offer") for t in turns}
            pending = last["ask"].get("operation")
            older = [(o, what.get("operation")) for t in turns[:-1] for o, what in shown(t.result).offers.items()
                     if o not in now and o not in taken]
            # A button for something else than what is asked (the same would be an answer of sorts),
            # and one that carries all it needs or asks one plain thing: the runtime can honour it.
            other = [o for o, op in older if op != pending and op in DOABLE]
            if other:
                self.pressed = True
                return UserTurn("click", offer=other[-1 - (self.seed % min(2, len(other)))], meta={"stale": True})
        return await self.inner.next_turn(turns)


def run(runtime, dataset, repetitions: int = 2):
    user, adapter = PendingClicker(), PythonRuntime(runtime)

    async def go():
        return [await converse(cell, user, adapter) for cell in matrix(dataset, repetitions, 5)]

    return asyncio.run(go())


def truth(runtime) -> set[tuple[str, str, int]]:
    """The conversations where the runtime knows it carried out an expired button."""
    if isinstance(runtime, TripDesk):
        return runtime.fault_log.keys("stale_click", "manifested")
    return runtime.truth.conversations("stale_click")


# (runtime, dataset, faults, how many pending-ask stale clicks must be carried out). TripDesk
# carries out an expired bag button at once; an expired button honoured through an ask commits
# only if the user answers that ask, which this user, still pursuing its own ask, does not: those
# runs show the runtime's abandoned asks are not blamed.
@pytest.mark.parametrize("runtime_class, dataset, faults, carried_out", [
    (TripDesk, "demo", {"stale_click": 1.0, "stale_click_ask": 1.0}, 3),
    (TripDesk, "demo", {"stale_click_ask": 1.0}, 0),
    (LibDesk, "library", {"stale_click": 1.0, "stale_click_unnamed": 1.0}, 0),
    (LibDesk, "library", {"stale_click_unnamed": 1.0}, 0),
], ids=["tripdesk", "tripdesk-ask", "libdesk", "libdesk-unnamed"])
def test_stale_clicks_while_an_ask_is_pending_are_judged_exactly(request, runtime_class, dataset, faults,
                                                                carried_out):
    runtime = runtime_class(faults=faults, fault_seed=3)
    conversations = run(runtime, request.getfixturevalue(dataset))
    key = lambda c: (c.cell.persona.id, c.cell.goal.id, c.cell.seed)   # noqa: E731
    fired = {key(c) for c in conversations if c.scorecard.checks["stale_click"].findings}
    assert fired == truth(runtime), (sorted(fired - truth(runtime)), sorted(truth(runtime) - fired))
    # The cases this test is for were made: expired buttons pressed while an ask was pending,
    # some carried out (and reported), some declined (and not).
    pending = [(c, t) for c in conversations for t in c.transcript.turns
               if t.user.kind == "click" and t.index >= 2
               and isinstance((c.transcript.turns[t.index - 2].result or {}).get("ask"), dict)
               and t.user.offer not in shown(c.transcript.turns[t.index - 2].result).offers]
    caught = [(c, t) for c, t in pending
              if any(f.evidence["clicked_at"] == t.index for f in c.scorecard.checks["stale_click"].findings)]
    assert len(pending) >= 5 and len(caught) >= carried_out, (len(pending), len(caught))
    assert not any(c.scorecard.checks["simulator_error"].findings for c in conversations)
