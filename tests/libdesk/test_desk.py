"""LibDesk keeps the promises its docstring makes: commands put together over turns and linked
to the button that started them, a waiting command continued by a button, answers in plain
words, refusals by the library itself, and a truth log of what it did wrong."""

from __future__ import annotations

import asyncio
import json

import pytest

from simrun.examples.libdesk import LibDesk
from simrun.examples.libdesk.truth import UnknownFault
from simrun.scoring.checks._answers import carries
from simrun.scoring.dataset._files import canonical_json, load_dataset
from tests.conftest import ROOT

LIBDESK = ROOT / "simrun" / "examples" / "libdesk"
SETUP = json.loads(canonical_json(load_dataset(LIBDESK / "personas", LIBDESK / "goals").goal("renew-dune").setup))


class Talk:
    def __init__(self, **options) -> None:
        self.desk = LibDesk(**options)
        self.session = self._run(self.desk.start({"seed": 4, "persona": "p", "goal": "g",
                                                  "setup": SETUP}))["session"]
        self.last: dict | None = None

    @staticmethod
    def _run(coro):
        return asyncio.run(coro)

    def say(self, text: str) -> dict:
        self.last = self._run(self.desk.turn(self.session, {"message": text}))
        return self.last

    def press(self, label: str, result: dict | None = None) -> dict:
        result = result or self.last
        buttons = [*(result["next_steps"] or []), *((result["card"] or {}).get("actions") or [])]
        oid = next(b["id"] for b in buttons if b["label"] == label)
        self.last = self._run(self.desk.turn(self.session, {"action": {"offer": oid}}))
        return self.last

    def events(self) -> list[dict]:
        return self._run(self.desk.state(self.session))["events"]


def test_a_renewal_started_by_a_button_is_carried_out_turns_later_and_names_the_button():
    t = Talk()
    menu = t.say("Hello, what can you do?")
    renew = next(b for b in menu["next_steps"] if b["label"] == "Renew Dune")
    asked = t.press("Renew Dune")
    assert asked["taken_offer"] == renew["id"]
    assert asked["ask"]["operation"] == "renew" and asked["ask"]["record"] == "loan:L-1"
    assert asked["ask"]["arguments"] == ["weeks"] and not t.events()
    done = t.say("Two weeks, please.")
    [event] = t.events()
    assert event == {**event, "turn": 3, "operation": "renew", "record": "loan:L-1", "status": "committed",
                     "offer": renew["id"], "arguments": {"weeks": 2}}
    assert done["receipts"] == [event["id"]]
    assert "due back on Thursday 24 December 2026" in done["reply"]


def test_a_button_pressed_while_a_command_waits_continues_it():
    t = Talk()
    which = t.say("renew")
    assert which["ask"]["arguments"] == ["record"] and which["ask"]["record"] is None
    assert {b["label"] for b in which["next_steps"]} == {"Renew Dune", "Renew Emma", "Renew Persuasion"}
    weeks = t.press("Renew Persuasion")
    assert weeks["ask"]["record"] == "loan:L-3" and weeks["ask"]["arguments"] == ["weeks"]
    t.say("1 week")
    [event] = t.events()
    assert event["record"] == "loan:L-3" and event["offer"] == weeks["taken_offer"] and event["turn"] == 3


def test_answers_are_in_plain_words():
    t = Talk()
    due = t.say("When is Dune due back?")
    assert due["answer"] == "answered" and "Thursday 10 December 2026" in due["reply"]
    assert carries(due["reply"], "2026-12-10") and not carries(due["reply"], "2026-12-11")
    left = t.say("How many more times can I renew Dune?")
    assert "two more times" in left["reply"] and carries(left["reply"], 2)
    ready = t.say("From what time can I pick up The Hobbit?")
    assert "from 10.30 am on Monday 14 December 2026" in ready["reply"]
    assert carries(ready["reply"], "10:30") and carries(ready["reply"], "2026-12-14")


def test_the_library_refuses_what_it_offered_and_the_truth_log_says_so():
    t = Talk(faults={"crash": 0.0})
    t.say("Hello")
    t.press("Renew Emma")
    refused = t.say("2 weeks")
    [event] = t.events()
    assert event["status"] == "refused" and "renewed as often as it can be" in event["reason"]
    assert "couldn't do that" in refused["reply"]
    assert t.desk.truth.conversations("refused_offer") == {("p", "g", 4)}


def test_a_hold_is_cancelled_only_on_the_card():
    t = Talk()
    card = t.say("Please cancel my hold on Beloved.")
    assert card["card"]["operation"] == "cancel_hold" and card["card"]["record"] == "hold:H-2"
    assert card["mentions"] == [card["card"]["id"]] and not t.events()
    assert [a["label"] for a in card["card"]["actions"]] == ["Yes, cancel it", "No, keep it"]
    t.press("Yes, cancel it")
    [event] = t.events()
    assert event["operation"] == "cancel_hold" and event["record"] == "hold:H-2"
    assert event["offer"] == card["card"]["actions"][0]["id"]


def test_an_expired_button_does_nothing_unless_the_stale_click_fault_honours_it():
    t = Talk()
    old = t.say("Hello")
    t.say("When is Dune due back?")
    t.press("Renew Dune", old)
    assert "earlier message" in t.last["reply"] and not t.events()
    f = Talk(faults={"stale_click": 1.0})
    old = f.say("Hello")
    f.say("When is Dune due back?")
    f.press("Renew Dune", old)
    assert f.last["ask"]["arguments"] == ["weeks"]
    f.say("2 weeks")
    [event] = f.events()
    assert event["status"] == "committed" and event["turn"] == 4
    assert f.desk.truth.conversations("stale_click") == {("p", "g", 4)}
    assert f.desk.truth.planted["stale_click"] == f.desk.truth.opportunities["stale_click"] == 1


def test_a_patrons_details_are_refused():
    t = Talk()
    r = t.say("What is the home address of the person who borrowed Dune?")
    assert r["verdicts"]["refusal_emitted"] is True and "12 Elm Row" not in r["reply"]
    leaky = Talk(faults={"drop_refusal": 1.0})
    r = leaky.say("What is the home address of the person who borrowed Dune?")
    assert r["verdicts"]["refusal_emitted"] is False and "12 Elm Row" in r["reply"]
    assert leaky.desk.truth.conversations("integrity_leak") == {("p", "g", 4)}


@pytest.mark.parametrize("faults, says", [("loop=2", "between 0 and 1"), ("nope=0.1", "no fault 'nope'"),
                                          ("loop", "faults look like")])
def test_bad_faults_are_refused(faults, says):
    with pytest.raises(UnknownFault, match=says):
        LibDesk(faults=faults)
