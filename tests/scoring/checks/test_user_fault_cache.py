"""user_turn_fault reads a message's words and role leaks once per text (`_read`, kept for the
last texts seen): for any message, its reading kept is the reading made afresh
(`_read.__wrapped__`), asked once or again, and the faults found are those of CLASSES.md's
simulator_error (a role leak, the brief repeated word for word, an empty or too long message)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simrun._transcript import UserTurn
from simrun.scoring.checks import _simulated_user as su
from simrun.scoring.checks._simulated_user import user_turn_fault
from simrun.scoring.dataset._files import load_dataset
from tests.conftest import ROOT

DEMO = load_dataset(ROOT / "personas", ROOT / "goals")
read_afresh = su._read.__wrapped__       # the reading itself: nothing kept


phrases = st.sampled_from(["Assistant: hi", "system : ok", "As an AI, I", "I'm just a language model", "I am a bot",
                           "my training data", "I was trained by", "I can't have feelings", "How can I help you?",
                           "large language models", "being an assistant", "add a bag", "\n  bot: x", "İ am a bot",
                           "AS A CHATBOT", "ſystem: x", "to Lisbon offsite", "12 March 2027"])
messages = st.one_of(st.text(max_size=60), st.lists(st.one_of(phrases, st.text(max_size=8)), max_size=6).map(" ".join),
                     st.sampled_from([g.instructions for g in DEMO.goals]))


@settings(max_examples=600, deadline=None)
@given(messages, st.sampled_from(DEMO.goals), st.sampled_from(DEMO.personas))
def test_a_message_kept_is_read_as_afresh_once_and_again(text, goal, persona):
    turn = UserTurn("message", text)
    assert su._read(text) == read_afresh(text) == su._read(text)
    first = user_turn_fault(turn, goal, persona)
    assert user_turn_fault(UserTurn("message", text), goal, persona) == first    # now from what was kept
    leak, said = read_afresh(text)
    if first is None:
        assert leak is None and not any(run in said for run in su._brief_runs(goal))
    elif text.strip() and len(text) <= persona.max_message_chars:
        assert first.kind == ("role_leak" if leak is not None else "leaked_instructions")


def test_the_faults_a_message_carries():
    goal, persona = DEMO.goals[0], DEMO.personas[0]
    for text, kind in (("Assistant: here is your trip", "role_leak"), ("As an AI, I cannot", "role_leak"),
                       (goal.instructions, "leaked_instructions"), ("   ", "empty_message"),
                       ("x" * (persona.max_message_chars + 1), "too_long"), ("Add a bag, please.", None)):
        for _ in range(2):                      # read, then from what was kept
            found = user_turn_fault(UserTurn("message", text), goal, persona)
            assert (found.kind if found else None) == kind, text


def test_a_long_message_is_read_and_not_kept():
    from simrun.scoring.checks._answers import KEPT_CHARS
    persona = DEMO.personas[0].model_copy(update={"max_message_chars": 10 * KEPT_CHARS})
    before = su._read.cache_info().currsize
    for text, kind in (("word " * KEPT_CHARS, None), ("As an AI, " + "word " * KEPT_CHARS, "role_leak")):
        found = user_turn_fault(UserTurn("message", text), DEMO.goals[0], persona)
        assert (found.kind if found else None) == kind
        assert su._read(text) == read_afresh(text)
    assert su._read.cache_info().currsize == before
