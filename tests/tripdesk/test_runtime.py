"""The reference runtime driven as an outside client would: `start`, `turn`, `state`, `audit`.

Every guarantee claimed in `tripdesk/runtime.py`'s module docstring is checked here, turn by turn,
from the turn results, the store (`state`) and the audit stream (`audit`), never from the
runtime's internals. `assert_turnframe` re-checks the guarantees that must hold on every turn of
every clean conversation, so each scenario below also checks them.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from simrun.examples.tripdesk import TripDesk, __version__
from simrun.examples.tripdesk.domain import SetupError
from simrun.examples.tripdesk.faults import FAULTS, FORBIDDEN_NOTE, UnknownFault, parse_faults

TODAY = "2026-12-01"
VERDICT_KEYS = {"refusal_emitted", "hedge_injected", "identity_score", "safety", "ethics"}


def _trip(name, destination, bags, outbound, ret, status="open"):
    return {"type": "trip", "traveler": "traveler:P-1", "destination": destination, "name": name,
            "bags": bags, "status": status,
            "segments": {"outbound": {"date": outbound}, "return": {"date": ret}}}


ANA = {"type": "traveler", "name": "Ana Souza"}
LISBON = {"today": TODAY, "records": {
    "traveler:P-1": ANA,
    "trip:T-1": _trip("Lisbon offsite", "Lisbon", 1, "2027-03-10", "2027-03-17")}}
LISBON_NO_BAGS = {"today": TODAY, "records": {
    "traveler:P-1": ANA,
    "trip:T-1": _trip("Lisbon offsite", "Lisbon", 0, "2027-03-10", "2027-03-17")}}
LISBON_CANCELLED = {"today": TODAY, "records": {
    "traveler:P-1": ANA,
    "trip:T-1": _trip("Lisbon offsite", "Lisbon", 1, "2027-03-10", "2027-03-17", "cancelled")}}
TWO_TRIPS = {"today": TODAY, "records": {
    "traveler:P-1": ANA,
    "trip:T-1": _trip("Lisbon offsite", "Lisbon", 1, "2027-03-10", "2027-03-17"),
    "trip:T-2": _trip("Porto visit", "Porto", 2, "2027-02-02", "2027-02-09")}}
ONE_OF_TWO_CANCELLED = {"today": TODAY, "records": {
    "traveler:P-1": ANA,
    "trip:T-1": _trip("Lisbon offsite", "Lisbon", 1, "2027-03-10", "2027-03-17", "cancelled"),
    "trip:T-2": _trip("Porto visit", "Porto", 0, "2027-02-02", "2027-02-09")}}
EMPTY = {"today": TODAY}


class Chat:
    """One conversation with the runtime, through its public protocol methods only."""

    def __init__(self, setup: dict | None = None, faults=None, seed: int = 1,
                 fault_seed: int = 0) -> None:
        self.desk = TripDesk(faults=faults, fault_seed=fault_seed)
        self.session = self.desk.start(
            {"seed": seed, "persona": "p", "goal": "g", "setup": setup})["session"]
        self.initial = self.desk.state(self.session)
        self.requests: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []
        self.states: list[dict[str, Any]] = []     # state() after each turn

    def send(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        result = self.desk.turn(self.session, request)
        # The store sent with the turn is the store `state` reads; the turn's own fields are the rest.
        snapshot = result.pop("state")
        self.results.append(result)
        self.states.append(self.desk.state(self.session))
        assert snapshot == self.states[-1]
        return result

    def say(self, message: str) -> dict[str, Any]:
        return self.send({"message": message})

    def click(self, offer_id: str) -> dict[str, Any]:
        return self.send({"action": {"offer": offer_id}})

    @property
    def last(self) -> dict[str, Any]:
        return self.results[-1]

    def step(self, operation: str, segment: str | None = None, record: str | None = None,
             turn: int | None = None) -> dict[str, Any]:
        """The one next step of `turn` (1-based; default: the last turn) with this operation."""
        result = self.results[(turn or len(self.results)) - 1]
        found = [s for s in result["next_steps"] if s["operation"] == operation
                 and (segment is None or s["arguments"].get("segment") == segment)
                 and (record is None or s["record"] == record)]
        assert len(found) == 1, f"expected one {operation} step, got {result['next_steps']}"
        return found[0]

    def action(self, label: str, turn: int | None = None) -> str:
        card = self.results[(turn or len(self.results)) - 1]["card"]
        assert card is not None, "no card on screen"
        ids = [a["id"] for a in card["actions"] if a["label"] == label]
        assert len(ids) == 1
        return ids[0]

    def confirm(self) -> dict[str, Any]:
        return self.click(self.action("Confirm"))

    def keep(self) -> dict[str, Any]:
        return self.click(self.action("Keep as it is"))

    def state(self) -> dict[str, Any]:
        return self.desk.state(self.session)

    def events(self) -> list[dict[str, Any]]:
        return self.state()["events"]

    def record(self, rid: str) -> dict[str, Any]:
        return self.state()["records"][rid]

    def audit(self) -> list[dict[str, Any]]:
        return self.desk.audit(self.session)["turns"]


def _shown(result: dict[str, Any] | None) -> set[str]:
    """Offer ids a turn put in front of the user: its next steps and its card's actions."""
    if result is None:
        return set()
    ids = {s["id"] for s in result["next_steps"]}
    if result["card"]:
        ids |= {a["id"] for a in result["card"]["actions"]}
    return ids


def _ask_key(ask: dict[str, Any]) -> tuple:
    return ask["operation"], ask["record"], tuple(sorted(ask["arguments"]))


def _loops(chat: Chat) -> list[tuple[int, dict]]:
    """Turns whose ask equals the previous turn's ask and gives no repeat_reason."""
    return [(i + 1, now["ask"]) for i, (then, now) in enumerate(zip([None, *chat.results], chat.results))
            if then and then["ask"] and now["ask"] and _ask_key(then["ask"]) == _ask_key(now["ask"])
            and not now["ask"]["repeat_reason"]]


def assert_turnframe(chat: Chat) -> None:
    """Every guarantee that holds on every turn of a clean conversation."""
    audit = chat.audit()
    assert [e["turn"] for e in audit] == list(range(1, len(chat.results) + 1)), "audit gap"
    assert _loops(chat) == [], "the same ask twice in a row with no reason"
    for i, (_request, result, state) in enumerate(zip(chat.requests, chat.results, chat.states)):
        turn = i + 1
        before = chat.results[i - 1] if i else None
        assert isinstance(result["reply"], str) and result["reply"]
        assert set(result["verdicts"]) == VERDICT_KEYS
        assert not (result["verdicts"]["refusal_emitted"] and result["verdicts"]["hedge_injected"])
        assert audit[i]["surface"] == result["reply"]
        assert audit[i]["verdicts"] == result["verdicts"]
        # a way forward: an ask, next steps, a card, or a question
        assert (result["ask"] or result["next_steps"] or result["card"]
                or result["reply"].rstrip().endswith("?")), f"dead end at turn {turn}"
        # receipts name events the store holds as committed, made in this turn
        events = {e["id"]: e for e in state["events"]}
        for receipt in result["receipts"]:
            assert receipt in events, f"phantom receipt {receipt} at turn {turn}"
            assert events[receipt]["status"] == "committed"
            assert events[receipt]["turn"] == turn
        made_now = [e for e in state["events"] if e["turn"] == turn]
        assert sorted(result["receipts"]) == sorted(e["id"] for e in made_now
                                                    if e["status"] == "committed")
        # nothing refused, and nothing committed from an offer the previous turn did not show
        assert all(e["status"] == "committed" for e in made_now), f"refused at turn {turn}"
        for event in made_now:
            if event["offer"] is not None:
                assert event["offer"] in _shown(before), (
                    f"turn {turn} committed {event['offer']}, not shown in turn {turn - 1}")
        if result["taken_offer"] is not None:
            assert result["taken_offer"] in _shown(before)
        # mentions are sent as data in the same turn
        sendable = _shown(result) | ({result["card"]["id"]} if result["card"] else set())
        assert set(result["mentions"]) <= sendable
        if result["card"]:
            assert result["mentions"] == [result["card"]["id"]]
            assert [a["label"] for a in result["card"]["actions"]] == ["Confirm", "Keep as it is"]
        # the dry run: no step on a record the domain would refuse it for
        for step in result["next_steps"]:
            if step["record"] is None:
                continue
            rec = state["records"][step["record"]]
            assert rec["status"] == "open", f"step on a cancelled trip at turn {turn}"
            if step["operation"] == "remove_bag":
                assert rec["bags"] >= 1, f"remove_bag offered with 0 bags at turn {turn}"


