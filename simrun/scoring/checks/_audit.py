"""audit_gap: every turn must leave its own turn event in the runtime's audit stream.

A turn counts as logged only when exactly one turn event carries its number and that event is
its own. An event is another turn's when its `surface` is another turn's reply and not this
one's: a runtime that files turn k-1's event under k has logged k-1 twice and k not at all,
and counting "some event says k" would hide turn k's gap. Two events under one number are a
misfiled event as well (the protocol asks for one per turn), so that turn is a gap too. A
surface that matches no reply (a runtime may render it otherwise) is taken to be the turn's own.
"""

from __future__ import annotations

from typing import Any

from simrun._transcript import CheckResult, Transcript
from simrun.scoring.checks._evidence import runtime_gone
from simrun.scoring.checks._progress import Tally, answered_turns
from simrun.scoring.dataset import Goal, Persona


def _said(text: Any) -> str | None:
    """A reply or surface with its spacing evened out, or None when it is not text."""
    return " ".join(text.split()) if isinstance(text, str) else None


def _filed(audit: list[Any]) -> dict[int, list[dict[str, Any]]]:
    """Turn number -> the turn events that carry it."""
    filed: dict[int, list[dict[str, Any]]] = {}
    for entry in audit:
        if isinstance(entry, dict) and isinstance(entry.get("turn"), int) and not isinstance(entry["turn"], bool):
            filed.setdefault(entry["turn"], []).append(entry)
    return filed


def owner_elsewhere(entry: dict[str, Any], index: int, replies: dict[int, str | None]) -> int | None:
    """The other turn whose reply this event's surface is, when it is not turn `index`'s own
    reply; the nearest such turn, or None."""
    surface = _said(entry.get("surface"))
    if surface is None or surface == replies.get(index):
        return None
    others = [j for j, reply in replies.items() if j != index and reply == surface]
    return min(others, key=lambda j: (abs(j - index), j)) if others else None


def audit_gap(transcript: Transcript, goal: Goal, persona: Persona) -> CheckResult:
    tally = Tally("audit_gap")
    turns = answered_turns(transcript)
    if transcript.audit is None:
        # A runtime gone before its audit was read (its server died) may keep one: say which.
        gone = runtime_gone(transcript)
        why = f"no audit stream was read: {gone}" if gone else "the runtime keeps no audit stream"
        for _ in turns:
            tally.unknown(why)
        return tally.result()
    filed = _filed(transcript.audit)
    replies = {t.index: _said(t.result.get("reply")) for t in turns}
    for turn in turns:
        events = filed.get(turn.index, [])
        other = owner_elsewhere(events[0], turn.index, replies) if len(events) == 1 else None
        if not events:
            tally.found(turn.index, "no turn event in the audit stream for this turn")
        elif len(events) > 1:
            tally.found(turn.index, f"{len(events)} turn events carry this turn's number: one is misfiled, "
                        "and which one is this turn's own cannot be told", misfiled=events)
        elif other is not None:
            tally.found(turn.index, f"the one turn event filed under this turn is turn {other}'s reply: "
                        "misfiled, and this turn's own is missing", misfiled=events, reply_of=other)
        else:
            tally.ok()
    return tally.result()
