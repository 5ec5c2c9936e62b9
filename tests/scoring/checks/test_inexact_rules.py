"""The judge's three rules that were inexact on unseen runtimes, each tested from the rule, on
hand-built transcripts: an audit event counts only for its own turn; a stale click is blamed
for whatever it caused to commit, in any later turn; a repeat after the runtime's own failure
is the runtime's. The same rules are planted in both reference runtimes in tests/test_faults.py."""

from __future__ import annotations

import dataclasses

import pytest

from simrun._transcript import Transcript, TurnRecord
from simrun.scoring.checks._audit import audit_gap
from simrun.scoring.checks._simulated_user import simulator_error, user_turn_fault
from simrun.scoring.checks._stale import stale_click
from tests.scoring.checks.builders import (
    G,
    P,
    ask,
    card,
    click,
    event,
    goal,
    msg,
    offer,
    result,
    state,
    transcript,
    turns_of,
)

# --- audit_gap: an event belongs to turn k only if it is turn k's own ---------------------------

REPLIES = ["Hello, how can I help?", "Which trip?", "Added a bag. What next?", "Your bags: 2. Anything else?",
           "Noted. Anything else?"]


def audited(entries: list[tuple[int, int | None]], replies: list[str] = REPLIES) -> Transcript:
    """Turns answered with `replies`; the audit holds (turn number, index of the reply whose surface
    it carries, None for a surface that is no reply) for each entry."""
    audit = [{"turn": n, "surface": replies[k - 1] if k else "rendered otherwise", "verdicts": {}}
             for n, k in entries]
    return transcript(*[(msg(f"message {i}"), result(r)) for i, r in enumerate(replies, start=1)], audit=audit)


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_an_entry_filed_under_the_next_turn_hides_no_gap(k):
    """Turn k-1's event filed (again) under k: turn k's own is missing, whatever carries its number."""
    entries = [(n, n) for n in range(1, 6) if n != k] + [(k, k - 1)]
    check = audit_gap(audited(entries), G, P)
    assert turns_of(check) == [k]
    assert check.findings[0].evidence["reply_of"] == k - 1


def test_a_runtime_that_files_every_entry_one_turn_late_leaves_every_turn_a_gap():
    check = audit_gap(audited([(n + 1, n) for n in range(1, 5)]), G, P)
    assert turns_of(check) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("k", [1, 3, 5])
def test_two_entries_under_one_turn_number_are_a_misfiled_entry(k):
    entries = [(n, n) for n in range(1, 6)] + [(k, k)]
    assert turns_of(audit_gap(audited(entries), G, P)) == [k]


def test_an_entry_whose_surface_is_its_own_reply_counts_even_when_another_turn_said_the_same():
    replies = ["Noted.", "Which trip?", "Noted.", "Which trip?", "Done."]
    check = audit_gap(audited([(n, n) for n in range(1, 6)], replies), G, P)
    assert check.status == "clean" and check.checked_turns == 5


def test_a_surface_rendered_otherwise_is_the_turns_own():
    check = audit_gap(audited([(n, None) for n in range(1, 6)]), G, P)
    assert check.status == "clean"


def test_a_surface_that_differs_only_in_spacing_is_the_same_reply():
    entries = [{"turn": n, "surface": "  " + r.replace(" ", "\n "), "verdicts": {}} for n, r in enumerate(REPLIES, 1)]
    entries[2] = {**entries[2], "surface": REPLIES[1].replace(" ", "  ")}    # turn 2's reply under 3
    t = transcript(*[(msg(f"m{i}"), result(r)) for i, r in enumerate(REPLIES, 1)], audit=entries)
    assert turns_of(audit_gap(t, G, P)) == [3]


# --- stale_click: whatever the stale click caused commits ----------------------------------------

def test_a_stale_click_that_commits_in_its_turn_is_blamed_whatever_offer_the_event_names():
    """The issue's case: turn 3 takes a fresh rebook offer and is asked for the date, turn 4 is
    not understood, turn 5 clicks the older rebook offer of turn 1, and the commit of turn 5
    names the fresh offer of turn 3. The only input of turn 5 was the stale click."""
    t = transcript(
        (msg("Hello."), result("Rebook?", next_steps=[offer("o-1", "rebook")])),
        (msg("Options?"), result("Rebook?", next_steps=[offer("o-2", "rebook")])),
        (click("o-2"), result("Which date?", ask=ask("a-1"))),
        (msg("blah"), result("Sorry?", understood=False, ask=ask("a-1", repeat_reason="not understood"))),
        (click("o-1"), result("Rebooked.", receipts=["e-1"]), state(event("e-1", 5, operation="rebook", offer="o-2"))),
    )
    check = stale_click(t, G, P)
    assert turns_of(check) == [5] and check.findings[0].evidence["offer"] == "o-1"