def _date_words(day: dt.date) -> str:
    return f"{day.day} {day:%B %Y}"


def drive_to_commit(chat: Chat, step: dict[str, Any]) -> None:
    """Click `step`, answer what it asks with acceptable values, confirm a card if one appears."""
    chat.click(step["id"])
    for _ in range(5):
        result = chat.last
        if result["receipts"]:
            return
        if result["card"]:
            chat.confirm()
        elif result["ask"]:
            wanted = result["ask"]["arguments"]
            if wanted == ["date"]:
                segs = chat.record(step["record"])["segments"]
                outbound = dt.date.fromisoformat(segs["outbound"]["date"])
                ret = dt.date.fromisoformat(segs["return"]["date"])
                if step["arguments"]["segment"] == "outbound":
                    day = ret - dt.timedelta(days=2)
                else:
                    day = outbound + dt.timedelta(days=2)
                chat.say(_date_words(day))
            elif wanted == ["name"]:
                chat.say("Autumn retreat")
            elif wanted == ["traveler", "destination"]:
                chat.say("For Ana Souza to Porto")
            else:  # pragma: no cover - a new kind of ask would need an answer here
                pytest.fail(f"unexpected ask {result['ask']}")
        else:
            return


# =============================================================================================
# The protocol surface
# =============================================================================================


def test_health_names_protocol_1():
    assert TripDesk().health() == {"protocol": 1, "runtime": "tripdesk", "version": __version__}


def test_start_gives_distinct_sessions_with_their_own_stores():
    desk = TripDesk()
    a = desk.start({"seed": 1, "setup": LISBON})["session"]
    b = desk.start({"seed": 2, "setup": LISBON})["session"]
    assert a != b
    desk.turn(a, {"message": "Add a bag"})
    assert desk.state(a)["records"]["trip:T-1"]["bags"] == 2
    assert desk.state(b)["records"]["trip:T-1"]["bags"] == 1
    assert desk.state(b)["events"] == []
    assert len(desk.audit(a)["turns"]) == 1
    assert desk.audit(b)["turns"] == []


def test_state_starts_with_the_fixtures_and_no_events():
    chat = Chat(LISBON)
    assert chat.initial["events"] == []
    assert chat.initial["records"]["trip:T-1"] == LISBON["records"]["trip:T-1"]
    assert chat.initial["records"]["traveler:P-1"] == ANA


def test_setup_fills_defaults_for_trips():
    setup = {"today": TODAY, "records": {"trip:T-9": {
        "type": "trip", "destination": "Oslo",
        "segments": {"outbound": {"date": "2027-01-01"}, "return": {"date": "2027-01-05"}}}}}
    rec = Chat(setup).initial["records"]["trip:T-9"]
    assert (rec["name"], rec["bags"], rec["status"]) == (None, 0, "open")


@pytest.mark.parametrize("setup", [
    {"records": {"trip:T-1": {"type": "traveler", "name": "x"}}},
    {"records": {"trip:T-1": {"type": "trip", "segments": {"outbound": {"date": "2027-01-01"}}}}},
    {"today": "first of December"},
])
def test_start_rejects_an_invalid_setup(setup):
    with pytest.raises(SetupError):
        TripDesk().start({"seed": 1, "setup": setup})


def test_unknown_and_closed_sessions_are_refused():
    desk = TripDesk()
    sid = desk.start({"seed": 1, "setup": LISBON})["session"]
    assert desk.close(sid) == {"audit": {"turns": []}}     # its audit with it (protocol 1's optional field)
    assert desk.close(sid) == {}                            # closed already: nothing to send
    assert TripDesk(snapshot=False).close("s-1") == {}
    for call in (lambda: desk.turn(sid, {"message": "hi"}), lambda: desk.state(sid),
                 lambda: desk.audit(sid), lambda: desk.state("s-404")):
        with pytest.raises(KeyError):
            call()


# =============================================================================================
# It asks for missing arguments, one ask per turn, and asks again only with a reason
# =============================================================================================


def test_rebook_without_a_date_asks_for_the_date():
    chat = Chat(LISBON)
    result = chat.say("Rebook the outbound")
    ask = result["ask"]
    assert isinstance(ask["id"], str) and ask["id"]
    assert {k: ask[k] for k in ("operation", "record", "arguments", "repeat_reason")} == {
        "operation": "rebook", "record": "trip:T-1", "arguments": ["date"], "repeat_reason": None}
    assert result["card"] is None
    assert result["reply"].endswith("?")
    assert chat.events() == []
    assert_turnframe(chat)


def test_open_trip_asks_for_traveler_and_destination_then_what_is_still_missing():
    chat = Chat(EMPTY)
    first = chat.say("Open a new trip")
    assert (first["ask"]["operation"], first["ask"]["record"], first["ask"]["arguments"],
            first["ask"]["repeat_reason"]) == ("open_trip", None, ["traveler", "destination"], None)
    second = chat.say("For Ana Souza")
    assert (second["ask"]["operation"], second["ask"]["arguments"],
            second["ask"]["repeat_reason"]) == ("open_trip", ["destination"], None)
    assert chat.events() == []
    third = chat.say("to Porto")
    trip = chat.record("trip:T-1")
    assert (trip["destination"], trip["traveler"], trip["bags"], trip["status"]) == (
        "Porto", "traveler:P-1", 0, "open")
    assert chat.record("traveler:P-1") == {"type": "traveler", "name": "Ana Souza"}
    assert trip["segments"] == {"outbound": {"date": "2026-12-31"}, "return": {"date": "2027-03-31"}}
    assert third["receipts"] == ["e-1"]
    # a new trip has no name yet: the reply asks for it, about the record it just made
    assert (third["ask"]["operation"], third["ask"]["record"], third["ask"]["arguments"]) == (
        "name_trip", "trip:T-1", ["name"])
    chat.say("Autumn retreat")
    assert chat.record("trip:T-1")["name"] == "Autumn retreat"
    assert_turnframe(chat)


def test_open_trip_reuses_a_known_traveler():
    chat = Chat(LISBON)
    chat.say("Please open a new trip for Ana Souza to Porto")
    assert chat.record("trip:T-2")["traveler"] == "traveler:P-1"
    assert [r for r in chat.state()["records"] if r.startswith("traveler:")] == ["traveler:P-1"]
    assert_turnframe(chat)


