"""simulator_error: the simulated user broke its brief. Kept apart from the runtime's faults.

`user_turn_fault` runs in the conversation loop on every user turn (a broken user ends the
conversation at once, as `simulator_error`, before it costs more); `simulator_error` rescans a
whole transcript for the scorer, so that a stored run rescored later finds the same faults.
"""

from __future__ import annotations

import datetime as dt
import re

from scoring.answers import carries_date, dates_in
from scoring.progress import Tally
from scoring.transcript import CheckResult, Transcript, UserTurn
from scoring.dataset import Goal, Persona, canonical_json

ROLE_LEAKS = [
    re.compile(r"^\s*(assistant|system|ai|bot)\s*:", re.I | re.M),
    re.compile(r"\bas an ai\b", re.I),
    re.compile(r"\bas a (large )?language model\b", re.I),
    re.compile(r"\bi('m| am) (an ai|a language model|a chatbot|an assistant)\b", re.I),
    re.compile(r"\bhow (can|may) i (help|assist) you\b", re.I),
]
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


def user_turn_fault(turn: UserTurn, goal: Goal, persona: Persona) -> str | None:
    """What is wrong with one user message, or None."""
    if turn.kind != "message":
        return None
    if "unparsed" in turn.meta:
        return "the model did not answer in the structured form (message, click or stop)"
    text = turn.text or ""
    if not text.strip():
        return "empty message"
    if len(text) > persona.max_message_chars:
        return f"message of {len(text)} characters, over the persona's {persona.max_message_chars}"
    for pattern in ROLE_LEAKS:
        if pattern.search(text):
            return f"role leakage: {pattern.search(text).group(0)!r}"
    brief, said = _words(goal.instructions), " ".join(_words(text))
    window = min(INSTRUCTION_WINDOW, len(brief))   # a short brief repeated whole is a leak too
    for i in range(len(brief) - window + 1 if window >= MIN_BRIEF_WORDS else 0):
        if f" {' '.join(brief[i:i + window])} " in f" {said} ":
            return "leaked instructions: repeats the goal's brief word for word"
    return None


def _fact_dates(goal: Goal) -> set[dt.date]:
    dates = set()
    for value in goal.facts.values():
        if isinstance(value, dt.date):
            dates.add(value)
        elif isinstance(value, str):
            dates.update(d for d, _ in full_dates(value))
    return dates


def _true_dates(goal: Goal) -> set[dt.date]:
    """Dates a user may say without contradicting the goal: its facts, the slips it asks for,
    and every date its setup holds (today's bookings)."""
    dates = _fact_dates(goal)
    for step in goal.steps:
        dates.update(v for v in step.wrong_first.values() if isinstance(v, dt.date))
    dates.update(d for d, _ in full_dates(canonical_json(goal.setup)))
    return dates


def simulator_error(transcript: Transcript, goal: Goal, persona: Persona,
                    goal_reached: bool | None) -> CheckResult:
    tally = Tally("simulator_error")
    for turn in transcript.turns:
        fault = user_turn_fault(turn.user, goal, persona)
        if fault:
            tally.found(turn.index, fault, message=turn.user.text)
        else:
            tally.ok()
    # Facts that contradict the goal: a full date that is none of the goal's, never corrected.
    # A slip corrected later (the fact's day and month restated, the fact within a week of the
    # slip) is a user changing its mind, which a persona may do; a mistake the user had no later
    # message to correct in is given the benefit of the doubt.
    facts, true = _fact_dates(goal), _true_dates(goal)
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
                            message=turn.user.text)
                break
    if transcript.error and transcript.error.get("kind") == "simulator_crash":
        tally.found(None, f"the simulated user failed: {transcript.error.get('message')}",
                    traceback=transcript.error.get("traceback"))
    stop = transcript.stop
    if stop is not None:
        if not transcript.turns:
            tally.found(None, "stopped before trying anything", stop_reason=stop.stop_reason)
        elif stop.stop_reason == "done" and goal_reached is False:
            tally.found(None, "claimed the goal was done while the store says it is not",
                        stop_reason=stop.stop_reason)
        elif stop.stop_reason == "done" and goal_reached is None:
            tally.unknown()   # a claim of success with no store to check it against
    return tally.result()