def stale_then_asks(answers: int, *, named: str | None = None, declined: bool = False) -> Transcript:
    """Turn 3 clicks turn 1's rebook offer (stale); the runtime asks for the rebook's arguments
    (or, `declined`, asks nothing) and commits after `answers` answers, naming `named`."""
    turns = [(msg("Hello."), result("Rebook?", next_steps=[offer("o-1", "rebook")])),
             (msg("And bags?"), result("Add a bag?", next_steps=[offer("o-2", "add_bag")])),
             (click("o-1"), result("That was from earlier." if declined else "Which flight?",
                                   ask=None if declined else ask("a-1", arguments=("segment",))))]
    for n in range(1, answers + 1):
        last = n == answers
        at = 3 + n
        turns.append((msg("The outbound." if n == 1 else "On 3 March."),
                      result("Rebooked." if last else "Which date?", ask=None if last else ask(f"a-{at}")),
                      state(event("e-1", at, operation="rebook", offer=named)) if last else state()))
    return transcript(*turns)


@pytest.mark.parametrize("answers", [1, 2, 3])
@pytest.mark.parametrize("named", [None, "o-1", "o-9"])
def test_a_commit_reached_through_the_asks_a_stale_click_started_is_the_clicks(answers, named):
    check = stale_click(stale_then_asks(answers, named=named), G, P)
    assert turns_of(check) == [3 + answers]
    assert check.findings[0].evidence["clicked_at"] == 3


def test_a_declined_stale_click_is_not_blamed_for_what_the_user_asks_for_next_in_words():
    check = stale_click(stale_then_asks(1, declined=True), G, P)
    assert check.status == "clean" and check.checked_turns == 1


def pending_then_stale(honoured: bool) -> Transcript:
    """Turn 2 asks for a rebook date (pending); turn 3 clicks turn 1's add_bag offer (stale).
    Honoured, the runtime asks how many bags and commits them in turn 4; declined, it keeps the
    rebook ask pending and turn 4's answer commits the rebook."""
    pending = ask("a-1")
    third = (result("How many bags?", ask=ask("a-2", operation="add_bag", arguments=("count",))) if honoured
             else result("That was from earlier. Which date?", ask={**pending, "repeat_reason": "expired option"}))
    return transcript(
        (msg("Hello."), result("Add a bag?", next_steps=[offer("o-1", "add_bag")])),
        (msg("Rebook my trip."), result("Which date?", ask=pending)),
        (click("o-1"), third),
        (msg("Two." if honoured else "3 March."), result("Done."),
         state(event("e-1", 4, operation="add_bag" if honoured else "rebook"))),
    )


def test_a_stale_click_while_an_ask_is_pending_is_blamed_for_the_ask_it_started():
    assert turns_of(stale_click(pending_then_stale(True), G, P)) == [4]


def test_a_stale_click_while_an_ask_is_pending_is_not_blamed_for_the_pending_request():
    check = stale_click(pending_then_stale(False), G, P)
    assert check.status == "clean" and check.checked_turns == 1


def test_a_stale_click_while_an_ask_is_pending_that_commits_at_once_is_blamed():
    t = transcript(
        (msg("Hello."), result("Add a bag?", next_steps=[offer("o-1", "add_bag")])),
        (msg("Rebook my trip."), result("Which date?", ask=ask("a-1"))),
        (click("o-1"), result("Added."), state(event("e-1", 3))),
    )
    assert turns_of(stale_click(t, G, P)) == [3]


def test_a_fresh_take_after_a_stale_click_starts_a_request_of_its_own():
    """A commit after a later fresh take is that take's, not the stale click's."""
    t = transcript(
        (msg("Hello."), result("Rebook?", next_steps=[offer("o-1", "rebook")])),
        (msg("And bags?"), result("Add a bag?", next_steps=[offer("o-2", "add_bag")])),
        (click("o-1"), result("Which flight?", ask=ask("a-1", arguments=("segment",)),
                              next_steps=[offer("o-3", "add_bag")])),
        (click("o-3"), result("How many?", ask=ask("a-2", operation="add_bag", arguments=("count",)))),
        (msg("Two."), result("Added."), state(event("e-1", 5))),
    )
    check = stale_click(t, G, P)
    assert check.status == "clean"


# --- repeated: a repeat after the runtime's own failure is the runtime's ------------------------