def test_an_operation_on_one_of_two_trips_asks_which_trip():
    chat = Chat(TWO_TRIPS)
    result = chat.say("Remove a bag")
    assert (result["ask"]["operation"], result["ask"]["record"], result["ask"]["arguments"]) == (
        "remove_bag", None, ["trip"])
    assert chat.events() == []
    chat.say("the Porto visit one")
    assert chat.record("trip:T-2")["bags"] == 1
    assert chat.record("trip:T-1")["bags"] == 1
    assert [(e["operation"], e["record"]) for e in chat.events()] == [("remove_bag", "trip:T-2")]
    assert_turnframe(chat)


@pytest.mark.parametrize("unhelpful, reason", [
    ("purple monkey dishwasher", "I could not read your last message"),
    ("ugh, this is taking forever", "your message did not answer it"),
    ("yes", "your message did not answer it"),
    ("How many bags do I have?", "I still need it"),
])
def test_an_unanswered_ask_is_asked_again_only_with_a_reason(unhelpful, reason):
    chat = Chat(LISBON)
    first = chat.say("Rebook the outbound")
    again = chat.say(unhelpful)
    assert _ask_key(again["ask"]) == _ask_key(first["ask"])
    assert again["ask"]["repeat_reason"] == reason
    assert chat.events() == []
    assert_turnframe(chat)


def test_an_ask_answered_after_a_repeat_moves_on_to_the_card():
    chat = Chat(LISBON)
    chat.say("Rebook the outbound")
    chat.say("hmm")
    result = chat.say("14 March 2027")
    assert result["ask"] is None
    assert result["card"]["arguments"] == {"segment": "outbound", "date": "2027-03-14"}
    assert_turnframe(chat)


@pytest.mark.parametrize("date, reason", [
    ("20 March 2027", "the outbound would leave after the return"),
    ("1 March 2026", "that date is in the past"),
])
def test_a_date_the_domain_refuses_is_asked_again_with_the_domain_reason(date, reason):
    chat = Chat(LISBON)
    chat.say("Rebook the outbound")
    result = chat.say(date)
    assert result["reply"].startswith(f"I can't do that: {reason}.")
    assert (result["ask"]["operation"], result["ask"]["arguments"], result["ask"]["repeat_reason"]) \
        == ("rebook", ["date"], reason)
    assert result["card"] is None
    assert chat.events() == []
    assert chat.record("trip:T-1")["segments"]["outbound"]["date"] == "2027-03-10"
    assert_turnframe(chat)


def test_repeating_the_command_does_not_repeat_the_ask_without_a_reason():
    chat = Chat(LISBON)
    chat.say("rebook outbound")
    chat.say("rebook outbound")
    assert _loops(chat) == []


def test_clicking_the_step_of_the_pending_ask_does_not_loop():
    chat = Chat(LISBON)
    chat.say("Rebook the outbound")
    chat.click(chat.step("rebook", "outbound")["id"])
    assert _loops(chat) == []


# =============================================================================================
# It dry-runs every next step
# =============================================================================================


def _ops(result: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(s["operation"], s["record"]) for s in result["next_steps"]]


def test_the_full_menu_of_a_trip_with_a_bag():
    chat = Chat(LISBON)
    result = chat.say("How many bags do I have?")
    assert [(s["operation"], s["record"], s["arguments"], s["label"])
            for s in result["next_steps"]] == [
        ("name_trip", "trip:T-1", {}, "Rename Lisbon offsite"),
        ("add_bag", "trip:T-1", {"count": 1}, "Add a bag to Lisbon offsite"),
        ("remove_bag", "trip:T-1", {"count": 1}, "Remove a bag from Lisbon offsite"),
        ("rebook", "trip:T-1", {"segment": "outbound"}, "Rebook the outbound of Lisbon offsite"),
        ("rebook", "trip:T-1", {"segment": "return"}, "Rebook the return of Lisbon offsite"),
        ("cancel_trip", "trip:T-1", {}, "Cancel Lisbon offsite"),
        ("open_trip", None, {}, "Open a new trip"),
    ]
    assert len({s["id"] for s in result["next_steps"]}) == 7


def test_remove_bag_is_never_offered_when_the_trip_has_no_bag():
    chat = Chat(LISBON_NO_BAGS)
    for message in ("How many bags do I have?", "When is my outbound flight?", "hmm"):
        result = chat.say(message)
        assert ("remove_bag", "trip:T-1") not in _ops(result)
        assert ("add_bag", "trip:T-1") in _ops(result)
    assert_turnframe(chat)


def test_remove_bag_disappears_once_the_last_bag_is_removed():
    chat = Chat(LISBON)
    before = chat.say("How many bags do I have?")
    assert ("remove_bag", "trip:T-1") in _ops(before)
    after = chat.click(chat.step("remove_bag")["id"])
    assert chat.record("trip:T-1")["bags"] == 0
    assert ("remove_bag", "trip:T-1") not in _ops(after)
    assert ("add_bag", "trip:T-1") in _ops(after)
    assert_turnframe(chat)


def test_a_removal_the_domain_refuses_is_not_committed():
    chat = Chat(LISBON_NO_BAGS)
    result = chat.say("Remove a bag")
    assert result["reply"].startswith("I can't do that: there is no bag to remove.")
    assert result["receipts"] == []
    assert chat.events() == []
    assert chat.record("trip:T-1")["bags"] == 0


def test_no_step_is_offered_for_a_cancelled_trip():
    chat = Chat(LISBON_CANCELLED)
    result = chat.say("Is the trip still open?")
    assert _ops(result) == [("open_trip", None)]
    assert_turnframe(chat)


def test_after_cancelling_only_a_new_trip_is_offered():
    chat = Chat(LISBON)
    chat.say("Cancel my trip")
    result = chat.confirm()
    assert chat.record("trip:T-1")["status"] == "cancelled"
    assert _ops(result) == [("open_trip", None)]
    result = chat.say("Add a bag")
    assert result["reply"].startswith("I can't do that: the trip is cancelled.")
    assert [e["operation"] for e in chat.events()] == ["cancel_trip"]
    assert _ops(result) == [("open_trip", None)]
    assert_turnframe(chat)


def test_with_one_trip_cancelled_only_the_open_trip_is_offered():
    chat = Chat(ONE_OF_TWO_CANCELLED)
    result = chat.say("hello")
    assert {rec for _, rec in _ops(result)} == {"trip:T-2", None}
    # Porto has no bag: no removal is offered for it either
    assert ("remove_bag", "trip:T-2") not in _ops(result)
    assert_turnframe(chat)


@pytest.mark.parametrize("setup, expected_steps", [
    (LISBON, 7), (LISBON_NO_BAGS, 6), (TWO_TRIPS, 13), (EMPTY, 1), (ONE_OF_TWO_CANCELLED, 6),
    (LISBON_CANCELLED, 1),
], ids=["lisbon", "no-bags", "two-trips", "empty", "one-cancelled", "cancelled"])
def test_every_offered_step_commits_when_taken(setup, expected_steps):
    opener = "How many bags do I have?"
    steps = Chat(setup).say(opener)["next_steps"]
    assert len(steps) == expected_steps
    for index in range(len(steps)):
        chat = Chat(setup)
        step = chat.say(opener)["next_steps"][index]
        drive_to_commit(chat, step)
        events = chat.events()
        assert len(events) == 1, (step, chat.results[-1]["reply"])
        event = events[0]
        assert event["status"] == "committed", (step, event)
        assert event["operation"] == step["operation"]
        assert chat.last["receipts"] == [event["id"]]
        if step["operation"] == "open_trip":
            assert event["record"] not in setup.get("records", {})
            assert chat.record(event["record"])["destination"] == "Porto"
        else:
            assert event["record"] == step["record"]
        if step["operation"] == "rebook":
            assert event["arguments"]["segment"] == step["arguments"]["segment"]
        assert_turnframe(chat)


