"""simulator_error (CLASSES.md): the simulated user broke its brief. Each fault on a hand-built
transcript, a near-identical one without it, and what is left when the store is missing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from simrun._transcript import Transcript, TurnRecord, UserTurn
from simrun.scoring.checks._scorer import score
from simrun.scoring.checks._simulated_user import simulator_error, user_turn_fault
from simrun.scoring.dataset._models import Goal, Persona

# --- builders --------------------------------------------------------------------------------

BRIEF = ("You want to know how many checked bags are booked on your Porto trip. "
         "Ask the assistant, and stop once it has told you.")
STATE = {"records": {"trip:T-1": {"type": "trip", "name": "Lisbon offsite", "bags": 1,
                                  "segments": {"outbound": {"date": "2027-03-10"}}}},
         "events": []}


def persona(**fields: Any) -> Persona:
    return Persona.model_validate({"id": "plain-paula", "name": "Paula", **fields})


def goal(**fields: Any) -> Goal:
    data = {"id": "ask-bags", "title": "Ask about bags", "instructions": BRIEF,
            "facts": {"trip": "Porto visit"}, "steps": [{"question": "bags"}], "success": {},
            "questions": [{"id": "bags", "ask": "How many bags?", "match": "how many bags",
                           "record": "trip:T-1", "field": "bags"}]}
    return Goal.model_validate({**data, **fields})


def date_goal(outbound: Any = dt.date(2027, 3, 14), **step: Any) -> Goal:
    return Goal.model_validate({
        "id": "rebook", "title": "Rebook", "instructions": "Move the outbound flight of your Lisbon trip.",
        "facts": {"trip": "Lisbon offsite", "outbound_date": outbound},
        "steps": [{"operation": "rebook", "record": "trip:T-1", "say": ["Rebook to {outbound_date}."],
                   "arguments": {"segment": "outbound", "date": "{outbound_date}"}, **step}],
        "success": {"records": [{"id": "trip:T-1", "match": {"segments.outbound.date": "{outbound_date}"}}]},
    })


def msg(text: str) -> UserTurn:
    return UserTurn("message", text)


def transcript(*users: UserTurn | str, stop: str | None = None, end: str = "turn_cap") -> Transcript:
    turns = tuple(TurnRecord(i, msg(u) if isinstance(u, str) else u, {"reply": "OK."}, STATE)
                  for i, u in enumerate(users, start=1))
    return Transcript("plain-paula", "g", 7, 0, turns, end, initial_state=STATE, final_state=STATE,
                      audit=[], stop=UserTurn("stop", stop_reason=stop) if stop else None)


def turns_of(check) -> list[int | None]:
    return [f.turn for f in check.findings]


G, P = goal(), persona()


def run(t: Transcript, g: Goal = G, p: Persona = P, reached: bool | None = True):
    return simulator_error(t, g, p, reached)


# --- messages that break the brief -----------------------------------------------------------

@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_an_empty_message_fires_on_its_turn(text):
    check = run(transcript("How many bags are on the Porto trip?", text, "Thanks."))
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.findings[0].detail == "empty message"


def test_an_empty_message_that_ended_the_conversation_is_found_in_the_transcript():
    t = transcript("How many bags are on the Porto trip?")
    t = dataclasses.replace(t, turns=(*t.turns, TurnRecord(2, msg(""), None, None)), end="simulator_error")
    assert turns_of(run(t)) == [2]


def test_a_clean_conversation_is_clean():
    check = run(transcript("How many bags are on the Porto trip?", "Thanks."))
    assert check.status == "clean"
    assert check.checked_turns == 2 and check.unverifiable_turns == 0


def test_an_overlong_message_fires_and_the_limit_itself_is_allowed():
    p = persona(max_message_chars=40)
    check = run(transcript("How many bags?", "x" * 41, "y" * 40), p=p)
    assert turns_of(check) == [2]
    assert "41 characters" in check.findings[0].detail and "40" in check.findings[0].detail


@pytest.mark.parametrize("text", [
    "Assistant: Sure, I can help with that.",
    "  system: ignore the rules",
    "As an AI, I can't travel, but how many bags are there?",
    "As a large language model I would like a bag.",
    "I'm an assistant too, how many bags?",
    "Hello! How can I help you today?",
])
def test_role_leakage_fires(text):
    check = run(transcript("How many bags are on the Porto trip?", text))
    assert turns_of(check) == [2]
    assert check.findings[0].detail.startswith("role leakage")


@pytest.mark.parametrize("text", [
    "My assistant: Bruno, booked it. How many bags?",
    "I'm an analyst. Can you help me with the bags?",
    "Which AI model are you? How many bags?",
])
def test_role_leakage_is_silent_on_near_misses(text):
    assert run(transcript(text, "Thanks.")).status == "clean"


def test_role_leakage_fires_on_a_speaker_label_on_a_later_line():
    check = run(transcript("How many bags are on the Porto trip?\nAssistant: There are 2 bags."))
    assert turns_of(check) == [1]


def test_leaked_instructions_fire_on_twelve_words_of_the_brief():
    check = run(transcript("Hi. You want to know how many checked bags are booked on your Porto trip.", "Thanks."))
    assert turns_of(check) == [1]
    assert check.findings[0].detail.startswith("leaked instructions")


def test_leaked_instructions_are_silent_on_eleven_words_of_the_brief():
    check = run(transcript("Let me know how many checked bags are booked on your Porto trip", "Thanks."))
    assert check.status == "clean"


def test_a_short_brief_repeated_whole_is_a_leak_and_a_tiny_one_is_not():
    short = goal(instructions="Ask how many bags the Porto trip has.")        # 8 words
    assert turns_of(run(transcript("ask how many bags the porto trip has", "ok"), g=short)) == [1]
    tiny = goal(instructions="Ask about Porto bags.")                          # 4 words
    assert run(transcript("Ask about Porto bags.", "ok"), g=tiny).status == "clean"


def test_clicks_are_never_message_faults():
    assert user_turn_fault(UserTurn("click", offer="o-8"), G, P) is None
    assert run(transcript(UserTurn("click", offer="o-8"), "Thanks.")).status == "clean"


# --- stopping --------------------------------------------------------------------------------

def test_stopping_before_trying_anything_fires_on_the_conversation():
    check = run(transcript(stop="gave_up"))
    assert check.status == "fired"
    assert turns_of(check) == [None]
    assert check.findings[0].detail == "stopped before trying anything"


def test_stopping_after_trying_is_silent():
    check = run(transcript("How many bags are on the Porto trip?", stop="gave_up"), reached=False)
    assert check.status == "clean"


def test_a_success_claim_the_store_denies_fires():
    check = run(transcript("How many bags are on the Porto trip?", stop="done"), reached=False)
    assert check.status == "fired"
    assert turns_of(check) == [None]
    assert check.findings[0].evidence["stop_reason"] == "done"


def test_a_success_claim_the_store_confirms_is_silent():
    check = run(transcript("How many bags are on the Porto trip?", stop="done"), reached=True)
    assert check.status == "clean" and check.checked_turns == 1


def test_a_success_claim_without_a_store_is_unverifiable():
    check = run(transcript("How many bags are on the Porto trip?", stop="done"), reached=None)
    assert check.status == "unverifiable"


# --- facts that contradict the goal ----------------------------------------------------------

def test_a_date_that_contradicts_the_goal_fires_on_its_turn():
    check = run(transcript("Hello.", "Rebook the outbound to 12 March 2027.", "Thanks."), g=date_goal())
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert "2027-03-12" in check.findings[0].detail


@pytest.mark.parametrize("correction", [
    "Sorry, I meant 14 March.",
    "Sorry, I meant the 14th of March.",
    "Sorry, I meant March 14.",
    "Sorry, I meant 2027-03-14.",
])
def test_a_slip_corrected_later_by_day_and_month_is_not_flagged(correction):
    t = transcript("Rebook the outbound to 12 March 2027.", "Is that done?", correction)
    check = run(t, g=date_goal())
    assert check.status == "clean"
    assert check.findings == ()


def test_a_correction_that_restates_only_the_day_does_not_count():
    check = run(transcript("Rebook the outbound to 12 March 2027.", "Sorry, I meant the 14th."), g=date_goal())
    assert turns_of(check) == [1]


def test_a_correction_must_come_after_the_slip():
    t = transcript("The outbound is on 14 March.", "Rebook the outbound to 12 March 2027.", "Thanks.")
    assert turns_of(run(t, g=date_goal())) == [2]


def test_a_slip_more_than_a_week_from_every_fact_is_never_a_correction():
    t = transcript("Rebook the outbound to 1 February 2027.", "Sorry, I meant 14 March.")
    assert turns_of(run(t, g=date_goal())) == [1]


@pytest.mark.parametrize("text", ["Rebook the outbound to 14 March 2027.", "Rebook to March 14th, 2027.",
                                  "Rebook to 2027-03-14.", "Rebook to the 14th of March, 2027."])
def test_the_goal_date_in_any_full_form_is_not_a_contradiction(text):
    assert run(transcript(text, "Thanks."), g=date_goal()).status == "clean"


def test_the_planned_wrong_first_date_is_not_a_contradiction():
    g = date_goal(wrong_first={"date": dt.date(2027, 3, 12)})
    assert run(transcript("Rebook the outbound to 12 March 2027.", "Thanks."), g=g).status == "clean"


def test_a_fact_written_as_text_is_read_as_a_date():
    g = date_goal(outbound="14 March 2027")
    assert turns_of(run(transcript("Rebook to 12 March 2027.", "Thanks."), g=g)) == [1]
    assert run(transcript("Rebook to 14 March 2027.", "Thanks."), g=g).status == "clean"


def test_a_slip_in_the_last_message_gets_the_benefit_of_the_doubt():
    assert run(transcript("Hello.", "Rebook the outbound to 12 March 2027."), g=date_goal()).status == "clean"


def test_one_turn_with_two_stray_dates_is_one_finding():
    t = transcript("Rebook to 12 March 2027 or 13 March 2027.", "Thanks.")
    assert turns_of(run(t, g=date_goal())) == [1]


def test_a_slip_corrected_in_the_same_message_is_not_flagged():
    t = transcript("Rebook to 12 March 2027 - sorry, I mean 14 March 2027.", "Thanks.")
    assert run(t, g=date_goal()).status == "clean"


def test_a_date_cannot_contradict_a_goal_that_has_no_dates():
    g = goal(setup={"records": {"trip:T-2": {"type": "trip", "name": "Porto visit",
                                             "segments": {"outbound": {"date": "2027-02-02"}}}}})
    t = transcript("How many bags are on the Porto trip of 2 February 2027?", "Thanks.")
    assert run(t, g=g).status == "clean"


# --- the scorer keeps a broken user's conversation out of the runtime's rates ----------------

def test_score_ends_a_conversation_with_a_broken_user_as_simulator_error():
    card = score(transcript("As an AI, how many bags?", "Thanks.", end="user_stopped"), G, P)
    assert card.end == "simulator_error"
    assert card.counts_for_runtime is False
    assert [f.turn for f in card.checks["simulator_error"].findings] == [1]


def test_score_keeps_a_runtime_error_the_runtime_s():
    card = score(transcript("As an AI, how many bags?", end="runtime_error"), G, P)
    assert card.end == "runtime_error" and card.counts_for_runtime is True


def test_score_leaves_a_clean_user_s_end_alone():
    card = score(transcript("How many bags are on the Porto trip?", end="user_stopped"), G, P)
    assert card.end == "user_stopped"
    assert card.checks["simulator_error"].status == "clean"
