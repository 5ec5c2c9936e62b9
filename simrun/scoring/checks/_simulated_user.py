"""simulator_error: the simulated user broke its brief. Kept apart from the runtime's faults.

`user_turn_fault` runs in the conversation loop on every user turn (a broken user ends the
conversation at once, as `simulator_error`, before it costs more); `simulator_error` rescans a
whole transcript for the scorer with the very same function, so that a stored run rescored
later finds the same faults. Every fault has a kind (`FAULT_KINDS`), kept in the evidence, so
that `check-user` can say how a user model breaks.
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import re
from dataclasses import dataclass
from typing import Any

from simrun import _secrets as secrets
from simrun._transcript import CheckResult, Transcript, TurnRecord, UserTurn
from simrun.scoring.checks._answers import KEPT_CHARS, carries_date, dates_in, kept_for_short_texts
from simrun.scoring.checks._evidence import get, runtime_gone
from simrun.scoring.checks._guarantees import card_not_actionable
from simrun.scoring.checks._progress import Tally, ask_key, dead_end, loop, not_understood, unanswered, way_forward
from simrun.scoring.dataset import Goal, Persona, canonical_json, per_goal

FAULT_KINDS = {
    "empty_message": "an empty message",
    "too_long": "a message over the persona's length",
    "role_leak": "talks as the assistant, or as an AI model",
    "leaked_instructions": "repeats its brief word for word",
    "repeated": "the same message three times in a row",
    "unstructured": "not in the structured form, even after the repair step",
    "cut_off": "an answer cut off at max_tokens",
    "contradicts_facts": "a date that contradicts the goal",
    "early_stop": "stopped before trying anything",
    "false_success": "claimed a success the store denies",
    "crash": "the simulated user failed",
}
_AI = r"(an? )?(ai|a\.i\.|artificial intelligence|(large )?language model|llm|chat ?bot|virtual assistant|bot)"
ROLE_LEAKS = [
    re.compile(r"^\s*(assistant|system|ai|bot)\s*:", re.I | re.M),
    re.compile(rf"\bas {_AI}\b", re.I),
    re.compile(rf"\b(i'?m|i am|being) (just |only |merely |simply |but |not a human,? (just )?)?({_AI}|an assistant)\b",
               re.I),
    re.compile(r"\b(large )?language models?\b", re.I),
    re.compile(r"\b(my|the) (training data|knowledge cut-?off|programming)\b", re.I),
    re.compile(r"\bi (was|am|have been) (trained|programmed|designed|created) (by|to)\b", re.I),
    re.compile(r"\bi (don't|do not|can't|cannot) have (personal|a body|feelings|real[- ]time|"
               r"access to (the internet|real))", re.I),
    re.compile(r"\bhow (can|may) i (help|assist) you\b", re.I),
]
# This many user messages in a row, each nearly the same as the last (word-level similarity at
# least REPEAT_SIMILARITY), while the runtime said it did not understand or said something new,
# is a user stuck in a loop.
REPEATS = 3
REPEAT_SIMILARITY = 0.9
# A reply that carries one of these findings failed the user: saying the same again after it is
# the right thing to do, so a repeat after it stays the runtime's.
RUNTIME_FAILURES = (unanswered, loop, dead_end, not_understood, card_not_actionable)


@dataclass(frozen=True)
class UserFault:
    kind: str        # one of FAULT_KINDS
    message: str


# This many consecutive words of the brief, repeated, is a leak. Shorter runs are how anyone
# would ask for the same thing ("open a trip for Bruno Lima to Madrid").
INSTRUCTION_WINDOW = 12
MIN_BRIEF_WORDS = 6


def full_dates(text: str) -> list[tuple[dt.date, int]]:
    """Every date with a year in `text`, with where it ends."""
    found = []
    for year, month, day, _, end in dates_in(text):
        if year is None:
            continue
        try:
            found.append((dt.date(year, month, day), end))
        except ValueError:
            pass   # 31 April is no date
    return found


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def user_turn_fault(turn: UserTurn, goal: Goal, persona: Persona,
                    earlier: tuple[TurnRecord, ...] = ()) -> UserFault | None:
    """What is wrong with one user turn, given the turns before it, or None."""
    if turn.kind != "message":
        return None
    if "cut_off" in turn.meta:
        return UserFault("cut_off", f"the model's answer was cut off at max_tokens ({turn.meta['cut_off']}) "
                         "before it was complete; raise max_tokens in simrun.toml's [user] section")
    if "unparsed" in turn.meta:
        why = f": {turn.meta['parse_error']}" if turn.meta.get("parse_error") else ""
        after = ", even after the repair step" if turn.meta.get("repaired") else ""
        return UserFault("unstructured", f"the model did not answer in the structured form (message, click or "
                         f"stop){after}{why}")
    text = turn.text or ""
    if not text.strip():
        return UserFault("empty_message", "empty message")
    if len(text) > persona.max_message_chars:
        return UserFault("too_long", f"message of {len(text)} characters, over the persona's "
                         f"{persona.max_message_chars}")
    leak, said = _read(text)
    if leak is not None:
        return UserFault("role_leak", f"role leakage: {leak!r}")
    if any(run in said for run in _brief_runs(goal)):
        return UserFault("leaked_instructions", "leaked instructions: repeats the goal's brief word for word")
    if _repeats(turn, earlier, goal, persona):
        return UserFault("repeated", f"the same message {REPEATS} times in a row: {secrets.cut(text, 120)!r}")
    return None


@kept_for_short_texts
def _read(text: str) -> tuple[str | None, str]:
    """(the words of the first ROLE_LEAKS pattern found in a message, or None; its words, spaced
    as the brief's runs are). Kept for the last messages seen: a scripted user says the same
    few hundred messages over a whole run, and the patterns cost ten microseconds a message."""
    for pattern in ROLE_LEAKS:
        found = pattern.search(text)
        if found:
            return found.group(0), ""
    return None, f" {' '.join(_words(text))} "


def _brief_runs(goal: Goal) -> tuple[str, ...]:
    """Every INSTRUCTION_WINDOW words in a row of the goal's brief, spaced as `user_turn_fault`
    compares them; worked out once per goal, not on every user turn of every conversation."""
    return per_goal(goal, "brief runs", _runs_of_brief)


def _runs_of_brief(goal: Goal) -> tuple[str, ...]:
    brief = _words(goal.instructions)
    window = min(INSTRUCTION_WINDOW, len(brief))   # a short brief repeated whole is a leak too
    return tuple(f" {' '.join(brief[i:i + window])} "
                 for i in range(len(brief) - window + 1 if window >= MIN_BRIEF_WORDS else 0))


def _repeats(turn: UserTurn, earlier: tuple[TurnRecord, ...], goal: Goal, persona: Persona) -> bool:
    """This message and the REPEATS - 1 user turns before it are all messages, each nearly the
    same as the one before (a click or a stop in between breaks the row), and the user ignored a
    way forward the runtime gave it (a question, an ask, offers or a card) that moved on, or came
    with a reason to say it again. It stays the runtime's, however the user answered, when the
    runtime failed first: it said it did not understand, or led nowhere every time, or the reply
    the repeat answers carries an unanswered, loop, dead_end, not_understood or
    card_not_actionable finding (the very checks the scorer runs, over the turns so far, so that
    the loop and a rescore agree: a repeat after a failure is the right thing to say, while a
    repeat after a reply that moved on ignored it), or the runtime gave the same thing
    again each time with no reason (an ask compared by what it asks for, not by its words),
    where the same answer is the right one."""
    row = [*earlier[-(REPEATS - 1):]] if REPEATS > 1 else []
    users = [t.user for t in row] + [turn]
    if len(users) < REPEATS or any(u.kind != "message" or not (u.text or "").strip() for u in users):
        return False
    texts = [u.text or "" for u in users]
    if not all(_alike(a, b) for a, b in zip(texts, texts[1:])):
        return False
    results = [t.result if isinstance(t.result, dict) else {} for t in row]
    if any(r.get("understood") is False for r in results) or not any(way_forward(r) for r in results):
        return False
    if _runtime_failed(row[-1], earlier, goal, persona):
        return False
    return not all(_said_again(a, b) for a, b in zip(results, results[1:]))


def _alike(before: str, after: str) -> bool:
    """Whether two messages say nearly the same: their words, in order, at least
    REPEAT_SIMILARITY alike. Kept for the last pairs of short messages (by their texts): each
    pair in a row is compared by the checks of two turns, as the loop sends them and again as
    the scorer reads them, and the comparison is most of a user turn's check."""
    if len(before) <= KEPT_CHARS and len(after) <= KEPT_CHARS:
        return _alike_kept(before, after)
    return _similar(before, after)


def _similar(before: str, after: str) -> bool:
    return difflib.SequenceMatcher(None, _words(before), _words(after), autojunk=False).ratio() >= REPEAT_SIMILARITY


_alike_kept = functools.lru_cache(maxsize=1024)(_similar)


def _runtime_failed(turn: TurnRecord, earlier: tuple[TurnRecord, ...], goal: Goal, persona: Persona) -> bool:
    """Whether `turn`'s reply carries a finding of RUNTIME_FAILURES, read over the turns so far."""
    so_far = Transcript(persona.id, goal.id, 0, 0, tuple(earlier), "")
    return any(f.turn == turn.index for check in RUNTIME_FAILURES for f in check(so_far, goal, persona).findings)


# What a reply gave the user to act on (`_gist`): its words, its ask's and its card's parts, its
# offers' labels; None where the reply carried no such thing.
Gist = tuple[list[str], tuple[str, ...] | None, tuple[str, ...] | None, list[str] | None]


def _gist(result: dict[str, Any]) -> Gist:
    """What a reply gave the user to act on, without the ids a runtime renews on every turn."""
    def part(value: Any, *names: str) -> tuple[str, ...] | None:
        return tuple(str(value.get(n)) for n in names) if isinstance(value, dict) else None
    offers = get(result, "next_steps")
    labels = sorted(str(o.get("label")) for o in offers if isinstance(o, dict)) if isinstance(offers, list) else None
    return (_words(str(result.get("reply") or "")), part(get(result, "ask"), "operation", "record", "arguments"),
            part(get(result, "card"), "operation", "record"), labels)


def _said_again(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """The runtime gave the same thing again, and no reason for asking again."""
    ask, asked = get(after, "ask"), get(before, "ask")
    if isinstance(ask, dict) and isinstance(asked, dict):
        return ask_key(ask) == ask_key(asked) and not ask.get("repeat_reason")
    reason = ask.get("repeat_reason") if isinstance(ask, dict) else None
    return _gist(before) == _gist(after) and not reason


def _fact_dates(goal: Goal) -> set[dt.date]:
    dates = set()
    for value in goal.facts.values():
        if isinstance(value, dt.date):
            dates.add(value)
        elif isinstance(value, str):
            dates.update(d for d, _ in full_dates(value))
    return dates


def _goal_dates(goal: Goal) -> tuple[frozenset[dt.date], frozenset[dt.date]]:
    """(`_fact_dates`, `_true_dates`) of a goal, worked out once per goal object: every
    conversation of a goal asks the same, and reading its setup's dates was a fifth of the
    scoring at a fast model (benchmarks/README.md)."""
    return per_goal(goal, "dates", lambda g: (frozenset(_fact_dates(g)), frozenset(_true_dates(g))))


def _true_dates(goal: Goal) -> set[dt.date]:
    """Dates a user may say without contradicting the goal: its facts, the slips it asks for,
    and every date its setup holds (today's bookings)."""
    dates = _fact_dates(goal)
    for step in goal.steps:
        dates.update(v for v in step.wrong_first.values() if isinstance(v, dt.date))
    dates.update(d for d, _ in full_dates(canonical_json(goal.setup)))
    return dates


def simulator_error(transcript: Transcript, goal: Goal, persona: Persona, goal_reached: bool | None) -> CheckResult:
    """The user's faults: each turn's `user_turn_fault` (what the loop asked as it sent the turn,
    asked again of the same turns: a message's reading is kept by its text), and what shows only
    over the whole transcript."""
    tally = Tally("simulator_error")
    for n, turn in enumerate(transcript.turns):
        fault = user_turn_fault(turn.user, goal, persona, transcript.turns[:n])
        if fault:
            tally.found(turn.index, fault.message, kind=fault.kind, message=turn.user.text)
        else:
            tally.ok()
    # Facts that contradict the goal: a full date that is none of the goal's, never corrected.
    # A slip corrected later (the fact's day and month restated, the fact within a week of the
    # slip) is a user changing its mind, which a persona may do; a mistake the user had no later
    # message to correct in is given the benefit of the doubt.
    facts, true = _goal_dates(goal)
    sent = [t for t in transcript.turns if t.user.kind in ("message", "click")]
    for n, turn in enumerate(sent):
        text = turn.user.text or ""
        for stray, end in full_dates(text):
            if not facts or stray in true:
                continue   # a goal with no dates has none to contradict
            later = (text[end:] + " " + " ".join(t.user.text or "" for t in sent[n + 1:])).lower()
            if n + 1 == len(sent) and not re.search(r"\w", later):
                continue   # no chance to correct it
            near = [f for f in facts if abs((f - stray).days) <= 7]
            if not any(carries_date(later, f) for f in near):
                tally.found(turn.index, f"gives {stray.isoformat()}, a date that contradicts the goal's facts",
                            kind="contradicts_facts", message=turn.user.text)
                break
    if transcript.error and transcript.error.get("kind") == "simulator_crash":
        tally.found(None, f"the simulated user failed: {transcript.error.get('message')}", kind="crash",
                    traceback=transcript.error.get("traceback"))
    stop = transcript.stop
    if stop is not None:
        if not transcript.turns:
            tally.found(None, "stopped before trying anything", kind="early_stop", stop_reason=stop.stop_reason)
        elif stop.stop_reason == "done" and goal_reached is False:
            tally.found(None, "claimed the goal was done while the store says it is not", kind="false_success",
                        stop_reason=stop.stop_reason)
        elif stop.stop_reason == "done" and goal_reached is None:
            gone = runtime_gone(transcript)
            tally.unknown(f"the user claimed success, and no store was read to check the claim against: {gone}"
                          if gone else "the user claimed success, and the runtime exposes no store to check the "
                          "claim against")
    return tally.result()