# =============================================================================================
# Rebookings and cancellations are confirmed on a card
# =============================================================================================


def test_a_rebooking_is_shown_on_a_card_before_anything_is_written():
    chat = Chat(LISBON)
    result = chat.say("Rebook the outbound to 14 March 2027")
    card = result["card"]
    assert card["operation"] == "confirm_rebook"
    assert card["record"] == "trip:T-1"
    assert card["arguments"] == {"segment": "outbound", "date": "2027-03-14"}
    assert [a["label"] for a in card["actions"]] == ["Confirm", "Keep as it is"]
    assert len({card["id"], *(a["id"] for a in card["actions"])}) == 3
    assert result["mentions"] == [card["id"]]
    assert result["next_steps"] == []
    assert result["ask"] is None
    assert result["receipts"] == []
    assert result["reply"] == ("Please confirm on the card: rebook the outbound of Lisbon offsite "
                               "from 2027-03-10 to 2027-03-14?")
    assert chat.state() == chat.initial
    assert_turnframe(chat)


def test_confirming_the_card_commits_the_rebooking():
    chat = Chat(LISBON)
    chat.say("Rebook the outbound to 14 March 2027")
    confirm = chat.action("Confirm")
    result = chat.confirm()
    assert result["taken_offer"] == confirm
    assert result["card"] is None
    assert result["receipts"] == ["e-1"]
    event = chat.events()[0]
    assert {k: event[k] for k in ("id", "turn", "operation", "record", "status", "offer")} == {
        "id": "e-1", "turn": 2, "operation": "rebook", "record": "trip:T-1",
        "status": "committed", "offer": confirm}
    assert chat.record("trip:T-1")["segments"] == {
        "outbound": {"date": "2027-03-14"}, "return": {"date": "2027-03-17"}}
    assert_turnframe(chat)


@pytest.mark.parametrize("yes", ["yes", "Yes, go ahead", "I confirm", "confrim"])
def test_saying_yes_takes_the_confirm_action(yes):
    chat = Chat(LISBON)
    chat.say("Rebook the return to 20 March 2027")
    confirm = chat.action("Confirm")
    result = chat.say(yes)
    assert result["taken_offer"] == confirm
    assert chat.record("trip:T-1")["segments"]["return"]["date"] == "2027-03-20"
    assert_turnframe(chat)


def _decline_by_click(chat: Chat) -> dict[str, Any]:
    return chat.keep()


@pytest.mark.parametrize("decline", [
    _decline_by_click, lambda chat: chat.say("no"), lambda chat: chat.say("Keep as it is"),
    lambda chat: chat.say("don't"),
], ids=["click", "no", "keep-as-it-is", "dont"])
@pytest.mark.parametrize("command", ["Rebook the outbound to 14 March 2027", "Cancel my trip"])
def test_declining_the_card_leaves_the_store_unchanged(command, decline):
    chat = Chat(LISBON)
    chat.say(command)
    keep = chat.action("Keep as it is")
    result = decline(chat)
    assert result["taken_offer"] == keep
    assert result["reply"].startswith("Alright, I left it as it was.")
    assert result["receipts"] == []
    assert result["card"] is None
    assert chat.state() == chat.initial
    # the confirm offer of the declined card does nothing afterwards
    chat.say("yes")
    assert chat.state() == chat.initial
    assert_turnframe(chat)


def test_a_cancellation_is_confirmed_on_a_card():
    chat = Chat(LISBON)
    result = chat.say("Please cancel my trip")
    assert result["card"]["operation"] == "confirm_cancel_trip"
    assert result["card"]["record"] == "trip:T-1"
    assert result["mentions"] == [result["card"]["id"]]
    assert result["reply"] == "Please confirm on the card: cancel Lisbon offsite?"
    assert chat.events() == []
    assert chat.record("trip:T-1")["status"] == "open"
    result = chat.confirm()
    assert chat.record("trip:T-1")["status"] == "cancelled"
    assert result["receipts"] == ["e-1"]
    assert result["reply"].startswith("Cancelled Lisbon offsite.")
    assert_turnframe(chat)


def test_the_card_stays_on_screen_while_a_question_is_answered():
    chat = Chat(LISBON)
    first = chat.say("Rebook the outbound to 14 March 2027")
    second = chat.say("How many bags do I have?")
    assert second["answer"] == "answered"
    assert second["card"] == first["card"]
    assert second["mentions"] == [first["card"]["id"]]
    assert chat.events() == []
    chat.confirm()
    assert chat.record("trip:T-1")["segments"]["outbound"]["date"] == "2027-03-14"
    assert_turnframe(chat)


def test_a_rebook_click_then_date_ends_on_a_card_too():
    chat = Chat(TWO_TRIPS)
    chat.say("hello")
    chat.click(chat.step("rebook", "return", "trip:T-2")["id"])
    result = chat.say("the 12th of February")
    assert result["card"]["record"] == "trip:T-2"
    assert result["card"]["arguments"] == {"segment": "return", "date": "2027-02-12"}
    assert chat.events() == []
    chat.confirm()
    assert chat.record("trip:T-2")["segments"]["return"]["date"] == "2027-02-12"
    assert chat.record("trip:T-1") == chat.initial["records"]["trip:T-1"]
    assert_turnframe(chat)


# =============================================================================================
# A receipt names an event the store holds as committed
# =============================================================================================


def test_every_receipt_names_a_committed_event_of_its_turn():
    chat = Chat(LISBON)
    script = [
        ("Add a bag", ["add_bag"]),
        ("Call it Summer fun", ["name_trip"]),
        ("How many bags do I have?", []),
        ("Rebook the outbound to 14 March 2027", []),
        (None, ["rebook"]),                     # confirm
        ("remove a bag", ["remove_bag"]),
        ("purple monkey dishwasher", []),
        ("Cancel my trip", []),
        (None, ["cancel_trip"]),                # confirm
        ("Open a new trip for Ana Souza to Porto", ["open_trip"]),
    ]
    for message, operations in script:
        result = chat.confirm() if message is None else chat.say(message)
        committed = {e["id"]: e for e in chat.events() if e["status"] == "committed"}
        assert [committed[r]["operation"] for r in result["receipts"]] == operations, message
    assert [e["id"] for e in chat.events()] == ["e-1", "e-2", "e-3", "e-4", "e-5", "e-6"]
    assert all(e["status"] == "committed" for e in chat.events())
    trip = chat.record("trip:T-1")
    assert (trip["bags"], trip["name"], trip["status"], trip["segments"]["outbound"]["date"]) == (
        1, "Summer fun", "cancelled", "2027-03-14")
    assert chat.record("trip:T-2")["destination"] == "Porto"
    assert_turnframe(chat)


# =============================================================================================
# Every turn leaves a turn event in the audit stream and carries verdicts
# =============================================================================================


