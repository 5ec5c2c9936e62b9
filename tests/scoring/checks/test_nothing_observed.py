"""Nothing observed decides nothing (issue 38, rule 1): a conversation whose runtime answered no
turn is UNVERIFIABLE for every class and for goal reached, with its reason; what was observed
(its simulated user's own fault) stays fired; one completed turn is enough to decide."""

from __future__ import annotations

import dataclasses

import pytest

from simrun._classes import ALL_CLASSES
from simrun._transcript import Transcript, TurnRecord
from simrun.scoring.checks import score
from tests.scoring.checks.builders import G, P, msg, result, state, transcript


def crashed(*completed: tuple, end: str = "runtime_error") -> Transcript:
    """`completed` turns answered, then one the runtime failed (no result), and the store it left."""
    t = transcript(*completed, end=end)
    failed = TurnRecord(len(t.turns) + 1, msg("Add a bag to Lisbon offsite."), None, state())
    return dataclasses.replace(t, turns=(*t.turns, failed), final_state=state(),
                               error={"kind": "exception", "traceback": "RuntimeError: injected crash in turn 1"})


@pytest.mark.parametrize("end", ["runtime_error", "provider_error", "simulator_error"])
def test_a_conversation_that_failed_on_its_first_turn_decides_no_class_and_no_goal(end):
    card = score(crashed(end=end), G, P)
    assert set(card.checks) == set(ALL_CLASSES)
    undecided = {cls for cls, check in card.checks.items() if check.status == "unverifiable"}
    assert undecided == set(ALL_CLASSES), {cls: c.status for cls, c in card.checks.items()}
    for check in card.checks.values():
        assert check.checked_turns == 0 and check.reason.startswith("no turn completed: ")
        assert f"({end})" in check.reason
    assert card.goal_reached is None
    assert card.goal_detail.startswith("UNVERIFIABLE: no turn completed")


def test_a_conversation_with_no_turn_sent_decides_nothing_either():
    card = score(dataclasses.replace(transcript(end="simulator_error"), final_state=state()), G, P)
    assert card.goal_reached is None and "before a turn was sent" in card.goal_detail
    assert all(c.status == "unverifiable" for c in card.checks.values())


def test_one_completed_turn_decides_what_it_shows():
    card = score(crashed((msg("Add a bag to Lisbon offsite."), result("Noted."))), G, P)
    assert card.checks["dead_end"].status == "fired"          # the answered turn offered no way forward
    assert card.checks["dead_end"].checked_turns == 1 and card.checks["wrong_record"].status == "clean"
    assert card.goal_reached is True and "no turn completed" not in card.goal_detail     # decided on its store


def test_what_did_fire_stays_fired():
    """The user's own fault is observed without a runtime answer (an empty message): it stays
    simulator_error, with its finding; the classes it says nothing of are UNVERIFIABLE."""
    t = crashed(end="simulator_error")
    t = dataclasses.replace(t, turns=(dataclasses.replace(t.turns[0], user=msg("")),))
    card = score(t, G, P)
    assert card.checks["simulator_error"].status == "fired"
    assert card.checks["simulator_error"].findings[0].evidence["kind"] == "empty_message"
    assert card.checks["wrong_record"].status == card.checks["dead_end"].status == "unverifiable"
    assert card.end == "simulator_error" and card.goal_reached is None


def test_a_check_that_could_not_run_because_the_runtime_was_gone_says_so():
    """Issue 38, rule 8: a question answered as the server died (no store read after) is not
    'the runtime exposes no store'; nor is the user's claim of success."""
    from simrun.scoring.checks._progress import unanswered
    from simrun.scoring.checks._simulated_user import simulator_error
    from simrun.scoring.dataset._models import Goal
    from tests.scoring.checks.builders import goal

    asking = Goal.model_validate({**goal().model_dump(exclude_none=True), "questions": [
        {"id": "bags", "ask": "How many bags?", "match": "how many bags", "record": "trip:T-1", "field": "bags"}]})
    t = transcript((msg("How many bags are on the trip?"), result("Let me check.", answer="unavailable"), None),
                   end="runtime_error")
    died = {"kind": "exited", "turn": 1, "read_after": "nothing",
            "message": "turn: the server exited (status 3) while 2 conversations were in flight; this was one of them"}
    gone = dataclasses.replace(t, error=died)
    assert unanswered(t, asking, P).reason == "the runtime exposes no store to look the answer up in"
    said = unanswered(gone, asking, P).reason
    assert said.startswith("no store was read: the runtime was gone at turn 1 (turn: the server exited"), said
    stopped = dataclasses.replace(gone, stop=dataclasses.replace(msg(""), kind="stop", stop_reason="done"))
    claim = simulator_error(stopped, asking, P, None).reason
    assert "no store was read to check the claim against: the runtime was gone at turn 1" in claim, claim
