"""Progress classes (CLASSES.md), each on hand-built transcripts: one with the failure, a
near-identical one without it, and the same one with the check's evidence left out.

The evidence left out must make the check UNVERIFIABLE, never clean.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from simrun._transcript import Transcript, TurnRecord, UserTurn
from simrun.scoring.checks._progress import dead_end, loop, not_understood, refused_offer, unanswered
from simrun.scoring.dataset._models import Goal
from tests.scoring.checks.builders import (
    RECORDS,
    G,
    P,
    ask,
    click,
    drop,
    event,
    goal,
    msg,
    offer,
    result,
    state,
    transcript,
    turns_of,
    with_state,
)

# --- dead_end --------------------------------------------------------------------------------

def dead_end_transcript(**second: Any) -> Transcript:
    return transcript(
        (msg("Add a bag to Lisbon offsite."), result("Which trip?", ask=ask(operation="add_bag"))),
        (msg("Lisbon offsite."), result(**{"reply": "Added one bag to Lisbon offsite.", **second})),
        (msg("Thanks."), result("Anything else?")),
    )


def test_dead_end_fires_on_the_turn_with_no_way_forward():
    check = dead_end(dead_end_transcript(), G, P)
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.checked_turns == 3 and check.unverifiable_turns == 0
    assert check.findings[0].evidence["reply"] == "Added one bag to Lisbon offsite."


@pytest.mark.parametrize("way", [
    {"ask": ask(operation="rebook")},
    {"next_steps": [offer("o-8", "rebook")]},
    {"card": {"id": "c-2", "operation": "confirm", "record": "trip:T-1", "actions": []}},
    {"reply": "Added one bag to Lisbon offsite. Anything else?  "},
])
def test_dead_end_is_silent_when_the_reply_offers_a_way_forward(way):
    t = dead_end_transcript(**way)
    check = dead_end(t, G, P)
    assert check.status == "clean"
    assert check.findings == () and check.checked_turns == 3


@pytest.mark.parametrize("field", ["ask", "next_steps", "card"])
def test_dead_end_is_unverifiable_when_a_way_forward_is_left_out(field):
    check = dead_end(drop(dead_end_transcript(), 2, field), G, P)
    assert check.status == "unverifiable"
    assert check.unverifiable_turns == 1 and check.checked_turns == 2


def test_dead_end_a_present_way_forward_is_enough_even_if_others_are_left_out():
    t = drop(dead_end_transcript(next_steps=[offer("o-8")]), 2, "ask", "card")
    assert dead_end(t, G, P).status == "clean"


def test_dead_end_skips_a_failed_turn():
    t = transcript((msg("Add a bag."), result("Which trip?")))
    t = dataclasses.replace(t, turns=(*t.turns, TurnRecord(2, msg("Lisbon"), None, None)))
    check = dead_end(t, G, P)
    assert check.status == "clean" and check.checked_turns == 1


# --- loop ------------------------------------------------------------------------------------

def loop_transcript(second_ask: dict | None) -> Transcript:
    return transcript(
        (msg("Rebook my outbound."), result("Which date?", ask=ask("a-1", arguments=("date", "segment")))),
        (msg("Soon, please."), result("Which date?", ask=second_ask)),
        (msg("The 14th of March."), result("Rebooked.", ask=None)),
    )


def test_loop_fires_on_the_same_ask_again_even_with_a_new_id_and_reordered_arguments():
    check = loop(loop_transcript(ask("a-2", arguments=("segment", "date"))), G, P)
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.findings[0].evidence["previous_ask"]["id"] == "a-1"
    assert check.checked_turns == 2     # turn 1 has nothing before it


def test_loop_fires_on_every_repeat_in_a_run():
    same = ask("a-1", arguments=("date",))
    t = transcript(*[(msg(f"message {i}"), result("Which date?", ask=same)) for i in range(1, 5)])
    check = loop(t, G, P)
    assert turns_of(check) == [2, 3, 4]


@pytest.mark.parametrize("second_ask", [
    ask("a-2", arguments=("date", "segment"), repeat_reason="14 March 2026 is in the past"),
    ask("a-2", arguments=("date", "segment"), record="trip:T-2"),
    ask("a-2", arguments=("date",)),
    ask("a-2", operation="cancel", arguments=("date", "segment")),
    None,
])
def test_loop_is_silent_when_the_ask_differs_or_says_why(second_ask):
    check = loop(loop_transcript(second_ask), G, P)
    assert check.status == "clean"
    assert check.checked_turns == 2


@pytest.mark.parametrize("index, unknown", [(1, 1), (2, 2)])   # turn 2's ask is also turn 3's previous
def test_loop_is_unverifiable_when_either_ask_is_left_out(index, unknown):
    t = drop(loop_transcript(ask("a-2", arguments=("segment", "date"))), index, "ask")
    check = loop(t, G, P)
    assert check.status == "unverifiable"
    assert check.findings == () and check.unverifiable_turns == unknown


# --- refused_offer ---------------------------------------------------------------------------

def offer_transcript(second_user: UserTurn, second: dict, second_state: dict | None) -> Transcript:
    return transcript(
        (msg("Add a bag to Lisbon offsite."),
         result("Add a bag to Lisbon offsite?", next_steps=[offer("o-8")],
                card={"id": "c-2", "operation": "confirm_rebook", "record": "trip:T-1",
                      "actions": [{"id": "o-9", "label": "Confirm"}]})),
        (second_user, second, second_state),
        (msg("OK."), result("Anything else?")),
    )


def test_refused_offer_fires_when_a_clicked_offer_is_refused():
    t = offer_transcript(click("o-8"), result("I could not add the bag."),
                         state(event("e-1", 2, status="refused", offer="o-8")))
    check = refused_offer(t, G, P)
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.findings[0].evidence["offer"] == "o-8"


def test_refused_offer_fires_on_a_card_action_taken_in_words():
    t = offer_transcript(msg("Yes, confirm it."), result("I could not rebook.", taken_offer="o-9"),
                         state(event("e-1", 2, status="refused", operation="confirm_rebook", offer="o-9")))
    check = refused_offer(t, G, P)
    assert check.status == "fired" and turns_of(check) == [2]
    assert check.findings[0].evidence["offer"] == "o-9"


@pytest.mark.parametrize("events", [
    [event("e-1", 2, status="committed", offer="o-8")],                            # carried out
    [event("e-1", 2, status="refused", offer="o-9")],                              # a different offer's
    [event("e-0", 1, status="refused", offer="o-8"), event("e-1", 2, status="committed", offer="o-8")],  # earlier
    [],
])
def test_refused_offer_is_silent_when_the_taken_offer_was_not_refused(events):
    t = offer_transcript(click("o-8"), result("Added."), state(*events))
    check = refused_offer(t, G, P)
    assert check.status == "clean"
    assert check.checked_turns == 1


def test_refused_offer_is_silent_when_no_offer_was_taken():
    t = offer_transcript(msg("Actually, rename it."), result("Renamed.", taken_offer=None),
                         state(event("e-1", 2, status="refused", operation="rename", offer=None)))
    assert refused_offer(t, G, P).status == "clean"


def test_refused_offer_is_unverifiable_without_the_store():
    t = offer_transcript(click("o-8"), result("I could not add the bag."), None)
    check = refused_offer(t, G, P)
    assert check.status == "unverifiable" and check.unverifiable_turns == 1


def test_refused_offer_is_unverifiable_when_taken_offer_is_left_out():
    t = offer_transcript(msg("Yes, confirm it."), result("I could not rebook.", taken_offer="o-9"),
                         state(event("e-1", 2, status="refused", offer="o-9")))
    check = refused_offer(drop(t, 2, "taken_offer"), G, P)
    assert check.status == "unverifiable"
    assert check.findings == ()


def test_refused_offer_is_known_when_the_click_is_among_the_offers_still_there():
    t = offer_transcript(click("o-8"), result("I could not add the bag."),
                         state(event("e-1", 2, status="refused", offer="o-8")))
    assert refused_offer(drop(t, 1, "card"), G, P).status == "fired"


def test_refused_offer_is_unverifiable_when_what_was_shown_is_unknown():
    t = offer_transcript(click("o-8"), result("I could not add the bag."),
                         state(event("e-1", 2, status="refused", offer="o-8")))
    check = refused_offer(drop(t, 1, "next_steps"), G, P)
    assert check.status == "unverifiable"
    assert check.findings == ()


# --- not_understood --------------------------------------------------------------------------

def understood_transcript(second: bool) -> Transcript:
    return transcript(
        (msg("Add a bag to Lisbon offsite."), result("Added.")),
        (msg("blorp zzz"), result("Sorry, I did not get that.", understood=second)),
        (msg("Thanks."), result("Anything else?")),
    )


def test_not_understood_fires_on_the_turn_the_runtime_could_not_read():
    check = not_understood(understood_transcript(False), G, P)
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.findings[0].evidence["message"] == "blorp zzz"


def test_not_understood_is_silent_when_every_turn_was_read():
    check = not_understood(understood_transcript(True), G, P)
    assert check.status == "clean" and check.checked_turns == 3


def test_not_understood_is_unverifiable_when_understood_is_left_out():
    check = not_understood(drop(understood_transcript(False), 2, "understood"), G, P)
    assert check.status == "unverifiable"
    assert check.unverifiable_turns == 1 and check.checked_turns == 2


# --- unanswered ------------------------------------------------------------------------------

def question_goal(**question: Any) -> Goal:
    q = {"id": "bags", "ask": "How many bags are on the Porto visit trip?", "match": "how many bags",
         "record": "trip:T-2", "field": "bags", **question}
    if "where" in question:
        q.pop("record")
    return goal(facts={"trip": "Porto visit"}, steps=[{"question": "bags"}], questions=[q])


def question_transcript(answer: str | None, store: dict | None = None) -> Transcript:
    return transcript(
        (msg("Hello."), result("Hello! How can I help?")),
        (msg("How many bags are on my Porto trip?"), result("I can't tell.", answer=answer),
         state() if store is None else store),
    )


def test_unanswered_fires_when_the_store_holds_the_answer():
    check = unanswered(question_transcript("unavailable"), question_goal(), P)
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.findings[0].evidence["held"] == [{"question": "bags", "value": 2}]


def test_unanswered_finds_the_record_by_where_and_a_dotted_path():
    g = question_goal(where={"name": "{trip}"}, field="segments.outbound.date")
    check = unanswered(question_transcript("unavailable"), g, P)
    assert turns_of(check) == [2]
    assert check.findings[0].evidence["held"][0]["value"] == "2027-02-02"


@pytest.mark.parametrize("answer", ["answered", None])
def test_unanswered_is_silent_when_the_reply_did_not_say_unavailable(answer):
    check = unanswered(question_transcript(answer), question_goal(), P)
    assert check.status == "clean" and check.checked_turns == 1


def test_unanswered_is_silent_when_the_store_does_not_hold_the_answer():
    records = {**RECORDS, "trip:T-2": {k: v for k, v in RECORDS["trip:T-2"].items() if k != "bags"}}
    check = unanswered(question_transcript("unavailable", state(records=records)), question_goal(), P)
    assert check.status == "clean" and check.checked_turns == 1


def test_unanswered_ignores_messages_that_ask_no_goal_question():
    t = transcript((msg("Hello."), result("Hi.", answer="unavailable")))
    check = unanswered(t, question_goal(), P)
    assert check.status == "clean" and check.checked_turns == 0


def test_unanswered_is_unverifiable_when_answer_is_left_out():
    check = unanswered(drop(question_transcript("unavailable"), 2, "answer"), question_goal(), P)
    assert check.status == "unverifiable" and check.unverifiable_turns == 1


def test_unanswered_is_unverifiable_without_the_store():
    t = with_state(question_transcript("unavailable"), 2, None)
    check = unanswered(t, question_goal(), P)
    assert check.status == "unverifiable"
    assert check.findings == () and check.unverifiable_turns == 1
