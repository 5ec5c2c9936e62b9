"""Following an offer to the event it led to, whatever the turn (simrun.scoring.checks._offers).

Hand-built transcripts of a runtime that takes an offer in one turn, asks for arguments, and
commits or refuses turns later, the event's `offer` linking the two: every pattern of the
README's multi-turn rules, each with its mirror that must stay clean. Stores are cumulative, as
a runtime's are.
"""

from __future__ import annotations

from simrun._transcript import UserTurn
from simrun.scoring.checks._guarantees import stale_click, wrong_record
from simrun.scoring.checks._progress import refused_offer
from tests.scoring.checks.builders import P, ask, click, event, goal, msg, offer, result, state, transcript, turns_of

LOANS = {
    "loan:L-1": {"type": "loan", "title": "Dune", "due": "2026-12-10"},
    "loan:L-2": {"type": "loan", "title": "Emma", "due": "2026-12-17"},
}
RENEW_BOTH = goal(
    facts={"first": "Dune", "second": "Emma"},
    steps=[{"id": "renew-dune", "operation": "renew", "record": "loan:L-1", "say": ["Renew {first}."]},
           {"id": "renew-emma", "operation": "renew", "record": "loan:L-2", "say": ["Renew {second}."]}])
NO_RECORDS = goal(steps=[{"operation": "renew", "say": ["Renew a loan."]},
                         {"operation": "hold", "say": ["Place a hold."]}])


def stores(*per_turn: list[dict]) -> list[dict]:
    """Cumulative stores: turn i's store holds the events of turns 1..i."""
    out, log = [], []
    for events in per_turn:
        log = log + events
        out.append(state(*log, records=LOANS))
    return out


def conversation(*turns: tuple, events: list[list[dict]] | None = None):
    events = events or [[] for _ in turns]
    return transcript(*((user, res, st) for (user, res), st in zip(turns, stores(*events))),
                      initial_state=state(records=LOANS))


def tagged(text: str, step: str) -> UserTurn:
    return UserTurn("message", text, step=step)


def renew(oid: str, record: str) -> dict:
    return offer(oid, "renew", record)


# --- commit in a later turn ---------------------------------------------------------------------

def commit_later(record: str, status: str = "committed"):
    return conversation(
        (msg("Hello."), result("What next?", next_steps=[renew("o-1", "loan:L-1")])),
        (click("o-1"), result("For how many weeks?", taken_offer="o-1",
                              ask=ask("a-1", "renew", "loan:L-1", ("weeks",)))),
        (msg("Two weeks."), result("Renewed.")),
        events=[[], [], [event("e-1", 3, operation="renew", record=record, status=status, offer="o-1")]])


def test_an_offer_committed_turns_later_on_its_record_is_clean():
    t = commit_later("loan:L-1")
    assert wrong_record(t, NO_RECORDS, P).status == "clean"
    assert refused_offer(t, NO_RECORDS, P).status == "clean"
    assert stale_click(t, NO_RECORDS, P).status == "clean"


def test_an_offer_committed_turns_later_on_another_record_is_a_wrong_record():
    check = wrong_record(commit_later("loan:L-2"), NO_RECORDS, P)
    assert turns_of(check) == [3]
    assert check.findings[0].evidence["addressed"] == ["loan:L-1"]
    assert check.findings[0].evidence["addressed_by"] == "offer"


# --- refuse in a later turn ---------------------------------------------------------------------

def test_an_offer_refused_turns_later_is_a_refused_offer():
    check = refused_offer(commit_later("loan:L-1", status="refused"), NO_RECORDS, P)
    assert turns_of(check) == [3]
    assert check.findings[0].evidence["offer"] == "o-1"
    assert check.findings[0].evidence["taken_at"] == 2


