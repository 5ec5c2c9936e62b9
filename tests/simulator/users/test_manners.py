"""Every manner visibly changes what the scripted user sends, at the persona's rate.

Each test compares one persona's messages with the same goals played by the plain persona, or
measures the manner's own counter against its rate. Rates are per opportunity (a message, a
word, a click), so the tolerance is three binomial standard deviations over the opportunities.
"""

from __future__ import annotations

import math
import random
import re

from simrun.scoring.dataset._files import Dataset
from simrun.simulator.users import _manners as m
from simrun.simulator.users._manners import COMPLAINTS, WORDY_CLOSERS, WORDY_OPENERS
from tests.conftest import run_demo


def within(share: float, rate: float, n: int) -> bool:
    return n > 0 and abs(share - rate) <= 3 * math.sqrt(rate * (1 - rate) / n)


def messages(run, persona: str):
    return [t.user for c in run.conversations if c.cell.persona.id == persona
            for t in c.transcript.turns if t.user.kind == "message"]


def clicks(run, persona: str):
    return [(c, t) for c in run.conversations if c.cell.persona.id == persona
            for t in c.transcript.turns if t.user.kind == "click"]


def only(demo, persona: str, repetitions: int):
    return run_demo(Dataset((demo.persona(persona),), demo.goals, demo.hash, demo.item_hashes),
                    repetitions=repetitions)


def fact_words(goal) -> set[str]:
    """Words the goal's facts put in a message; typing errors spare them."""
    words = set()
    for value in goal.facts.values():
        if hasattr(value, "strftime"):
            words |= {value.strftime("%B"), value.strftime("%b")}
        else:
            words |= set(str(value).split())
    return words


def test_typos_put_errors_in_words_at_the_persona_rate(demo):
    rate = demo.persona("typo-theo").rate("typos")
    eligible = changed = 0
    run = only(demo, "typo-theo", 20)
    for c in run.conversations:
        protected = fact_words(c.cell.goal)
        for t in c.transcript.turns:
            step = c.cell.goal.steps[t.user.meta["step"]] if "step" in t.user.meta else None
            if t.user.kind != "message" or step is None or step.operation is None:
                continue   # a question's key words are protected too; count requests only
            clean, sent = t.user.meta["clean"].split(), t.user.text.split()
            assert len(clean) == len(sent)   # a typing error changes a word, never the word count
            for before, after in zip(clean, sent):
                if before.strip(".,!?") in protected:
                    assert before == after
                    continue
                eligible += len(m.typo_eligible_words(before))
                changed += before != after
    assert eligible > 300
    assert within(changed / eligible, rate, eligible), f"{changed}/{eligible} words changed"


def test_typos_never_touch_the_goals_facts(clean_run, demo):
    for c in clean_run.conversations:
        if c.cell.persona.id != "typo-theo":
            continue
        facts = [str(v) for v in c.cell.goal.facts.values() if isinstance(v, str)]
        for t in c.transcript.turns:
            for fact in facts:
                if t.user.kind == "message" and fact in (t.user.meta.get("clean") or ""):
                    assert fact in t.user.text


def test_a_typo_is_one_edit():
    rng = random.Random(3)
    for word in ("rebook", "outbound", "confirm", "please", "bags", "March"):
        for _ in range(50):
            out = m.typo(word, rng)
            assert out != word and abs(len(out) - len(word)) <= 1


def test_terse_messages_are_short_and_bare(clean_run, demo):
    rate = demo.persona("terse-tom").rate("terse")
    tom = messages(clean_run, "terse-tom")
    terse = [u for u in tom if "terse" in u.meta["manners"]]
    assert within(len(terse) / len(tom), rate, len(tom))
    for u in terse:
        assert not u.text.endswith(".") and not re.search(r"\bplease\b", u.text, re.I)
    paula = messages(clean_run, "plain-paula")
    mean = lambda us: sum(len(u.text) for u in us) / len(us)  # noqa: E731
    assert mean(tom) < 0.7 * mean(paula)


