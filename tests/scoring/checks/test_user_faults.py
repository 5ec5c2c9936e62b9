"""A stuck or broken user is the user's fault: each kind of simulator_error, phrase by phrase,
and the loop's check and the scorer's rescan agreeing turn for turn."""

from __future__ import annotations

import pytest

from simrun._transcript import Transcript, TurnRecord, UserTurn
from simrun.scoring.checks._simulated_user import FAULT_KINDS, simulator_error, user_turn_fault
from tests.scoring.checks.test_simulated_user import STATE, G, P

NOT_UNDERSTOOD = {"reply": "Sorry, I didn't understand that.", "understood": False}


def transcript(*users: UserTurn | str, result: dict | None = None, results: list[dict] | None = None) -> Transcript:
    """Each user message answered with `result` (by default: the runtime did not understand it)."""
    answers = results or [result or NOT_UNDERSTOOD] * len(users)
    turns = tuple(TurnRecord(i, msg(u) if isinstance(u, str) else u, answers[i - 1], STATE)
                  for i, u in enumerate(users, start=1))
    return Transcript("plain-paula", "g", 7, 0, turns, "turn_cap", initial_state=STATE, final_state=STATE, audit=[])


def msg(text: str) -> UserTurn:
    return UserTurn("message", text)


AI_PHRASINGS = [
    "As an AI, I can't book flights myself.",
    "As an AI language model I do not have preferences.",
    "I'm just an AI, so I can't travel.",
    "I am only an AI assistant.",
    "Im just a language model, sorry.",
    "I'm an AI and cannot do that.",
    "I am a large language model trained to help.",
    "Being an AI, I have no luggage.",
    "As a language model, I cannot know your trip.",
    "I'm not a human, just an AI.",
    "I am merely a chatbot.",
    "As an artificial intelligence I don't travel.",
    "I'm simply a virtual assistant.",
    "Large language models like me can't hold bookings.",
    "My training data does not include your booking.",
    "I don't have personal travel plans.",
    "I was trained by a company to assist users.",
    "My knowledge cutoff is 2023, so I am not sure.",
    "Hello! How can I help you today?",
    "Assistant: here is your itinerary.",
]
HUMAN_PHRASINGS = [
    "How many bags are on my Porto trip?",
    "I work as an assistant manager, so keep it short please.",
    "My assistant booked this trip for me, can you check it?",
    "Is the airline's AI lounge open in Porto?",
    "I'm just a traveller who wants one more bag.",
    "I am only asking about the bags.",
    "As a frequent flyer, I expect two bags.",
    "Please add a bag; I'm in a hurry.",
    "Can you help me with my booking?",
    "The chatbot on the website could not help me.",
]


@pytest.mark.parametrize("text", AI_PHRASINGS)
def test_talking_as_an_ai_or_the_assistant_is_a_role_leak(text):
    fault = user_turn_fault(msg(text), G, P)
    assert fault is not None and fault.kind == "role_leak", text


@pytest.mark.parametrize("text", HUMAN_PHRASINGS)
def test_what_a_person_says_is_no_role_leak(text):
    assert user_turn_fault(msg(text), G, P) is None, text


def offered(n: int) -> list[dict]:
    """Replies that each move on: understood, with a new offer every turn."""
    return [{"reply": f"Done step {i}.", "understood": True, "next_steps": [{"id": f"o-{i}", "label": f"Step {i + 1}"}]}
            for i in range(n)]


@pytest.mark.parametrize(("messages", "fires_at"), [
    (["Add a bag to my Porto trip.", "Add a bag to my Porto trip.", "Add a bag to my Porto trip."], 3),
    (["I want to add one bag to my Porto trip.", "I want to add one bag to my Porto trip please.",
      "I want to add one bag to my Porto trip, please!"], 3),      # nearly the same, three times
    (["Hello.", "Add a bag to my Porto trip.", "Add a bag to my Porto trip.", "Add a bag to my Porto trip."], 4),
    (["Add a bag to my Porto trip."] * 5, 3),
])
def test_the_same_message_three_times_in_a_row_is_a_stuck_user(messages, fires_at):
    check = simulator_error(transcript(*messages, results=offered(len(messages))), G, P, None)
    # From the third time on, each repetition is one more (the loop ends the conversation at the first).
    assert [f.turn for f in check.findings] == list(range(fires_at, len(messages) + 1))
    assert {f.evidence["kind"] for f in check.findings} == {"repeated"}


@pytest.mark.parametrize("messages", [
    ["Add a bag to my Porto trip.", "Add a bag to my Porto trip."],                         # twice is not stuck
    ["Add a bag to my Porto trip.", UserTurn("click", offer="o-1"), "Add a bag to my Porto trip.",
     "Add a bag to my Porto trip."],                                                        # a click breaks the row
    ["Add a bag to my Porto trip.", "How many bags are on it now?", "Add a bag to my Porto trip."],
    ["Add a bag to my Porto trip.", "Add two bags to my Lisbon trip instead.", "Remove the bag from Porto."],
])
def test_moving_on_is_not_repeating(messages):
    check = simulator_error(transcript(*messages, results=offered(len(messages))), G, P, None)
    assert not [f for f in check.findings if f.evidence.get("kind") == "repeated"]


@pytest.mark.parametrize("results", [
    [{"reply": "Which trip?"}, {"reply": "Which trip, Porto or Lisbon?"}, {"reply": "Which trip?"}],  # it asked on
    [{"reply": "Added a bag.", "understood": True, "next_steps": [{"id": "o-1", "label": "Add another"}]},
     {"reply": "Done again.", "understood": True, "next_steps": [{"id": "o-2", "label": "Check in"}]}, {"reply": "x"}],
])
def test_repeating_what_the_runtime_answered_anew_is_stuck(results):
    check = simulator_error(transcript(*["Add a bag to my Porto trip."] * 3, results=results), G, P, None)
    assert [f.evidence["kind"] for f in check.findings] == ["repeated"]