def test_a_refusal_of_an_offer_taken_in_words_turns_later_is_a_refused_offer():
    t = conversation(
        (msg("Hello."), result("What next?", next_steps=[renew("o-1", "loan:L-1")])),
        (msg("Renew Dune."), result("For how many weeks?", taken_offer="o-1",
                                    ask=ask("a-1", "renew", "loan:L-1", ("weeks",)))),
        (msg("Two."), result("Which branch?", ask=ask("a-2", "renew", "loan:L-1", ("branch",)))),
        (msg("Central."), result("Sorry, it cannot be renewed.")),
        events=[[], [], [], [event("e-1", 4, operation="renew", record="loan:L-1", status="refused", offer="o-1")]])
    check = refused_offer(t, NO_RECORDS, P)
    assert turns_of(check) == [4] and check.findings[0].evidence["taken_at"] == 2


# --- a stale click completed later --------------------------------------------------------------

def stale_then(status: str):
    return conversation(
        (msg("Hello."), result("What next?", next_steps=[renew("o-1", "loan:L-1")])),
        (msg("Hmm."), result("What next?", next_steps=[renew("o-5", "loan:L-1")])),
        (click("o-1"), result("For how many weeks?", ask=ask("a-1", "renew", "loan:L-1", ("weeks",)))),
        (msg("Two weeks."), result("Done.")),
        events=[[], [], [], [event("e-1", 4, operation="renew", record="loan:L-1", status=status, offer="o-1")]])


def test_a_stale_click_completed_turns_later_is_a_stale_click():
    check = stale_click(stale_then("committed"), NO_RECORDS, P)
    assert turns_of(check) == [4]
    assert check.findings[0].evidence["offer"] == "o-1"
    assert check.findings[0].evidence["clicked_at"] == 3


def test_a_stale_click_refused_later_is_neither_a_stale_click_nor_a_refused_offer():
    t = stale_then("refused")
    assert stale_click(t, NO_RECORDS, P).status == "clean"
    assert refused_offer(t, NO_RECORDS, P).status == "clean"


def test_a_stale_click_that_nothing_follows_is_clean_and_an_unfinished_store_is_unverifiable():
    t = conversation(
        (msg("Hello."), result("What next?", next_steps=[renew("o-1", "loan:L-1")])),
        (msg("Hmm."), result("What next?", next_steps=[renew("o-5", "loan:L-1")])),
        (click("o-1"), result("That button has expired.")),
        (msg("Renew Dune."), result("Renewed.")),
        events=[[], [], [], [event("e-1", 4, operation="renew", record="loan:L-1")]])
    assert stale_click(t, NO_RECORDS, P).status == "clean"     # turn 4's commit is not linked to o-1
    blind = transcript(*((tr.user, tr.result, tr.state if tr.index < 4 else None) for tr in t.turns),
                       initial_state=t.initial_state)
    assert stale_click(blind, NO_RECORDS, P).status == "unverifiable"


# --- an ask abandoned for another operation, and a new request in words --------------------------

def test_an_ask_abandoned_for_another_operation_does_not_address_the_new_write():
    t = conversation(
        (msg("Renew a loan."),
         result("Which loan, and for how long?", ask=ask("a-1", "renew", "loan:L-1", ("weeks",)))),
        (msg("Actually, place a hold."), result("Done.")),
        events=[[], [event("e-1", 2, operation="hold", record="loan:L-2")]])
    # The ask was for renew: its record says nothing about the hold, and nothing else does.
    check = wrong_record(t, NO_RECORDS, P)
    assert check.status == "unverifiable" and check.findings == ()


def test_a_new_request_in_words_starts_a_new_context_even_for_the_same_operation():
    def t(written: str):
        return conversation(
            (tagged("Renew Dune.", "renew-dune"),
             result("For how many weeks?", ask=ask("a-1", "renew", "loan:L-1", ("weeks",)))),
            (tagged("Renew Emma for two weeks.", "renew-emma"), result("Renewed.")),
            events=[[], [event("e-1", 2, operation="renew", record=written)]])

    assert wrong_record(t("loan:L-2"), RENEW_BOTH, P).status == "clean"
    check = wrong_record(t("loan:L-1"), RENEW_BOTH, P)
    assert turns_of(check) == [2]
    assert check.findings[0].evidence["addressed"] == ["loan:L-2"]
    assert check.findings[0].evidence["addressed_by"] == "step"