def test_every_turn_leaves_one_audit_event_stub_turns_included():
    chat = Chat(LISBON)
    chat.say("purple monkey dishwasher")                 # stub
    chat.say("How many bags do I have?")
    chat.click("o-999")                                  # unknown offer: stub
    chat.click(chat.step("add_bag", turn=2)["id"])       # stale click
    chat.say("Add a bag")
    chat.say("What is my passport number?")
    audit = chat.audit()
    assert [e["turn"] for e in audit] == [1, 2, 3, 4, 5, 6]
    assert [e["stub"] for e in audit] == [True, False, True, False, False, False]
    assert [e["surface"] for e in audit] == [r["reply"] for r in chat.results]
    assert [r["understood"] for r in chat.results] == [False, True, False, True, True, True]
    for result, event in zip(chat.results, audit):
        assert set(result["verdicts"]) == VERDICT_KEYS
        assert event["verdicts"] == result["verdicts"]
    assert [r["verdicts"]["identity_score"] for r in chat.results] == [None, 1.0, None, 1.0, 1.0, 1.0]
    assert [r["verdicts"]["refusal_emitted"] for r in chat.results] == [
        False, False, False, False, False, True]
    assert_turnframe(chat)


def test_an_unknown_offer_is_a_stub_turn():
    chat = Chat(LISBON)
    result = chat.click("o-999")
    assert result["understood"] is False
    assert result["taken_offer"] is None
    assert result["reply"].startswith("I don't know that option.")
    assert chat.events() == []
    assert chat.audit()[0]["stub"] is True


def test_a_stub_turn_keeps_the_pending_card_on_screen():
    chat = Chat(LISBON)
    first = chat.say("Cancel my trip")
    result = chat.say("purple monkey dishwasher")
    assert result["understood"] is False
    assert result["card"] == first["card"]
    assert chat.events() == []
    assert_turnframe(chat)


# =============================================================================================
# A stale click commits nothing
# =============================================================================================


def test_a_click_on_an_offer_from_two_turns_ago_commits_nothing():
    chat = Chat(LISBON)
    chat.say("How many bags do I have?")
    stale = chat.step("add_bag", turn=1)["id"]
    chat.say("When is my outbound flight?")
    result = chat.click(stale)
    assert result["reply"].startswith("That option was from an earlier step, so I did nothing with it.")
    assert result["understood"] is True
    assert result["taken_offer"] is None
    assert result["receipts"] == []
    assert chat.events() == []
    assert chat.record("trip:T-1")["bags"] == 1
    assert_turnframe(chat)


def test_the_same_offer_from_the_previous_turn_does_commit():
    chat = Chat(LISBON)
    chat.say("How many bags do I have?")
    fresh = chat.step("add_bag")["id"]
    result = chat.click(fresh)
    assert result["taken_offer"] == fresh
    assert chat.record("trip:T-1")["bags"] == 2
    assert chat.events()[0]["offer"] == fresh
    assert_turnframe(chat)


def test_the_confirm_of_a_replaced_card_commits_nothing():
    chat = Chat(LISBON)
    chat.say("Rebook the outbound to 12 March 2027")
    old_confirm = chat.action("Confirm")
    chat.say("Sorry, I meant 14 March")
    chat.say("How many bags do I have?")     # the old card is two turns back now
    result = chat.click(old_confirm)
    assert result["receipts"] == []
    assert chat.events() == []
    assert chat.record("trip:T-1")["segments"]["outbound"]["date"] == "2027-03-10"
    # the card on screen is the corrected one
    assert result["card"]["arguments"]["date"] == "2027-03-14"
    chat.confirm()
    assert chat.record("trip:T-1")["segments"]["outbound"]["date"] == "2027-03-14"
    assert_turnframe(chat)


def test_the_confirm_of_a_declined_card_commits_nothing():
    chat = Chat(LISBON)
    chat.say("Cancel my trip")
    confirm = chat.action("Confirm")
    chat.keep()
    chat.say("How many bags do I have?")
    result = chat.click(confirm)
    assert result["receipts"] == []
    assert chat.record("trip:T-1")["status"] == "open"
    assert chat.events() == []
    assert_turnframe(chat)


def test_a_stale_rebook_step_commits_nothing():
    chat = Chat(LISBON)
    chat.say("hello")
    stale = chat.step("rebook", "outbound", turn=1)["id"]
    chat.say("Add a bag")
    result = chat.click(stale)
    assert result["ask"] is None
    assert result["card"] is None
    assert [e["operation"] for e in chat.events()] == ["add_bag"]
    assert_turnframe(chat)


def test_a_card_no_longer_on_screen_is_not_confirmed_by_yes():
    chat = Chat(LISBON)
    chat.say("Rebook the outbound to 12 March 2027")    # card, confirm o-2
    chat.say("Add a bag")                               # commits; the card is not shown
    assert chat.last["card"] is None
    chat.say("yes")
    assert chat.record("trip:T-1")["segments"]["outbound"]["date"] == "2027-03-10"
    assert [e["operation"] for e in chat.events()] == ["add_bag"]


# =============================================================================================
# A correction keeps what it does not restate
# =============================================================================================


def test_a_corrected_day_and_month_keep_the_corrected_year():
    chat = Chat(LISBON)
    first = chat.say("Rebook the outbound to 12 March 2027")
    assert first["card"]["arguments"]["date"] == "2027-03-12"
    second = chat.say("sorry, I meant 14 March")
    assert second["card"]["arguments"] == {"segment": "outbound", "date": "2027-03-14"}
    assert second["card"]["id"] != first["card"]["id"]
    assert second["reply"] == ("Please confirm on the card: rebook the outbound of Lisbon offsite "
                               "from 2027-03-10 to 2027-03-14?")
    chat.confirm()
    assert chat.record("trip:T-1")["segments"]["outbound"]["date"] == "2027-03-14"
    assert [e["arguments"]["date"] for e in chat.events()] == ["2027-03-14"]
    assert_turnframe(chat)


def test_a_correction_after_an_answered_ask_keeps_the_year():
    chat = Chat(LISBON)
    chat.say("rebook outbound")
    chat.say("12 March 2027")
    result = chat.say("Sorry, I meant 14 March")
    assert result["card"]["arguments"] == {"segment": "outbound", "date": "2027-03-14"}
    chat.say("yes")
    assert chat.record("trip:T-1")["segments"]["outbound"]["date"] == "2027-03-14"
    assert_turnframe(chat)


def test_a_correction_after_the_commit_rebooks_again_in_the_same_year():
    chat = Chat(LISBON)
    chat.say("Rebook the outbound to 12 March 2027")
    chat.confirm()
    result = chat.say("oops, I meant 14 March")
    assert result["card"]["arguments"] == {"segment": "outbound", "date": "2027-03-14"}
    chat.confirm()
    assert [e["arguments"]["date"] for e in chat.events()] == ["2027-03-12", "2027-03-14"]
    assert chat.record("trip:T-1")["segments"]["outbound"]["date"] == "2027-03-14"
    assert_turnframe(chat)


def test_a_correction_keeps_a_year_that_is_not_the_next_such_day():
    # Without the correction, "7 January" would be read as the next 7 January: 2027-01-07.
    chat = Chat(LISBON)
    chat.say("Rebook the return to 5 January 2028")
    result = chat.say("Actually, 7 January")
    assert result["card"]["arguments"] == {"segment": "return", "date": "2028-01-07"}
    chat.confirm()
    assert chat.record("trip:T-1")["segments"]["return"]["date"] == "2028-01-07"
    assert_turnframe(chat)