def test_wordy_messages_are_wrapped_in_pleasantries(clean_run, demo):
    rate = demo.persona("wordy-wendy").rate("wordy")
    wendy = messages(clean_run, "wordy-wendy")
    wordy = [u for u in wendy if "wordy" in u.meta["manners"]]
    assert within(len(wordy) / len(wendy), rate, len(wendy))
    for u in wordy:
        assert any(u.text.startswith(o) for o in WORDY_OPENERS)
        assert any(u.text.endswith(c) for c in WORDY_CLOSERS)
    paula = messages(clean_run, "plain-paula")
    mean = lambda us: sum(len(u.text) for u in us) / len(us)  # noqa: E731
    assert mean(wendy) > 2 * mean(paula)


def test_complaints_come_at_the_persona_rate(clean_run, demo):
    rate = demo.persona("grumpy-greg").rate("complains")
    greg = messages(clean_run, "grumpy-greg")
    with_complaint = [u for u in greg if any(c.lower() in u.text.lower() for c in COMPLAINTS)]
    assert within(len(with_complaint) / len(greg), rate, len(greg))
    assert not any(any(c in u.text for c in COMPLAINTS) for u in messages(clean_run, "plain-paula"))


def test_changes_mind_gives_a_wrong_value_then_corrects_it(clean_run, demo):
    fran = [c for c in clean_run.conversations if c.cell.persona.id == "fickle-fran"]
    opportunities = corrected = 0
    for c in fran:
        turns = list(c.transcript.turns)
        changeable = {i for i, s in enumerate(c.cell.goal.steps) if s.correction and not s.wrong_first}
        opportunities += len(changeable)
        for i, t in enumerate(turns):
            if t.user.meta.get("wrong_value") and t.user.meta["step"] in changeable:
                corrected += 1
                nxt = turns[i + 1].user
                assert nxt.meta.get("correction") == t.user.meta["wrong_value"]
                assert nxt.text.lower().startswith("sorry, i meant")
        assert c.scorecard.goal_reached, c.cell.id   # the correction is kept by the runtime
    rate = demo.persona("fickle-fran").rate("changes_mind")
    assert within(corrected / opportunities, rate, opportunities)


def test_a_date_correction_restates_day_and_month_only(clean_run):
    for c in clean_run.conversations:
        for t in c.transcript.turns:
            if t.user.meta.get("correction") == "date":
                assert not re.search(r"\b20\d\d\b", t.user.text)


def test_stale_clicks_press_offers_from_earlier_turns(demo):
    rate = demo.persona("clicky-cleo").rate("stale_clicks")
    run = only(demo, "clicky-cleo", 10)
    chances = stale = 0
    for c, t in clicks(run, "clicky-cleo"):
        before = c.transcript.turns[t.index - 2].result
        shown = {o["id"] for o in before["next_steps"]} | {
            a["id"] for a in (before["card"] or {}).get("actions", [])}
        chances += bool(t.user.meta.get("stale_chance"))
        if t.user.meta.get("stale"):
            stale += 1
            assert t.user.offer not in shown
            assert not [e for e in t.state["events"] if e["turn"] == t.index]   # nothing done
        else:
            assert t.user.offer in shown
    assert chances >= 30
    assert within(stale / chances, rate, chances), f"{stale}/{chances} stale"


def test_the_same_seed_replays_the_same_conversation(demo):
    first = run_demo(demo, repetitions=1)
    second = run_demo(demo, repetitions=1)
    for a, b in zip(first.conversations, second.conversations):
        assert [t.user for t in a.transcript.turns] == [t.user for t in b.transcript.turns]
        assert [t.result for t in a.transcript.turns] == [t.result for t in b.transcript.turns]


def test_another_seed_plays_differently(demo):
    a = run_demo(demo, repetitions=1, seed=1)
    b = run_demo(demo, repetitions=1, seed=2)
    texts = lambda r: [t.user.text for c in r.conversations for t in c.transcript.turns]  # noqa: E731
    assert texts(a) != texts(b)