def test_an_ask_of_the_same_operation_addresses_a_write_several_answers_later():
    def t(written: str):
        return conversation(
            (tagged("Renew Dune.", "renew-dune"),
             result("For how many weeks?", ask=ask("a-1", "renew", "loan:L-1", ("weeks",)))),
            (tagged("Two weeks.", "renew-dune"),
             result("At which branch?", ask=ask("a-2", "renew", None, ("branch",)))),
            (tagged("Central.", "renew-dune"), result("Renewed.")),
            events=[[], [], [event("e-1", 3, operation="renew", record=written)]])

    assert wrong_record(t("loan:L-1"), NO_RECORDS, P).status == "clean"
    check = wrong_record(t("loan:L-2"), NO_RECORDS, P)
    assert turns_of(check) == [3] and check.findings[0].evidence["addressed_by"] == "ask"
    assert check.findings[0].evidence["addressed"] == ["loan:L-1"]


# --- two offers in flight -------------------------------------------------------------------------

def two_in_flight(second_click: str, hold_record: str = "loan:L-2"):
    return conversation(
        (msg("Hello."), result("What next?", next_steps=[renew("o-1", "loan:L-1"), offer("o-2", "hold", "loan:L-2")])),
        (click("o-1"), result("For how many weeks?", ask=ask("a-1", "renew", "loan:L-1", ("weeks",)),
                              next_steps=[offer("o-3", "hold", "loan:L-2")])),
        (click(second_click), result("Which branch?", ask=ask("a-2", "hold", "loan:L-2", ("branch",)))),
        (msg("Central."), result("Hold placed.")),
        (msg("Two weeks."), result("Sorry, Dune cannot be renewed again.")),
        events=[[], [], [], [event("e-1", 4, operation="hold", record=hold_record, offer=second_click)],
                [event("e-2", 5, operation="renew", record="loan:L-1", status="refused", offer="o-1")]])


def test_two_offers_in_flight_are_each_attributed_exactly():
    t = two_in_flight("o-3")
    check = refused_offer(t, NO_RECORDS, P)
    assert turns_of(check) == [5]
    assert [(f.evidence["offer"], f.evidence["taken_at"]) for f in check.findings] == [("o-1", 2)]
    assert check.checked_turns == 2              # both takes were followed to their events
    assert wrong_record(t, NO_RECORDS, P).status == "clean"
    assert stale_click(t, NO_RECORDS, P).status == "clean"


def test_two_offers_in_flight_one_clicked_stale_and_one_written_elsewhere():
    t = two_in_flight("o-2", hold_record="loan:L-1")
    stale = stale_click(t, NO_RECORDS, P)
    assert turns_of(stale) == [4] and stale.findings[0].evidence["offer"] == "o-2"
    wrong = wrong_record(t, NO_RECORDS, P)
    assert turns_of(wrong) == [4] and wrong.findings[0].evidence["addressed"] == ["loan:L-2"]
    assert [f.evidence["offer"] for f in refused_offer(t, NO_RECORDS, P).findings] == ["o-1"]


def test_an_offer_taken_twice_is_judged_by_the_take_in_force():
    t = conversation(
        (msg("Hello."), result("What next?", next_steps=[renew("o-1", "loan:L-1")])),
        (click("o-1"), result("For how many weeks?", ask=ask("a-1", "renew", "loan:L-1", ("weeks",)),
                              next_steps=[renew("o-7", "loan:L-2")])),
        (msg("Hmm."), result("What next?", next_steps=[renew("o-7", "loan:L-2")])),
        (click("o-1"), result("That button has expired.")),
        events=[[], [], [], [event("e-1", 4, operation="renew", record="loan:L-1", status="refused", offer="o-1")]])
    # The refusal came with the stale click of turn 4, not the fresh take of turn 2.
    assert refused_offer(t, NO_RECORDS, P).status == "clean"
    assert stale_click(t, NO_RECORDS, P).status == "clean"
