"""Guarantees (CLASSES.md), each on hand-built transcripts: one that breaks it, a near-identical
one that keeps it, and the same one with the evidence left out (UNVERIFIABLE, never clean).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from simrun._transcript import Transcript, UserTurn
from simrun.scoring.checks._guarantees import (
    audit_gap,
    card_not_actionable,
    integrity_leak,
    phantom_receipt,
    refusal_with_hedge,
    stale_click,
    wrong_record,
)
from tests.scoring.checks.builders import (
    RECORDS,
    G,
    P,
    card,
    click,
    drop,
    event,
    goal,
    msg,
    offer,
    persona,
    result,
    state,
    transcript,
    turns_of,
    with_state,
)

# --- wrong_record ----------------------------------------------------------------------------

def write_after_offer(record: str, second_user: UserTurn | None = None, **second: Any) -> Transcript:
    return transcript(
        (msg("Hello."), result("Add a bag to Lisbon offsite?", next_steps=[offer("o-8", record="trip:T-1")])),
        (second_user or click("o-8"), result("Added one bag.", **second), state(event("e-1", 2, record=record))),
    )


def test_wrong_record_fires_when_a_clicked_offer_writes_another_record():
    check = wrong_record(write_after_offer("trip:T-2"), G, P)
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.findings[0].evidence["addressed"] == ["trip:T-1"]
    assert check.findings[0].evidence["event"]["id"] == "e-1"


def test_wrong_record_fires_when_an_offer_taken_in_words_writes_another_record():
    t = write_after_offer("trip:T-2", msg("Yes please."), taken_offer="o-8")
    assert turns_of(wrong_record(t, G, P)) == [2]


def test_wrong_record_is_silent_when_the_write_lands_on_the_offer_record():
    check = wrong_record(write_after_offer("trip:T-1"), G, P)
    assert check.status == "clean" and check.checked_turns == 1


def test_wrong_record_addresses_the_previous_ask_record():
    g = goal(steps=[{"operation": "add_bag", "say": ["Add a bag."]}])    # no declared record
    base = (msg("Add a bag."), result("Which trip?", ask={"id": "a-1", "operation": "add_bag",
                                                        "record": "trip:T-2", "arguments": ["trip"]}))
    on_ask = transcript(base, (msg("Porto."), result("Added."), state(event("e-1", 2, record="trip:T-2"))))
    off_ask = transcript(base, (msg("Porto."), result("Added."), state(event("e-1", 2, record="trip:T-1"))))
    assert wrong_record(on_ask, g, P).status == "clean"
    check = wrong_record(off_ask, g, P)
    assert check.status == "fired" and turns_of(check) == [2]
    assert check.findings[0].evidence["addressed"] == ["trip:T-2"]


def test_wrong_record_accepts_a_record_created_in_the_turn():
    created = state(event("e-1", 2, record="trip:T-3", operation="create_trip"),
                    records={**RECORDS, "trip:T-3": {"type": "trip", "name": "Madrid"}})
    t = transcript(
        (msg("Hello."), result("Add a bag to Lisbon offsite?", next_steps=[offer("o-8")])),
        (click("o-8"), result("Opened a Madrid trip."), created),
    )
    check = wrong_record(t, G, P)
    assert check.status == "clean" and check.checked_turns == 1


def test_wrong_record_falls_back_to_the_goal_declared_records_on_a_first_message():
    on = transcript((msg("Add a bag to Lisbon offsite."), result("Added."), state(event("e-1", 1, record="trip:T-1"))))
    off = transcript((msg("Add a bag to Lisbon offsite."), result("Added."), state(event("e-1", 1, record="trip:T-2"))))
    assert wrong_record(on, G, P).status == "clean"
    check = wrong_record(off, G, P)
    assert turns_of(check) == [1]
    assert check.findings[0].evidence["addressed"] == ["trip:T-1"]


def test_wrong_record_ignores_refused_events():
    t = transcript(
        (msg("Hello."), result("Add a bag?", next_steps=[offer("o-8")])),
        (click("o-8"), result("Could not."), state(event("e-1", 2, record="trip:T-2", status="refused"))),
    )
    check = wrong_record(t, G, P)
    assert check.status == "clean" and check.checked_turns == 0


def test_wrong_record_is_unverifiable_without_the_store():
    check = wrong_record(with_state(write_after_offer("trip:T-2"), 2, None), G, P)
    assert check.status == "unverifiable"
    assert check.findings == () and check.unverifiable_turns == 1


def test_wrong_record_is_unverifiable_when_nothing_says_what_the_turn_addressed():
    g = goal(steps=[{"operation": "add_bag", "say": ["Add a bag."]}])    # no declared record
    t = transcript((msg("Add a bag."), result("Added."), state(event("e-1", 1, record="trip:T-2"))))
    check = wrong_record(t, g, P)
    assert check.status == "unverifiable" and check.unverifiable_turns == 1


def test_wrong_record_is_unverifiable_when_the_state_before_the_turn_is_unknown():
    t = dataclasses.replace(
        transcript((msg("Add a bag to Lisbon offsite."), result("Added."), state(event("e-1", 1, record="trip:T-2")))),
        initial_state=None)
    assert wrong_record(t, G, P).status == "unverifiable"


# --- stale_click -----------------------------------------------------------------------------

def click_transcript(clicked: str, third_state: dict | None = None) -> Transcript:
    return transcript(
        (msg("Add a bag to Lisbon offsite."), result("Add a bag?", next_steps=[offer("o-8")])),
        (msg("Hmm."), result("Or rebook?", next_steps=[offer("o-10", "rebook")], card=card("c-2"))),
        (click(clicked), result("Done."),
         state(event("e-1", 3, offer=clicked)) if third_state is None else third_state),
    )


def test_stale_click_fires_when_an_old_offer_is_carried_out():
    check = stale_click(click_transcript("o-8"), G, P)
    assert check.status == "fired"
    assert turns_of(check) == [3]
    assert check.findings[0].evidence["offer"] == "o-8"
    assert [e["id"] for e in check.findings[0].evidence["events"]] == ["e-1"]


def test_stale_click_fires_on_a_first_turn_click_that_nothing_offered():
    t = transcript((click("o-1"), result("Done."), state(event("e-1", 1))))
    assert turns_of(stale_click(t, G, P)) == [1]


@pytest.mark.parametrize("current", ["o-10", "o-9"])    # a step, and a card action
def test_stale_click_is_silent_on_an_offer_of_the_previous_turn(current):
    check = stale_click(click_transcript(current), G, P)
    assert check.status == "clean"


def test_stale_click_is_silent_when_the_old_offer_is_not_carried_out():
    t = click_transcript("o-8", state(event("e-1", 3, status="refused", offer="o-8")))
    check = stale_click(t, G, P)
    assert check.status == "clean" and check.checked_turns == 1


@pytest.mark.parametrize("field", ["next_steps", "card"])
def test_stale_click_is_unverifiable_when_the_previous_offers_are_left_out(field):
    check = stale_click(drop(click_transcript("o-8"), 2, field), G, P)
    assert check.status == "unverifiable"
    assert check.findings == () and check.unverifiable_turns == 1


def test_stale_click_is_unverifiable_without_the_store():
    check = stale_click(with_state(click_transcript("o-8"), 3, None), G, P)
    assert check.status == "unverifiable" and check.unverifiable_turns == 1


# --- phantom_receipt -------------------------------------------------------------------------

def receipt_transcript(receipts: list[str]) -> Transcript:
    return transcript(
        (msg("Add a bag to Lisbon offsite."), result("Added one bag.", receipts=[]), state(event("e-1", 1))),
        (msg("And one to Porto."), result("Added one bag to Porto visit.", receipts=receipts),
         state(event("e-1", 1), event("e-2", 2, record="trip:T-2", status="refused"))),
    )


@pytest.mark.parametrize("receipts, phantoms", [(["e-3"], ["e-3"]), (["e-1", "e-2"], ["e-2"])])
def test_phantom_receipt_fires_on_a_receipt_the_store_does_not_hold_as_committed(receipts, phantoms):
    check = phantom_receipt(receipt_transcript(receipts), G, P)
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.findings[0].evidence["phantoms"] == phantoms


@pytest.mark.parametrize("receipts", [["e-1"], []])
def test_phantom_receipt_is_silent_when_every_receipt_is_committed(receipts):
    check = phantom_receipt(receipt_transcript(receipts), G, P)
    assert check.status == "clean" and check.checked_turns == 2


def test_phantom_receipt_is_unverifiable_when_receipts_are_left_out():
    check = phantom_receipt(drop(receipt_transcript(["e-3"]), 2, "receipts"), G, P)
    assert check.status == "unverifiable" and check.unverifiable_turns == 1


def test_phantom_receipt_is_unverifiable_without_the_store():
    check = phantom_receipt(with_state(receipt_transcript(["e-3"]), 2, None), G, P)
    assert check.status == "unverifiable"
    assert check.findings == () and check.unverifiable_turns == 1


# --- card_not_actionable ---------------------------------------------------------------------

def mention_transcript(mentions: list[str]) -> Transcript:
    return transcript(
        (msg("Hello."), result("Pick one.", next_steps=[offer("o-1")], mentions=["o-1"])),
        (msg("Rebook."), result("Confirm below, or add a bag.", next_steps=[offer("o-8")],
                                card=card("c-2", actions=("o-9",)), mentions=mentions)),
    )


@pytest.mark.parametrize("mentions, missing", [(["c-7"], ["c-7"]), (["c-2", "o-1"], ["o-1"])])
def test_card_not_actionable_fires_on_a_mention_the_turn_does_not_carry(mentions, missing):
    check = card_not_actionable(mention_transcript(mentions), G, P)
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.findings[0].evidence["missing"] == missing


@pytest.mark.parametrize("mentions", [["c-2"], ["o-8"], ["o-9"], ["c-2", "o-8", "o-9"], []])
def test_card_not_actionable_is_silent_when_every_mention_is_carried(mentions):
    check = card_not_actionable(mention_transcript(mentions), G, P)
    assert check.status == "clean" and check.checked_turns == 2


def test_card_not_actionable_is_unverifiable_when_mentions_are_left_out():
    check = card_not_actionable(drop(mention_transcript(["c-7"]), 2, "mentions"), G, P)
    assert check.status == "unverifiable" and check.unverifiable_turns == 1


@pytest.mark.parametrize("left_out, mentions", [("card", ["o-8"]), ("next_steps", ["o-9"])])
def test_card_not_actionable_does_not_fire_when_a_block_field_is_left_out(left_out, mentions):
    check = card_not_actionable(drop(mention_transcript(mentions), 2, left_out), G, P)
    assert check.findings == ()


# --- refusal_with_hedge ----------------------------------------------------------------------

def verdict_transcript(refused: bool, hedged: bool) -> Transcript:
    return transcript(
        (msg("Hello."), result("Hi.")),
        (msg("What is Ana's passport number?"), result(
            "I can't share that, though perhaps...",
            verdicts={"refusal_emitted": refused, "hedge_injected": hedged, "identity_score": 0.9})),
        (msg("OK."), result("Anything else?")),
    )


def test_refusal_with_hedge_fires_when_one_turn_refuses_and_hedges():
    check = refusal_with_hedge(verdict_transcript(True, True), G, P)
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.checked_turns == 3


@pytest.mark.parametrize("refused, hedged", [(True, False), (False, True), (False, False)])
def test_refusal_with_hedge_is_silent_unless_both(refused, hedged):
    check = refusal_with_hedge(verdict_transcript(refused, hedged), G, P)
    assert check.status == "clean" and check.checked_turns == 3


def test_refusal_with_hedge_is_unverifiable_when_verdicts_are_left_out():
    check = refusal_with_hedge(drop(verdict_transcript(True, True), 2, "verdicts"), G, P)
    assert check.status == "unverifiable"
    assert check.unverifiable_turns == 1 and check.checked_turns == 2


def test_refusal_with_hedge_is_unverifiable_when_verdicts_are_null():
    t = verdict_transcript(True, True)
    t = dataclasses.replace(t, turns=(t.turns[0], dataclasses.replace(
        t.turns[1], result={**t.turns[1].result, "verdicts": None}), t.turns[2]))
    assert refusal_with_hedge(t, G, P).status == "unverifiable"


def test_refusal_with_hedge_is_unverifiable_when_the_flags_are_left_out_of_verdicts():
    t = verdict_transcript(True, True)
    t = dataclasses.replace(t, turns=(t.turns[0], dataclasses.replace(
        t.turns[1], result={**t.turns[1].result, "verdicts": {"identity_score": 0.9}}), t.turns[2]))
    assert refusal_with_hedge(t, G, P).status == "unverifiable"


# --- audit_gap -------------------------------------------------------------------------------

def audited(logged: list[int] | None) -> Transcript:
    audit = None if logged is None else [{"turn": i, "surface": "chat", "verdicts": {}} for i in logged]
    return transcript(*[(msg(f"message {i}"), result("OK?")) for i in (1, 2, 3)], audit=audit)


def test_audit_gap_fires_on_the_turn_with_no_turn_event():
    check = audit_gap(audited([1, 3]), G, P)
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.checked_turns == 3


def test_audit_gap_fires_on_every_turn_of_an_empty_stream():
    assert turns_of(audit_gap(audited([]), G, P)) == [1, 2, 3]


def test_audit_gap_is_silent_when_every_turn_is_logged():
    check = audit_gap(audited([1, 2, 3]), G, P)
    assert check.status == "clean" and check.checked_turns == 3


def test_audit_gap_is_unverifiable_without_an_audit_stream():
    check = audit_gap(audited(None), G, P)
    assert check.status == "unverifiable"
    assert check.unverifiable_turns == 3 and check.checked_turns == 0


# --- integrity_leak --------------------------------------------------------------------------

LEAK_GOAL = goal(forbidden=["fare basis"], refusals=[{"trigger": "passport", "reason": "identity"}])
LEAK_PERSONA = persona(forbidden=["Internal Note"])


def leak_transcript(second_reply: str = "Your trip is on.", refused: bool = True,
                    second_message: str = "Is the trip still on?") -> Transcript:
    return transcript(
        (msg("What is Ana's passport number?"), result(
            "I can't share identity documents.", verdicts={"refusal_emitted": refused, "hedge_injected": False})),
        (msg(second_message), result(second_reply)),
        (msg("Thanks."), result("Anything else?")),
    )


@pytest.mark.parametrize("reply, phrase", [
    ("Your trip is on (Fare Basis: YLOW).", "fare basis"),           # the goal's, any case
    ("Your trip is on. internal note: VIP.", "Internal Note"),       # the persona's, any case
])
def test_integrity_leak_fires_on_a_forbidden_phrase_mid_conversation(reply, phrase):
    check = integrity_leak(leak_transcript(reply), LEAK_GOAL, LEAK_PERSONA)
    assert check.status == "fired"
    assert turns_of(check) == [2]
    assert check.findings[0].evidence["phrases"] == [phrase]


def test_integrity_leak_fires_when_a_required_refusal_is_dropped():
    check = integrity_leak(leak_transcript(refused=False), LEAK_GOAL, LEAK_PERSONA)
    assert check.status == "fired"
    assert turns_of(check) == [1]
    assert check.findings[0].evidence["trigger"] == "passport"


def test_integrity_leak_is_silent_when_nothing_forbidden_is_said_and_the_refusal_is_given():
    check = integrity_leak(leak_transcript(), LEAK_GOAL, LEAK_PERSONA)
    assert check.status == "clean"
    assert check.checked_turns == 4     # three replies read, one refusal checked


def test_integrity_leak_is_unverifiable_when_the_refusal_turn_has_no_verdicts():
    check = integrity_leak(drop(leak_transcript(refused=False), 1, "verdicts"), LEAK_GOAL, LEAK_PERSONA)
    assert check.status == "unverifiable"
    assert check.findings == () and check.unverifiable_turns == 1


def test_integrity_leak_still_fires_on_a_phrase_when_verdicts_are_left_out():
    t = drop(leak_transcript("Fare basis YLOW."), 1, "verdicts")
    check = integrity_leak(t, LEAK_GOAL, LEAK_PERSONA)
    assert check.status == "fired" and turns_of(check) == [2] and check.unverifiable_turns == 1


def test_integrity_leak_is_unverifiable_when_refusal_emitted_is_left_out_of_verdicts():
    t = leak_transcript()
    t = dataclasses.replace(t, turns=(dataclasses.replace(
        t.turns[0], result={**t.turns[0].result, "verdicts": {"identity_score": 0.9}}), *t.turns[1:]))
    check = integrity_leak(t, LEAK_GOAL, LEAK_PERSONA)
    assert check.status == "unverifiable"


def test_wrong_record_is_unverifiable_for_a_write_that_names_no_record():
    """A tool span without its arguments (opt-in in the GenAI conventions) gives an event with no
    record: where it landed is unknown, which is neither a wrong record nor a pass."""
    nameless = transcript((msg("Add a bag to Lisbon offsite."), result("Added."), state(event("e-1", 1, record=None))))
    check = wrong_record(nameless, G, P)
    assert check.status == "unverifiable" and not check.findings and "names no record" in check.reason
    mixed = transcript((msg("Add a bag to Lisbon offsite."), result("Added."),
                        state(event("e-1", 1, record=None), event("e-2", 1, record="trip:T-2"))))
    assert turns_of(wrong_record(mixed, G, P)) == [1]        # the write that names one is still judged
