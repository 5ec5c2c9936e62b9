"""`follow` keeps the offers each turn showed, and looks an offer up backwards when asked, rather
than indexing every offer shown up front; it answers exactly as the index did (the old code,
kept verbatim below), on random conversations of clicks, taken offers and shown offers."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simrun.scoring._transcript import Transcript, TurnRecord
from simrun.scoring.checks._evidence import MISSING, get, shown, shown_before
from simrun.scoring.checks._offers import Take, _follow
from tests.security.test_properties import ids, turn_results, user_turns

# --- the old code, as it was at dcf8bbb ----------------------------------------------------------

def _old_follow(transcript):
    by_turn: dict[int, Take] = {}
    unknown: set[int] = set()
    showings: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for turn in transcript.turns:
        offers = shown_before(transcript, turn)
        if turn.user.kind == "click" and turn.user.offer is not None:
            by_turn[turn.index] = _old_take(turn.index, turn.user.offer, offers.has(turn.user.offer), showings)
        elif turn.result is not None and turn.user.kind == "message":
            taken = get(turn.result, "taken_offer")
            if taken is MISSING:
                unknown.add(turn.index)
            elif taken and offers.has(taken) is not False:
                by_turn[turn.index] = _old_take(turn.index, taken, offers.has(taken), showings)
        for oid, what in shown(turn.result).offers.items():
            showings.setdefault(oid, []).append((turn.index, what))
    return by_turn, frozenset(unknown), showings


def _old_take(turn, offer, fresh, showings):
    seen = showings.get(offer)
    what = seen[-1][1] if seen else {}
    return Take(turn, offer, fresh, what.get("operation"), what.get("record"))


def _old_as_shown(showings, offer, turn):
    found = [what for at, what in showings.get(offer, []) if at < turn]
    return found[-1] if found else None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(user_turns, st.one_of(st.none(), turn_results)), max_size=6))
def test_follow_answers_as_the_index_did(pairs):
    turns = tuple(TurnRecord(i, user, result, None) for i, (user, result) in enumerate(pairs, start=1))
    transcript = Transcript("p", "g", 1, 0, turns, "turn_cap")
    try:
        by_turn, unknown, showings = _old_follow(transcript)
    except Exception as exc:     # a shape no check can read (next_steps: 1): the same failure
        try:
            _follow(transcript)
        except Exception as new:
            assert type(new) is type(exc)
            return
        raise AssertionError(f"the old code raised {exc!r}, the new did not") from exc
    takes = _follow(transcript)
    assert (takes.by_turn, takes.unknown) == (by_turn, unknown)
    for offer in (*ids.elements, "never-shown"):
        for turn in range(1, len(turns) + 2):
            assert takes.as_shown(offer, turn) == _old_as_shown(showings, offer, turn), (offer, turn)
