"""user_turn_fault reads a message's words and role leaks once per text (`_read`, kept for the
last texts seen): for any message, asked once or again, it says what reading it every time said
(the old code, kept verbatim below)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simrun.scoring._transcript import UserTurn
from simrun.scoring.checks import _simulated_user as su
from simrun.scoring.checks._simulated_user import user_turn_fault
from simrun.scoring.dataset._files import load_dataset
from tests.conftest import ROOT

DEMO = load_dataset(ROOT / "personas", ROOT / "goals")


def _old_user_turn_fault(turn, goal, persona, earlier=()):
    if turn.kind != "message":
        return None
    if "cut_off" in turn.meta or "unparsed" in turn.meta:
        return user_turn_fault(turn, goal, persona, earlier)      # unchanged, and not what is compared
    text = turn.text or ""
    if not text.strip():
        return su.UserFault("empty_message", "empty message")
    if len(text) > persona.max_message_chars:
        return su.UserFault("too_long", f"message of {len(text)} characters, over the persona's "
                            f"{persona.max_message_chars}")
    for pattern in su.ROLE_LEAKS:
        if pattern.search(text):
            return su.UserFault("role_leak", f"role leakage: {pattern.search(text).group(0)!r}")
    said = f" {' '.join(su._words(text))} "
    if any(run in said for run in su._brief_runs(goal)):
        return su.UserFault("leaked_instructions", "leaked instructions: repeats the goal's brief word for word")
    if su._repeats(turn, earlier, goal, persona):
        return su.UserFault("repeated", f"the same message {su.REPEATS} times in a row: {text[:120]!r}")
    return None


phrases = st.sampled_from(["Assistant: hi", "system : ok", "As an AI, I", "I'm just a language model", "I am a bot",
                           "my training data", "I was trained by", "I can't have feelings", "How can I help you?",
                           "large language models", "being an assistant", "add a bag", "\n  bot: x", "İ am a bot",
                           "AS A CHATBOT", "ſystem: x", "to Lisbon offsite", "12 March 2027"])
messages = st.one_of(st.text(max_size=60), st.lists(st.one_of(phrases, st.text(max_size=8)), max_size=6).map(" ".join),
                     st.sampled_from([g.instructions for g in DEMO.goals]))


@settings(max_examples=600, deadline=None)
@given(messages, st.sampled_from(DEMO.goals), st.sampled_from(DEMO.personas))
def test_user_turn_fault_as_before_once_and_again(text, goal, persona):
    turn = UserTurn("message", text)
    old = _old_user_turn_fault(turn, goal, persona)
    assert user_turn_fault(turn, goal, persona) == old
    assert user_turn_fault(UserTurn("message", text), goal, persona) == old    # now from what was kept


def test_a_long_message_is_read_and_not_kept():
    from simrun.scoring.checks._answers import KEPT_CHARS
    persona = DEMO.personas[0].model_copy(update={"max_message_chars": 10 * KEPT_CHARS})
    before = su._read.cache_info().currsize
    for text in ("word " * KEPT_CHARS, "As an AI, " + "word " * KEPT_CHARS):
        turn = UserTurn("message", text)
        assert user_turn_fault(turn, DEMO.goals[0], persona) == _old_user_turn_fault(turn, DEMO.goals[0], persona)
    assert su._read.cache_info().currsize == before
