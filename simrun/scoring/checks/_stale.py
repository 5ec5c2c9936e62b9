"""stale_click: a click on an offer the previous turn did not show must never lead to a commit.

The click is stale whatever follows; the guarantee is broken when anything the click caused
commits, in that turn or any later one. What a stale click in turn t caused:

- every commit in turn t: a click carries no words, so nothing else in that turn can have asked
  for it, whatever offer the event names (it may name an earlier, fresh take of the same kind);
- a later commit whose event names the clicked offer, when that click is the latest take of it;
- a later commit reached through the asks the click started: the commit's turn is a message
  answering the ask before it, an ask for the committed operation, and walking back from there
  to turn t, each turn either answers the ask before it or gets that same ask back (kept pending
  through a digression), and no turn takes an offer; turn t's ask is new (a click that lands
  while an ask is pending and gets that same ask back has started nothing: the answer that
  follows answers the request before it). The event need not name the offer: many runtimes
  name none on a commit that answers an ask.
"""

from __future__ import annotations

from typing import Any

from simrun._transcript import CheckResult, Transcript
from simrun.scoring.checks._evidence import get, relates
from simrun.scoring.checks._offers import Take, Takes, answers_ask, follow
from simrun.scoring.checks._progress import NO_OFFERS, Tally, answered_turns, ask_key
from simrun.scoring.dataset import Goal, Persona


def _started_an_ask(transcript: Transcript, turn: int) -> bool:
    """Whether turn `turn`'s reply asks something other than the ask pending before it."""
    now = get(transcript.turns[turn - 1].result, "ask")
    if not isinstance(now, dict):
        return False
    before = get(transcript.turns[turn - 2].result, "ask") if turn >= 2 else None
    return not (isinstance(before, dict) and ask_key(before) == ask_key(now))


def caused_by(transcript: Transcript, goal: Goal, takes: Takes, take: Take, event: dict[str, Any]) -> bool:
    """Whether the stale take `take` caused `event` (module docstring)."""
    at = event.get("turn")
    if not isinstance(at, int) or at < take.turn:
        return False
    if at == take.turn:
        return True
    if event.get("offer") is not None and takes.attributed(event) == take:
        return True
    return _through_asks(transcript, goal, takes, take.turn, event) and _started_an_ask(transcript, take.turn)


def _through_asks(transcript: Transcript, goal: Goal, takes: Takes, start: int, event: dict[str, Any]) -> bool:
    """Whether `event` answers an ask for its operation that goes back, unbroken, to turn `start`."""
    def ask_of(turn: int) -> Any:
        return get(transcript.turns[turn - 1].result, "ask")

    at = event["turn"]
    user = transcript.turns[at - 1].user
    asked = ask_of(at - 1)
    if at in takes.by_turn or user.kind != "message" or not isinstance(asked, dict) \
            or not answers_ask(goal, user, asked) or not relates(asked.get("operation"), event.get("operation")):
        return False
    for j in range(at - 1, start, -1):
        now, before, user = ask_of(j), ask_of(j - 1), transcript.turns[j - 1].user
        if j in takes.by_turn or not isinstance(before, dict):
            return False
        kept = isinstance(now, dict) and ask_key(now) == ask_key(before)
        if not (kept or (user.kind == "message" and answers_ask(goal, user, before))):
            return False
    return True


def stale_click(transcript: Transcript, goal: Goal, persona: Persona, takes: Takes | None = None) -> CheckResult:
    tally = Tally("stale_click")
    takes = takes if takes is not None else follow(transcript)     # the scorer's, worked out once
    for turn in answered_turns(transcript):
        if turn.user.kind != "click":
            continue
        take = takes.by_turn.get(turn.index)
        if take is None or take.fresh is None:
            tally.unknown(NO_OFFERS)
            continue
        if take.fresh:
            continue
        tally.events_of_take(transcript, take,
                             lambda e, t: e.get("status") == "committed" and caused_by(transcript, goal, takes, t, e),
                             f"a click on {take.offer}, not offered in the previous turn, was carried out",
                             clicked_at=take.turn)
    return tally.result()
