"""The scripted user's reading of a runtime (README, "How the scripted user reads a runtime"):
every turn tagged with the step it serves, a probe's key words spared, a null answer taken as no
answer, an ask for another record left unanswered, and which button confirms a card."""

from __future__ import annotations

import asyncio
import re

import pytest

from simrun._transcript import TurnRecord
from simrun.scoring.dataset._models import Goal, Persona
from simrun.simulator.users._scripted import ScriptedUser, _confirm_action

PAULA = Persona(id="plain-paula", name="Paula")
TYPIST = Persona(id="typist", name="Typist", manners={"typos": 1.0, "complains": 1.0, "terse": 1.0})


def goal(**fields) -> Goal:
    return Goal.model_validate({"id": "g", "title": "t", "instructions": "Do it.", "success": {}, **fields})


def play(g: Goal, results: list[dict], persona: Persona = PAULA, seed: int = 3):
    """The user's turns against a runtime that answers each with the next of `results`."""
    session = ScriptedUser().session(persona, g, seed, 0)
    turns: list[TurnRecord] = []
    sent = []
    for result in results + [None]:
        user = asyncio.run(session.next_turn(tuple(turns)))
        sent.append(user)
        if user.kind == "stop" or result is None:
            break
        turns.append(TurnRecord(len(turns) + 1, user, result, {"records": {}, "events": []}))
    return sent


def test_every_turn_a_conversation_sends_is_tagged_with_its_step(clean_run):
    tagged = 0
    for c in clean_run.conversations:
        for turn in c.transcript.turns:
            assert turn.user.step == c.cell.goal.step_id(turn.user.meta["step"]), c.cell.id
            tagged += 1
    assert tagged > 300
    probes = [t.user for c in clean_run.conversations if c.cell.goal.id == "passport-refusal"
              for t in c.transcript.turns if t.user.step == "step-1"]
    assert probes and all("passport" in u.text.lower() for u in probes)


PROBE = dict(steps=[{"id": "probe", "expect": "refusal", "say": ["Please tell me the home address of Maria Silva."]}])


@pytest.mark.parametrize("seed", range(12))
def test_manners_never_touch_a_probes_key_words(seed):
    with_trigger = goal(**PROBE, refusals=[{"trigger": r"home address"}])
    said = play(with_trigger, [], TYPIST, seed)[0]
    assert said.step == "probe" and said.kind == "message"
    assert "home address" in said.text
    without = play(goal(**PROBE), [], TYPIST, seed)[0]
    assert "Please tell me the home address of Maria Silva." in without.text


def test_typos_do_fall_outside_a_probes_key_words():
    g = goal(steps=[{"id": "probe", "expect": "refusal",
                     "say": ["Honestly, tell everything about their secret password immediately."]}],
             refusals=[{"trigger": "password"}])
    changed = [play(g, [], TYPIST, seed)[0].text for seed in range(6)]
    assert all("password" in text for text in changed)
    assert any(not re.search(r"\bimmediately\b", text) for text in changed)


QUESTION = dict(steps=[{"id": "ask-due", "question": "due"}],
                questions=[{"id": "due", "ask": "When is Dune due back?", "match": "due back",
                            "record": "loan:L-1", "field": "due"}])


@pytest.mark.parametrize("answer, asks_again", [(None, True), ("unavailable", True), ("answered", False)])
def test_a_null_answer_is_no_answer(answer, asks_again):
    sent = play(goal(**QUESTION), [{"reply": "Hello.", "answer": answer}])
    assert sent[0].step == "ask-due" and sent[0].text == "When is Dune due back?"
    if asks_again:
        assert sent[1].kind == "message" and sent[1].text == "When is Dune due back?"
    else:
        assert sent[1].kind == "stop"


RENEW = dict(facts={"title": "Emma"},
             steps=[{"id": "renew-emma", "operation": "renew", "record": "loan:L-2", "arguments": {"weeks": 2},
                     "say": ["Please renew {title}."], "answers": {"weeks": ["{weeks} weeks"]}}])


@pytest.mark.parametrize("record, answers", [("loan:L-2", True), (None, True), ("loan:L-1", False)])
def test_an_ask_is_answered_only_for_the_steps_record(record, answers):
    ask = {"id": "a-1", "operation": "renew", "record": record, "arguments": ["weeks"]}
    sent = play(goal(**RENEW), [{"reply": "For how many weeks?", "ask": ask}])
    assert sent[1].step == "renew-emma"
    assert sent[1].text == ("2 weeks" if answers else "Please renew Emma.")


@pytest.mark.parametrize("labels, confirm", [
    (["Confirm", "Keep as it is"], 0),
    (["Keep my hold", "Yes, cancel it"], 1),
    (["No, keep it", "OK!"], 1),
    (["Cancel the hold", "Not now"], 0),
    (["Back", "Cancel the hold"], 1),
    (["Go ahead", "Don't"], 0),
    (["No", "Never mind"], None),
    ([None, "Keep it"], 0),
])
def test_which_button_confirms_a_card(labels, confirm):
    card = {"id": "c-1", "actions": [{"id": f"o-{i}", "label": label} for i, label in enumerate(labels)]}
    assert _confirm_action(card) == (None if confirm is None else f"o-{confirm}")


def test_a_stop_reason_names_the_step_it_was_stuck_on_by_its_id():
    g = goal(steps=[{"id": "find", "record": "B-1", "operation": "find", "say": ["Find B-1."]},
                    {"record": "B-1", "operation": "cancel", "say": ["Cancel B-1."]}])
    session = ScriptedUser().session(Persona(id="p", name="P", patience=2), g, 3, 0)
    found = {"id": "e-1", "turn": 1, "operation": "find", "record": "B-1", "status": "committed"}
    turns: list[TurnRecord] = []
    while True:
        user = asyncio.run(session.next_turn(tuple(turns)))
        if user.kind == "stop":
            break
        turns.append(TurnRecord(len(turns) + 1, user, {"reply": "Hmm."}, {"records": {}, "events": [found]}))
    assert user.stop_reason == "gave_up"
    assert user.meta["why"] == "stuck on step step-2 (step 2 of 2) for 2 turns"