STORE = state()
QUESTION_GOAL = goal(facts={"trip": "Porto visit"}, steps=[{"question": "bags"}],
                     questions=[{"id": "bags", "ask": "How many bags are on the Porto visit trip?",
                                 "match": "how many bags", "record": "trip:T-2", "field": "bags"}])


def said_thrice(text: str, replies: list[dict]) -> Transcript:
    turns = tuple(TurnRecord(i, msg(text), r, STORE) for i, r in enumerate(replies, start=1))
    return Transcript("plain-paula", "g", 7, 0, turns, "turn_cap", initial_state=STORE, final_state=STORE, audit=[])


def repeats(t: Transcript, g=G) -> list[int]:
    return [f.turn for f in simulator_error(t, g, P, None).findings if f.evidence.get("kind") == "repeated"]


def unavailable(n: int) -> dict:
    return result(f"Sorry, I can't look that up right now ({'xyz'[n - 1]}). Anything else?", answer="unavailable",
                  next_steps=[offer(f"o-{n}")])


def test_asking_again_after_unavailable_twice_is_the_runtimes():
    t = said_thrice("How many bags are on my Porto trip?", [unavailable(1), unavailable(2), unavailable(3)])
    assert repeats(t, QUESTION_GOAL) == []
    # The same replies with the answer given the second time: asking a third time ignored it.
    replies = [unavailable(1), result("It has 2 bags. Anything else?", answer="answered",
                                      next_steps=[offer("o-2")]), unavailable(3)]
    assert repeats(said_thrice("How many bags are on my Porto trip?", replies), QUESTION_GOAL) == [3]


@pytest.mark.parametrize("phrase", ["", " (Tip: you can also say 'next week')", " We value your custom!"])
def test_a_repeated_ask_is_compared_by_what_it_asks_not_by_its_words(phrase):
    first = result("Which date would you like?", ask=ask("a-1"))
    again = result("Which date would you like?" + phrase, ask=ask("a-2"))
    assert repeats(said_thrice("On 3 March.", [first, again, again])) == []
    moved = result("Which flight, outbound or return?" + phrase, ask=ask("a-2", arguments=("segment",)))
    assert repeats(said_thrice("On 3 March.", [first, moved, again])) == [3]


def test_repeating_after_a_card_named_but_not_sent_then_noted_is_the_runtimes():
    named = result("Please confirm the cancellation on the card. What else?", mentions=["c-1"],
                   next_steps=[offer("o-1")])
    noted = result("Noted.")
    assert repeats(said_thrice("Yes, cancel it.", [named, noted, noted])) == []
    sent = result("Please confirm on the card.", mentions=["c-1"], card=card("c-1"))
    assert repeats(said_thrice("Yes, cancel it.", [named, sent, noted])) == [3]


def test_the_loop_and_the_rescan_agree_on_a_repeat_after_a_failure():
    t = said_thrice("How many bags are on my Porto trip?", [unavailable(1), unavailable(2), unavailable(3)])
    assert user_turn_fault(t.turns[2].user, QUESTION_GOAL, P, t.turns[:2]) is None
    t = said_thrice("How many bags are on my Porto trip?", [unavailable(1), result("2 bags?", answer="answered"),
                                                            unavailable(3)])
    assert user_turn_fault(t.turns[2].user, QUESTION_GOAL, P, t.turns[:2]).kind == "repeated"


def test_a_stale_clicks_ask_kept_pending_through_a_digression_still_leads_back_to_it():
    """The ask a stale click started, shown again after a question in between, is still the
    click's: the answer that follows commits what the click asked for."""
    t = transcript(
        (msg("Hello."), result("Rebook?", next_steps=[offer("o-1", "rebook")])),
        (msg("And bags?"), result("Add a bag?", next_steps=[offer("o-2", "add_bag")])),
        (click("o-1"), result("Which flight?", ask=ask("a-1", arguments=("segment",)))),
        (msg("How many bags do I have?"), result("One. Which flight?",
                                                  ask=ask("a-1", arguments=("segment",), repeat_reason="still"))),
        (msg("The outbound."), result("Rebooked."), state(event("e-1", 5, operation="rebook"))),
    )
    assert turns_of(stale_click(t, goal(steps=[{"question": "bags"}], questions=[
        {"id": "bags", "ask": "How many bags?", "match": "how many bags", "record": "trip:T-1", "field": "bags"}]),
        P)) == [5]


def test_a_commit_of_another_operation_than_the_stale_clicks_ask_is_not_the_clicks():
    t = stale_then_asks(1)
    turns = list(t.turns)
    turns[-1] = dataclasses.replace(turns[-1], state=state(event("e-1", 4, operation="add_bag")))
    assert stale_click(dataclasses.replace(t, turns=tuple(turns)), G, P).status == "clean"