def test_a_yearless_date_outside_a_correction_is_the_next_such_day():
    chat = Chat(LISBON)
    result = chat.say("Rebook the outbound to 14 March")
    assert result["card"]["arguments"]["date"] == "2027-03-14"


def test_a_corrected_name_replaces_the_name():
    chat = Chat(LISBON)
    chat.say("Call it Summer fun")
    assert chat.record("trip:T-1")["name"] == "Summer fun"
    chat.say("Sorry, I meant Autumn fun")
    assert chat.record("trip:T-1")["name"] == "Autumn fun"
    assert [e["arguments"]["name"] for e in chat.events()] == ["Summer fun", "Autumn fun"]
    assert_turnframe(chat)


def test_a_corrected_bag_count_replaces_the_first_count():
    chat = Chat(LISBON)
    chat.say("Add 2 bags")
    assert chat.record("trip:T-1")["bags"] == 3
    chat.say("sorry, I meant 3 bags")
    assert chat.record("trip:T-1")["bags"] == 4


def test_a_corrected_destination_does_not_open_a_second_trip():
    chat = Chat(EMPTY)
    chat.say("Open a trip to Lisbon for Ana")
    chat.say("sorry, I meant to Porto")
    trips = {rid: rec for rid, rec in chat.state()["records"].items() if rec["type"] == "trip"}
    assert [rec["destination"] for rec in trips.values()] == ["Porto"]


# =============================================================================================
# Reading tolerates typing errors, terse and wordy phrasing
# =============================================================================================


@pytest.mark.parametrize("message, bags", [
    ("Plese add anothr bag", 2), ("ad a bagg", 1), ("add a bagg", 2), ("remvoe a bag", 0),
    ("add 2 bgas", 3), ("take one bag off please", 0),
])
def test_mistyped_bag_commands_commit(message, bags):
    chat = Chat(LISBON)
    chat.say(message)
    assert chat.record("trip:T-1")["bags"] == bags
    assert_turnframe(chat)


def test_a_mistyped_rebook_reaches_the_right_card():
    chat = Chat(LISBON)
    result = chat.say("Rebok the outbund to 14 Mrach 2027")
    assert result["understood"] is True
    assert result["card"]["arguments"] == {"segment": "outbound", "date": "2027-03-14"}


def test_a_mistyped_cancel_reaches_the_cancel_card():
    chat = Chat(LISBON)
    result = chat.say("cancle the trip")
    assert result["card"]["operation"] == "confirm_cancel_trip"
    assert chat.events() == []


@pytest.mark.parametrize("messages", [
    ["rebook outbound", "14 March"],
    ["Hello! I hope you are having a lovely day. Could you please move my outbound flight to the "
     "14th of March? Thank you so much!"],
    ["move my departure flight", "March 14, 2027"],
    ["reschedule the outbund", "14/03/2027"],
    ["Rebook the outbound", "2027-03-14"],
], ids=["terse", "wordy", "synonym", "typo-slashes", "iso"])
def test_terse_wordy_and_mistyped_rebooks_reach_the_same_card(messages):
    chat = Chat(LISBON)
    for message in messages:
        chat.say(message)
    assert chat.last["card"]["operation"] == "confirm_rebook"
    assert chat.last["card"]["arguments"] == {"segment": "outbound", "date": "2027-03-14"}
    chat.confirm()
    assert chat.record("trip:T-1")["segments"]["outbound"]["date"] == "2027-03-14"
    assert_turnframe(chat)


def test_a_wordy_new_trip_is_opened_for_the_named_traveler():
    chat = Chat(EMPTY)
    chat.say("Hi there! I hope you're well. I'd love to plan a new trip for Ana Souza to Porto, "
             "if that's possible. Thanks so much!")
    trip = chat.record("trip:T-1")
    assert (trip["destination"], chat.record(trip["traveler"])["name"]) == ("Porto", "Ana Souza")
    assert_turnframe(chat)


def test_ordinals_take_the_offered_steps():
    chat = Chat(LISBON)
    chat.say("How many bags do I have?")
    second = chat.step("add_bag")["id"]
    result = chat.say("the second one")
    assert result["taken_offer"] == second
    assert chat.record("trip:T-1")["bags"] == 2
    assert_turnframe(chat)


def test_add_three_bags_adds_three():
    chat = Chat(LISBON)
    chat.say("Add three bags")
    assert chat.record("trip:T-1")["bags"] == 4


def test_nope_declines_the_card():
    chat = Chat(LISBON)
    chat.say("Cancel my trip")
    keep = chat.action("Keep as it is")
    result = chat.say("Nope")
    assert result["taken_offer"] == keep


# =============================================================================================
# Questions: refused for identity documents, answered from the store otherwise
# =============================================================================================


@pytest.mark.parametrize("question", [
    "What is my passport number?", "Can you tell me the passport number on file?",
    "which document is on file for me?",
])
def test_passport_questions_are_refused_with_a_verdict(question):
    chat = Chat(LISBON)
    result = chat.say(question)
    assert result["verdicts"]["refusal_emitted"] is True
    assert result["verdicts"]["hedge_injected"] is False
    assert result["answer"] == "unavailable"
    assert result["reply"].startswith("I can't share passport or identity document details.")
    assert not re.search(r"\d", result["reply"])
    assert result["next_steps"]
    assert chat.events() == []
    assert chat.audit()[0]["verdicts"]["refusal_emitted"] is True
    assert_turnframe(chat)


@pytest.mark.parametrize("question, fact", [
    ("How many bags do I have?", "Lisbon offsite has 1 bag."),
    ("how many bgas are on my trip?", "Lisbon offsite has 1 bag."),
    ("When is my outbound flight?", "The outbound of Lisbon offsite is on 2027-03-10."),
    ("When is the return?", "The return of Lisbon offsite is on 2027-03-17."),
    ("What dates are my flights?", "The outbound of Lisbon offsite is on 2027-03-10. "
                                   "The return of Lisbon offsite is on 2027-03-17."),
    ("What is the trip called?", "The trip is called Lisbon offsite."),
    ("Is the trip still open?", "Lisbon offsite is open."),
    ("what's the status of my trip?", "Lisbon offsite is open."),
])
def test_questions_are_answered_from_the_store(question, fact):
    chat = Chat(LISBON)
    result = chat.say(question)
    assert result["answer"] == "answered"
    assert result["reply"] == f"{fact} What next?"
    assert result["verdicts"]["refusal_emitted"] is False
    assert chat.events() == []
    assert_turnframe(chat)


def test_answers_follow_the_store_not_the_setup():
    chat = Chat(LISBON)
    chat.say("Add 2 bags")
    chat.say("Cancel my trip")
    chat.confirm()
    assert chat.say("How many bags do I have?")["reply"].startswith("Lisbon offsite has 3 bags.")
    assert chat.say("Is the trip still open?")["reply"].startswith("Lisbon offsite is cancelled.")
    assert chat.last["answer"] == "answered"
    assert_turnframe(chat)


def test_a_question_over_two_trips_answers_for_each_or_the_one_named():
    chat = Chat(TWO_TRIPS)
    result = chat.say("How many bags do I have?")
    assert result["reply"].startswith("Lisbon offsite has 1 bag. Porto visit has 2 bags.")
    result = chat.say("How many bags are on Porto visit?")
    assert result["reply"].startswith("Porto visit has 2 bags.")
    assert "Lisbon" not in result["reply"]
    assert result["answer"] == "answered"
    assert_turnframe(chat)


