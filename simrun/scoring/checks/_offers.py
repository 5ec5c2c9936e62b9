"""Following an offer to the events it led to, whatever the turn.

A runtime may take up an offer in one turn and commit, or refuse, its operation turns later,
after asking for its arguments; the event's `offer` field links the two. This module lists every
take of an offer in a conversation (a click, or `taken_offer` naming an offer of the previous
turn), each marked fresh (the previous turn showed it) or stale, and attributes each event to
the take that led to it:

- an event that names an offer belongs to the latest take of that offer at or before the
  event's turn (an offer taken twice is attributed to the take that was in force);
- an event that names no offer belongs to the take in its own turn, if any: that is all a
  runtime that leaves `offer` out tells.

It also says which record a committed write was addressed to (docs/reference/classes.md):
the linked offer's record; else the record of the latest ask for the same operation since the
user's request began (a new request in the user's words starts a new context); else the
record of the goal step the user's turn is tagged with; else the goal's declared records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simrun._transcript import Transcript, TurnRecord, UserTurn
from simrun.scoring.checks._evidence import MISSING, Answered, get, relates, shown, shown_before
from simrun.scoring.dataset import Goal, Step


@dataclass(frozen=True)
class Take:
    """The user took up an offer in this turn."""

    turn: int
    offer: str
    fresh: bool | None          # shown in the previous turn; None: what it showed is unknown
    operation: str | None       # as the offer (or its card) was shown
    record: str | None


@dataclass(frozen=True)
class Takes:
    by_turn: dict[int, Take]
    unknown: frozenset[int]     # message turns where whether an offer was taken is not known
    # (turn, offer id -> {operation, record}) for every turn that showed offers, in order. Looked
    # through backwards when asked, rather than indexed by offer up front: a runtime may show
    # dozens of offers a turn, and only the few taken up are ever asked about.
    shown: tuple[tuple[int, dict[str, dict[str, Any]]], ...]

    def attributed(self, event: dict[str, Any]) -> Take | None:
        """The take that led to `event`, or None."""
        turn, offer = event.get("turn"), event.get("offer")
        if not isinstance(turn, int):
            return None
        if offer is None:
            return self.by_turn.get(turn)
        earlier = [t for t in self.by_turn.values() if t.offer == offer and t.turn <= turn]
        return max(earlier, key=lambda t: t.turn) if earlier else None

    def as_shown(self, offer: Any, turn: int) -> dict[str, Any] | None:
        """How `offer` was last shown before turn `turn` (its operation and record)."""
        return _last_shown(self.shown, offer, turn)


def _last_shown(showings: Sequence[tuple[int, dict[str, dict[str, Any]]]], offer: Any,
                turn: int) -> dict[str, Any] | None:
    for at, offers in reversed(showings):
        if at < turn and offer in offers:
            how: dict[str, Any] = offers[offer]     # (indexed by Any, mypy would type it Any)
            return how
    return None


def follow(transcript: Transcript) -> Takes:
    """Every take of an offer in the conversation, and every offer shown.

    Three of the scorer's checks read it: the scorer works it out once per transcript and gives
    it to each (their `takes`), rather than each asking a cache keyed on the transcript's
    identity; a check called alone works it out itself."""
    by_turn: dict[int, Take] = {}
    unknown: set[int] = set()
    showings: list[tuple[int, dict[str, dict[str, Any]]]] = []
    for turn in transcript.turns:
        offers = shown_before(transcript, turn)
        if turn.user.kind == "click" and turn.user.offer is not None:
            by_turn[turn.index] = _take(turn.index, turn.user.offer, offers.has(turn.user.offer), showings)
        elif turn.result is not None and turn.user.kind == "message":
            taken = get(turn.result, "taken_offer")
            if taken is MISSING:
                unknown.add(turn.index)
            elif taken and offers.has(taken) is not False:
                by_turn[turn.index] = _take(turn.index, taken, offers.has(taken), showings)
        now = shown(turn.result).offers
        if now:
            showings.append((turn.index, now))
    return Takes(by_turn, frozenset(unknown), tuple(showings))


def _take(turn: int, offer: str, fresh: bool | None, showings: list[tuple[int, dict[str, dict[str, Any]]]]) -> Take:
    what = _last_shown(showings, offer, turn) or {}
    return Take(turn, offer, fresh, what.get("operation"), what.get("record"))


# --- the record a write was addressed to ------------------------------------------------------

def addressed(transcript: Transcript, goal: Goal, turn: TurnRecord | Answered, event: dict[str, Any],
              takes: Takes) -> tuple[set[str], str]:
    """(the records the user addressed for this committed write, how that is known).

    An empty set means nothing says; `how` is one of offer, ask, step, goal."""
    operation = event.get("operation")
    take = takes.attributed(event)
    if event.get("offer") is None and take is not None and take.operation is not None \
            and not relates(take.operation, operation):
        take = None     # the offer taken in this turn was for something else
    linked = take.record if take else (takes.as_shown(event.get("offer"), turn.index + 1) or {}).get("record")
    if linked:
        return {linked}, "offer"
    start = context_start(transcript, goal, turn.index, takes)
    for j in range(turn.index - 1, start - 1, -1):
        ask = get(transcript.turns[j - 1].result, "ask")
        if isinstance(ask, dict) and ask.get("record") and relates(ask.get("operation"), operation):
            return {ask["record"]}, "ask"
    take = takes.by_turn.get(start)
    if take is not None and take.record and relates(take.operation, operation):
        return {take.record}, "offer"
    step = tagged_step(goal, turn.user)
    if step is not None and step.record and relates(step.operation, operation):
        return {step.record}, "step"
    prior = transcript.state_before(turn.index) or {}
    # The goal's declared records stand in only if they exist: a typo in a goal must not be
    # blamed on the runtime.
    declared = {s.record for s in goal.steps if s.record} & set(prior.get("records") or {})
    return declared, "goal"


def context_start(transcript: Transcript, goal: Goal, index: int, takes: Takes) -> int:
    """The turn where the request that turn `index` belongs to began.

    Walking back, a turn continues the one before when it is a message that answers that turn's
    ask. A take of an offer starts a request; so does a message when nothing was asked, or when
    the user's tag says it pursues another step than the ask is about.
    """
    while index > 1:
        turn = transcript.turns[index - 1]
        if index in takes.by_turn or turn.user.kind != "message":
            return index
        ask = get(transcript.turns[index - 2].result, "ask")
        if not isinstance(ask, dict) or not answers_ask(goal, turn.user, ask):
            return index
        index -= 1
    return 1


def answers_ask(goal: Goal, user: UserTurn, ask: dict[str, Any]) -> bool:
    """Whether a message can be the answer to `ask`: untagged, it is taken to be; tagged, its
    step must be the ask's operation, on the ask's record when both name one."""
    step = tagged_step(goal, user)
    if step is None:
        return True
    if not relates(ask.get("operation"), step.operation):
        return False
    return not (step.record and ask.get("record") and step.record != ask["record"])


def tagged_step(goal: Goal, user: UserTurn) -> Step | None:
    """The goal step a user turn is tagged with, if the goal has it."""
    return goal.step_by_id(user.step) if user.step else None