@pytest.mark.parametrize("result", [{"reply": "Noted."}, {"reply": "OK.", "understood": True},
                                    {"reply": "Sorry, I did not understand.", "understood": False,
                                     "next_steps": [{"id": "o-1", "label": "Start over"}]}])
def test_repeating_to_a_runtime_that_says_the_same_and_never_that_it_did_not_understand_stays_the_runtimes(result):
    """"Noted." three times gives a user nothing to go on: the runtime is stuck first (a loop, a
    dead end), and its findings stand."""
    check = simulator_error(transcript(*["Add a bag to my Porto trip."] * 3, result=result), G, P, None)
    assert check.status == "clean"


def test_repeating_to_replies_that_lead_nowhere_stays_the_runtimes_however_they_are_worded():
    """A runtime that answers each time anew but never with a question, an ask, an offer or a
    card (a dead end, worded differently each time) left the user nothing to act on: saying it
    again is what a person would do."""
    results = [{"reply": f"Your request {n} was noted.", "understood": True, "ask": None, "next_steps": [],
                "card": None} for n in range(3)]
    check = simulator_error(transcript(*["Add a bag to my Porto trip."] * 3, results=results), G, P, None)
    assert check.status == "clean"
    # The same replies with one offer in between: the user ignored a way forward.
    results[1] = {**results[1], "next_steps": [{"id": "o-1", "label": "Add a bag"}]}
    check = simulator_error(transcript(*["Add a bag to my Porto trip."] * 3, results=results), G, P, None)
    assert [f.evidence["kind"] for f in check.findings] == ["repeated"]


def test_answering_a_question_asked_again_without_a_reason_is_the_runtimes_loop():
    """The runtime asks for the branch three times, the same way, giving no reason: the user's
    answer is the same each time because it is the answer. With a reason given ("I still need the
    record"), or a new question, the user that says the same again ignored it."""
    ask = {"reply": "Which branch?", "ask": {"id": "q1", "operation": "move_pickup", "record": "hold:H-1",
                                              "arguments": ["branch"], "repeat_reason": None}}
    again = [ask, {**ask, "ask": {**ask["ask"], "id": "q2"}}, {**ask, "ask": {**ask["ask"], "id": "q3"}}]
    check = simulator_error(transcript(*["Northgate"] * 3, results=again), G, P, None)
    assert check.status == "clean"
    again[1] = {**again[1], "ask": {**again[1]["ask"], "repeat_reason": "I still need the branch"}}
    check = simulator_error(transcript(*["Northgate"] * 3, results=again), G, P, None)
    assert [f.evidence["kind"] for f in check.findings] == ["repeated"]


def test_the_loops_check_and_the_scorers_rescan_agree_turn_for_turn():
    users = [msg("How many bags?"), msg("As an AI I cannot say."), msg("x" * 2000), msg(""),
             msg("Add a bag."), msg("Add a bag."), msg("Add a bag."),
             UserTurn("message", "", meta={"unparsed": "Sure!", "parse_error": "not JSON", "repaired": True}),
             UserTurn("message", "", meta={"unparsed": '{"action": "mess', "parse_error": "not JSON", "cut_off": 300})]
    t = transcript(*users, results=offered(len(users)))
    in_loop = [(n + 1, f.kind) for n, turn in enumerate(t.turns)
               if (f := user_turn_fault(turn.user, G, P, t.turns[:n]))]
    rescan = [(f.turn, f.evidence["kind"]) for f in simulator_error(t, G, P, None).findings if f.turn is not None]
    assert in_loop == rescan == [(2, "role_leak"), (3, "too_long"), (4, "empty_message"), (7, "repeated"),
                                 (8, "unstructured"), (9, "cut_off")]
    assert {kind for _, kind in in_loop} <= set(FAULT_KINDS)


def test_a_cut_off_answer_says_to_raise_max_tokens_and_an_unstructured_one_quotes_its_parse_error():
    cut = user_turn_fault(UserTurn("message", "", meta={"unparsed": "{", "parse_error": "x", "cut_off": 300}), G, P)
    assert cut.kind == "cut_off" and "raise max_tokens" in cut.message and "[user]" in cut.message
    bad = user_turn_fault(UserTurn("message", "", meta={"unparsed": "hi", "parse_error": "not JSON (Expecting value)",
                                                        "repaired": True}), G, P)
    assert bad.kind == "unstructured" and "not JSON (Expecting value)" in bad.message and "repair" in bad.message


def test_the_loop_s_user_checks_given_to_the_scorer_score_as_the_rescan_does(demo):
    """The loop hands the scorer its user_turn_fault of every turn rather than having it run
    twice: the scorecard is the one a rescore (which has only the transcript) makes, here over
    runs where every kind of broken user the scripted user can play is planted."""
    from simrun.scoring.checks._scorer import score
    from tests.conftest import run_demo

    faults = {"empty_message": 0.1, "role_leak": 0.1, "leaked_instructions": 0.1, "contradict_facts": 0.2,
              "false_success": 0.1}
    run = run_demo(demo, user_faults=faults, repetitions=1)
    faulted = [c for c in run.conversations if c.scorecard.checks["simulator_error"].findings]
    assert len(faulted) >= 5
    for c in run.conversations:
        assert c.scorecard == score(c.transcript, c.cell.goal, c.cell.persona), c.cell.id