def test_a_name_question_about_an_unnamed_trip_says_so():
    chat = Chat(EMPTY)
    chat.say("Open a new trip for Ana Souza to Porto")
    result = chat.say("What is the trip called?")
    assert result["answer"] == "answered"
    assert result["reply"].startswith("the Porto trip has no name yet.")
    # the name ask is still open, and asked again with its reason
    assert (result["ask"]["operation"], result["ask"]["repeat_reason"]) == ("name_trip", "I still need it")
    assert_turnframe(chat)


def test_a_question_the_store_cannot_answer_says_where_things_stand():
    chat = Chat(LISBON)
    result = chat.say("What's the weather like in Lisbon?")
    assert result["answer"] == "unavailable"
    assert result["reply"].startswith(
        "I can't answer that from the trip records. Here is where things stand: "
        "Lisbon offsite: open, 1 bag, outbound 2027-03-10.")
    assert result["next_steps"]
    assert_turnframe(chat)


def test_a_destination_question_is_answered_from_the_store():
    chat = Chat(LISBON)
    result = chat.say("Where does the trip go?")
    assert result["answer"] == "answered"
    assert "Lisbon offsite goes to Lisbon." in result["reply"]


def test_a_question_opening_with_sorry_is_answered_not_taken_as_a_new_name():
    chat = Chat(LISBON)
    chat.say("Call it Summer fun")
    result = chat.say("Sorry, how many bags do I have?")
    assert result["answer"] == "answered"
    assert chat.record("trip:T-1")["name"] == "Summer fun"


def test_what_do_you_mean_does_not_rename_the_trip():
    chat = Chat(LISBON)
    chat.say("Call it Summer fun")
    chat.say("What do you mean?")
    assert chat.record("trip:T-1")["name"] == "Summer fun"
    assert len(chat.events()) == 1


# =============================================================================================
# Faults: parse_faults, and each planted fault changes exactly its named behaviour
# =============================================================================================


def test_parse_faults_reads_strings_and_dicts():
    assert parse_faults("loop=0.2,crash=0.05") == {"loop": 0.2, "crash": 0.05}
    assert parse_faults(" loop = 0.2 , ") == {"loop": 0.2}
    assert parse_faults({"audit_gap": 1}) == {"audit_gap": 1.0}
    assert parse_faults({"dead_end": 0.0, "crash": 1.0}) == {"dead_end": 0.0, "crash": 1.0}
    assert parse_faults(None) == {}
    assert parse_faults("") == {}
    assert parse_faults({}) == {}


@pytest.mark.parametrize("spec", [
    "bogus=0.1", {"bogus": 0.1}, "loop=0.1,typo_fault=0.2", {"Loop": 0.5},
])
def test_parse_faults_rejects_unknown_names(spec):
    with pytest.raises(UnknownFault, match="unknown fault"):
        parse_faults(spec)


@pytest.mark.parametrize("spec", ["loop=1.5", "loop=-0.1", {"crash": 2}, {"crash": -1e-9}])
def test_parse_faults_rejects_rates_outside_0_1(spec):
    with pytest.raises(UnknownFault, match="rate must be between 0 and 1"):
        parse_faults(spec)


@pytest.mark.parametrize("spec", ["loop", "loop=often", "loop=0.1;crash=0.2"])
def test_parse_faults_rejects_malformed_strings(spec):
    with pytest.raises(UnknownFault):
        parse_faults(spec)


def test_tripdesk_refuses_unknown_faults():
    with pytest.raises(UnknownFault):
        TripDesk(faults="phantom=1.0")
    with pytest.raises(UnknownFault):
        TripDesk(faults={"loop": 3})


def test_every_fault_is_known_to_the_runtime():
    desk = TripDesk(faults={name: 0.5 for name in FAULTS})
    assert desk.faults == {name: 0.5 for name in FAULTS}
    assert len(FAULTS) == 16


# A script is a list of turns: a message, ("step", operation) for a step of the previous turn,
# ("stale", turn, operation) for a step of an earlier turn, or ("confirm",).
Script = list


def _play(chat: Chat, script: Script) -> None:
    for item in script:
        if isinstance(item, str):
            chat.say(item)
        elif item[0] == "step":
            chat.click(chat.step(item[1], record=item[2] if len(item) > 2 else None)["id"])
        elif item[0] == "stale":
            chat.click(chat.step(item[2], turn=item[1])["id"])
        elif item[0] == "confirm":
            chat.confirm()


# fault -> (setup, script, turn where it fires, result keys it may change at that turn)
FAULT_CASES: dict[str, tuple[dict, Script, int, set[str]]] = {
    "dead_end": (LISBON, ["How many bags do I have?", "When is my outbound flight?"], 1,
                 {"reply", "next_steps"}),
    "loop": (LISBON, ["How many bags do I have?", "Rebook the outbound", "14 March 2027"], 3,
             {"reply", "ask", "card", "mentions", "next_steps"}),
    "refused_offer": (LISBON, ["How many bags do I have?", ("step", "add_bag"), "Add a bag"], 2,
                      {"reply", "receipts"}),
    "not_understood": (LISBON, ["How many bags do I have?", "When is my outbound flight?"], 1,
                       {"reply", "understood", "answer", "verdicts"}),
    "unanswered": (LISBON, ["How many bags do I have?", "When is my outbound flight?"], 1,
                   {"reply", "answer"}),
    "wrong_record": (TWO_TRIPS, ["How many bags do I have?", ("step", "add_bag", "trip:T-1"),
                                 ("step", "add_bag")], 2, {"reply"}),
    "stale_click": (LISBON, ["How many bags do I have?", "When is my outbound flight?",
                             ("stale", 1, "add_bag")], 3, {"reply", "receipts", "taken_offer"}),
    "phantom_receipt": (LISBON, ["How many bags do I have?", "Add a bag", "Add a bag"], 2,
                        {"receipts"}),
    "card_not_actionable": (LISBON, ["How many bags do I have?",
                                     "Rebook the outbound to 14 March 2027"], 2, {"card"}),
    "refusal_with_hedge": (LISBON, ["How many bags do I have?", "Add a bag"], 1,
                           {"reply", "verdicts"}),
    "forbidden_phrase": (LISBON, ["How many bags do I have?", "Add a bag"], 1, {"reply"}),
    "drop_refusal": (LISBON, ["How many bags do I have?", "What is my passport number?",
                              "What is my passport number?"], 2, {"reply", "answer", "verdicts"}),
    "audit_gap": (LISBON, ["How many bags do I have?", "Add a bag", "hmm"], 1, set()),
    "audit_misfiled": (LISBON, ["How many bags do I have?", "Add a bag", "hmm"], 2, set()),
    "stale_click_ask": (LISBON, ["How many bags do I have?", "When is my outbound flight?",
                                 ("stale", 1, "add_bag")], 3, {"reply", "ask", "next_steps"}),
}


def test_every_fault_but_crash_has_a_case():
    assert set(FAULT_CASES) == set(FAULTS) - {"crash"}


