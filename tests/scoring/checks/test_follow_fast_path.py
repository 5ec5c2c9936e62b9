"""`follow` keeps the offers each turn showed, and looks an offer up backwards when asked, rather
than indexing every offer shown up front. What it answers is checked here against what each take
means, read off the transcript turn by turn, on random conversations of clicks, taken offers and
shown offers: a click takes its offer; a message takes the offer its result says it took
(`taken_offer`), unless that offer was known not to be on show; a message whose result does not
say is unknown; each take carries the operation and record its offer was last shown with before
its turn."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simrun._transcript import Transcript, TurnRecord
from simrun.scoring.checks._evidence import MISSING, get, shown, shown_before
from simrun.scoring.checks._offers import Take, follow
from tests.security.test_properties import ids, turn_results, user_turns


def last_shown(transcript, offer, turn):
    """How `offer` was shown by the latest turn before `turn` that showed it, or None."""
    return next((shown(t.result).offers[offer] for t in reversed(transcript.turns)
                 if t.index < turn and offer in shown(t.result).offers), None)


def take_of(transcript, turn):
    """(the take of this turn, or None; whether it is unknown), as the turn itself says."""
    offers = shown_before(transcript, turn)
    if turn.user.kind == "click" and turn.user.offer is not None:
        offer = turn.user.offer
    elif turn.result is not None and turn.user.kind == "message":
        offer = get(turn.result, "taken_offer")
        if offer is MISSING:
            return None, True
        if not offer or offers.has(offer) is False:
            return None, False
    else:
        return None, False
    how = last_shown(transcript, offer, turn.index) or {}
    return Take(turn.index, offer, offers.has(offer), how.get("operation"), how.get("record")), False


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(user_turns, st.one_of(st.none(), turn_results)), max_size=6))
def test_follow_finds_each_take_the_turns_show(pairs):
    turns = tuple(TurnRecord(i, user, result, None) for i, (user, result) in enumerate(pairs, start=1))
    transcript = Transcript("p", "g", 1, 0, turns, "turn_cap")
    try:
        expected = {turn.index: take_of(transcript, turn) for turn in turns}
        for turn in turns:
            shown(turn.result)                      # every turn's offers are read
    except Exception as exc:     # a shape no check can read (next_steps: 1): follow fails on it too
        try:
            follow(transcript)
        except Exception as new:
            assert type(new) is type(exc)
            return
        raise AssertionError(f"reading the turns raised {exc!r}, follow did not") from exc
    takes = follow(transcript)
    assert takes.by_turn == {index: take for index, (take, _) in expected.items() if take is not None}
    assert takes.unknown == {index for index, (_, unknown) in expected.items() if unknown}
    for offer in (*ids.elements, "never-shown"):
        for turn in range(1, len(turns) + 2):
            assert takes.as_shown(offer, turn) == last_shown(transcript, offer, turn), (offer, turn)


def test_the_scorer_works_the_takes_out_once_and_gives_them_to_each_check(demo, monkeypatch):
    """No cache keyed on a transcript's identity: the scorer follows the offers of the transcript
    it scores once, and hands the answer to the three checks that read it."""
    import asyncio

    from simrun.examples.tripdesk import TripDesk
    from simrun.scoring.checks import _guarantees, _progress, _scorer, _stale
    from simrun.simulator._conversation import Cell, converse
    from simrun.simulator.adapters._python import PythonRuntime
    from simrun.simulator.users._scripted import ScriptedUser

    c = asyncio.run(converse(Cell(demo.persona("plain-paula"), demo.goal("new-trip-full"), 0, 5), ScriptedUser(),
                             PythonRuntime(TripDesk())))
    assert any(t.user.kind == "click" for t in c.transcript.turns)      # offers taken: something to follow
    followed = []

    def once(transcript):
        followed.append(transcript)
        return follow(transcript)

    def again(transcript):
        raise AssertionError("the takes were worked out again")

    monkeypatch.setattr(_scorer, "follow", once)
    for module in (_guarantees, _progress, _stale):
        monkeypatch.setattr(module, "follow", again)
    card = _scorer.score(c.transcript, c.cell.goal, c.cell.persona)
    assert followed == [c.transcript]
    assert card == c.scorecard          # as the loop scored it