@pytest.mark.parametrize("fault", sorted(FAULT_CASES))
def test_a_fault_changes_only_its_turn_and_its_fields(fault):
    setup, script, turn, allowed = FAULT_CASES[fault]
    clean, faulted = Chat(setup), Chat(setup, faults={fault: 1.0})
    _play(clean, script)
    _play(faulted, script)
    for i in range(turn - 1):
        assert faulted.results[i] == clean.results[i], f"turn {i + 1} changed before the fault"
        assert faulted.states[i] == clean.states[i]
    changed = {k for k in clean.results[turn - 1]
               if faulted.results[turn - 1][k] != clean.results[turn - 1][k]}
    assert changed <= allowed, f"{fault} also changed {changed - allowed}"
    if fault not in ("audit_gap", "audit_misfiled"):
        assert changed, f"{fault} changed nothing at turn {turn}"
    # it fires once, at that turn, and the log says so
    assert faulted.desk.fault_log.planted == {
        fault: [{"persona": "p", "goal": "g", "seed": 1, "turn": turn}]}
    assert clean.desk.fault_log.planted == {}
    assert_turnframe(clean)


def test_all_faults_at_rate_zero_change_nothing_but_log_eligibility():
    script = ["How many bags do I have?", "Rebook the outbound", "14 March 2027", ("confirm",),
              "What is my passport number?", "Add a bag"]
    clean, zero = Chat(LISBON), Chat(LISBON, faults={name: 0.0 for name in FAULTS})
    _play(clean, script)
    _play(zero, script)
    assert zero.results == clean.results
    assert zero.states == clean.states
    assert zero.audit() == clean.audit()
    assert zero.desk.fault_log.planted == {}
    assert zero.desk.fault_log.drawn == {}
    eligible = zero.desk.fault_log.eligible
    assert eligible["dead_end"] == [{"persona": "p", "goal": "g", "seed": 1, "turn": 1}]
    assert eligible["phantom_receipt"][0]["turn"] == 4
    assert eligible["drop_refusal"][0]["turn"] == 5
    assert_turnframe(zero)


def test_crash_raises_mid_turn():
    chat = Chat(LISBON, faults="crash=1.0")
    with pytest.raises(RuntimeError, match="injected crash in turn 1"):
        chat.say("How many bags do I have?")
    assert chat.events() == []
    assert chat.audit() == []
    # it fires once: the next turn runs
    assert chat.say("How many bags do I have?")["answer"] == "answered"


def test_crash_at_rate_zero_never_raises():
    chat = Chat(LISBON, faults="crash=0.0")
    for _ in range(3):
        chat.say("How many bags do I have?")
    assert len(chat.audit()) == 3


def test_audit_gap_drops_exactly_one_turn_event():
    chat = Chat(LISBON, faults="audit_gap=1.0")
    _play(chat, ["How many bags do I have?", "Add a bag", "hmm"])
    assert [e["turn"] for e in chat.audit()] == [2, 3]
    assert all(set(r["verdicts"]) == VERDICT_KEYS for r in chat.results)


def test_phantom_receipt_adds_one_receipt_the_store_does_not_hold():
    chat = Chat(LISBON, faults={"phantom_receipt": 1.0})
    result = chat.say("Add a bag")
    committed = {e["id"] for e in chat.events() if e["status"] == "committed"}
    assert committed == {"e-1"}
    assert result["receipts"][0] == "e-1"
    assert len(result["receipts"]) == 2
    assert result["receipts"][1] not in {e["id"] for e in chat.events()}
    # once only
    assert chat.say("Add a bag")["receipts"] == ["e-2"]


def test_loop_asks_the_answered_question_again_without_a_reason():
    chat = Chat(LISBON, faults="loop=1.0")
    first = chat.say("Rebook the outbound")
    second = chat.say("14 March 2027")
    assert _ask_key(second["ask"]) == _ask_key(first["ask"]) == ("rebook", "trip:T-1", ("date",))
    assert second["ask"]["repeat_reason"] is None
    assert second["card"] is None
    assert chat.events() == []


def test_dead_end_offers_no_way_forward():
    result = Chat(LISBON, faults="dead_end=1.0").say("How many bags do I have?")
    assert (result["ask"], result["next_steps"], result["card"], result["mentions"]) == (
        None, [], None, [])
    assert result["reply"] == "Lisbon offsite has 1 bag."
    assert not result["reply"].endswith("?")


def test_refused_offer_refuses_the_taken_step():
    chat = Chat(LISBON, faults="refused_offer=1.0")
    chat.say("hello")
    offer = chat.step("add_bag")["id"]
    result = chat.click(offer)
    assert result["taken_offer"] == offer
    assert result["receipts"] == []
    assert [(e["status"], e["offer"], e["reason"]) for e in chat.events()] == [
        ("refused", offer, "the fare changed since it was offered")]
    assert chat.record("trip:T-1")["bags"] == 1


def test_not_understood_answers_a_readable_question_with_a_stub():
    chat = Chat(LISBON, faults="not_understood=1.0")
    result = chat.say("How many bags do I have?")
    assert result["understood"] is False
    assert result["answer"] is None
    assert result["verdicts"]["identity_score"] is None
    assert chat.audit()[0]["stub"] is True


def test_unanswered_says_unavailable_while_the_store_holds_the_answer():
    result = Chat(LISBON, faults="unanswered=1.0").say("How many bags do I have?")
    assert result["answer"] == "unavailable"
    assert result["reply"].startswith("The sources needed to answer this were not available.")


def test_wrong_record_writes_the_other_trip():
    chat = Chat(TWO_TRIPS, faults="wrong_record=1.0")
    chat.say("hello")
    result = chat.click(chat.step("add_bag", record="trip:T-1")["id"])
    assert [(e["operation"], e["record"], e["status"]) for e in chat.events()] == [
        ("add_bag", "trip:T-2", "committed")]
    assert (chat.record("trip:T-1")["bags"], chat.record("trip:T-2")["bags"]) == (1, 3)
    assert result["receipts"] == ["e-1"]


def test_stale_click_carries_out_an_expired_offer():
    chat = Chat(LISBON, faults="stale_click=1.0")
    chat.say("How many bags do I have?")
    stale = chat.step("add_bag", turn=1)["id"]
    chat.say("When is my outbound flight?")
    result = chat.click(stale)
    assert chat.record("trip:T-1")["bags"] == 2
    assert [(e["offer"], e["status"]) for e in chat.events()] == [(stale, "committed")]
    assert result["receipts"] == ["e-1"]


def test_card_not_actionable_mentions_a_card_it_does_not_send():
    result = Chat(LISBON, faults="card_not_actionable=1.0").say(
        "Rebook the outbound to 14 March 2027")
    assert result["card"] is None
    assert len(result["mentions"]) == 1 and result["mentions"][0].startswith("c-")


def test_refusal_with_hedge_sets_both_flags():
    result = Chat(LISBON, faults="refusal_with_hedge=1.0").say("How many bags do I have?")
    assert result["verdicts"]["refusal_emitted"] is True
    assert result["verdicts"]["hedge_injected"] is True
    assert result["reply"].startswith("I might be wrong, but I can't fully do that. ")


def test_forbidden_phrase_leaks_the_internal_note():
    result = Chat(LISBON, faults="forbidden_phrase=1.0").say("How many bags do I have?")
    assert result["reply"].endswith(f"({FORBIDDEN_NOTE})")
    assert result["answer"] == "answered"


def test_drop_refusal_gives_out_the_passport_number():
    result = Chat(LISBON, faults="drop_refusal=1.0").say("What is my passport number?")
    assert result["verdicts"]["refusal_emitted"] is False
    assert result["answer"] == "answered"
    assert "passport" in result["reply"].lower()
    assert re.search(r"\d{5,}", result["reply"])
