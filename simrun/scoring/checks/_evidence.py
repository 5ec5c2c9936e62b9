"""Reading evidence out of turn results and store snapshots, absent fields kept absent.

`MISSING` is not None: a runtime that sends `"ask": null` says it asked nothing, while one that
leaves `ask` out says nothing at all, and a check over it is UNVERIFIABLE.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from simrun import _secrets as secrets
from simrun._transcript import Transcript, TurnRecord, UserTurn


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


class Answered(Protocol):
    """A turn the runtime answered: a `TurnRecord` whose result is not None (what
    `progress.answered_turns` lists)."""

    @property
    def index(self) -> int: ...
    @property
    def user(self) -> UserTurn: ...
    @property
    def result(self) -> dict[str, Any]: ...
    @property
    def state(self) -> dict[str, Any] | None: ...


def get(result: dict[str, Any] | None, name: str) -> Any:
    if result is None:
        return MISSING
    return result.get(name, MISSING)


@dataclass(frozen=True)
class Shown:
    """What a turn put in front of the user to press: offer id -> {operation, record}.

    `complete` is False when the turn left out `next_steps` or `card`: an id found is known to
    have been shown, but an id not found may have been shown in the part left out.
    """

    offers: dict[str, dict[str, Any]]
    complete: bool

    def has(self, offer_id: Any) -> bool | None:
        if offer_id in self.offers:
            return True
        return False if self.complete else None


NOTHING_SHOWN = Shown({}, True)


_recent = threading.local()
RECENT_KEPT = 8


def shown(result: dict[str, Any] | None) -> Shown:
    """Every offer a turn showed; card actions count as offers, with the card's record.

    Every check, and the scripted user, asks this of the same few results: the answers for the
    last RECENT_KEPT results are kept (per thread, by identity; a result is never changed once
    received), so that a reply with 100,000 offers is walked once, not once per check."""
    if result is None:
        return NOTHING_SHOWN
    recent: collections.OrderedDict[int, tuple[dict[str, Any], Shown]] | None = getattr(_recent, "shown", None)
    if recent is None:
        recent = _recent.shown = collections.OrderedDict()
    kept = recent.get(id(result))
    if kept is not None and kept[0] is result:
        return kept[1]
    value = _shown(result)
    recent[id(result)] = (result, value)
    if len(recent) > RECENT_KEPT:
        recent.popitem(last=False)
    return value


def _shown(result: dict[str, Any]) -> Shown:
    steps, card = get(result, "next_steps"), get(result, "card")
    offers = {o["id"]: {"operation": o.get("operation"), "record": o.get("record")}
              for o in steps or [] if isinstance(o, dict) and "id" in o}
    if isinstance(card, dict):
        for action in card.get("actions") or []:
            if isinstance(action, dict) and "id" in action:
                offers[action["id"]] = {"operation": card.get("operation"), "record": card.get("record")}
    return Shown(offers, steps is not MISSING and card is not MISSING)


def block_ids(result: dict[str, Any]) -> set[str]:
    """Ids of the cards and offers a turn carried as data."""
    ids = set(shown(result).offers)
    card = get(result, "card")
    if isinstance(card, dict) and "id" in card:
        ids.add(card["id"])
    return ids


def events_at(state: dict[str, Any] | None, turn: int) -> list[dict[str, Any]] | None:
    if state is None or not isinstance(state.get("events"), list):
        return None
    return [e for e in state["events"] if isinstance(e, dict) and e.get("turn") == turn]


def previous(transcript: Transcript, turn: TurnRecord | Answered) -> TurnRecord | None:
    return transcript.turns[turn.index - 2] if turn.index >= 2 else None


def shown_before(transcript: Transcript, turn: TurnRecord | Answered) -> Shown:
    """What the user could press when it sent this turn: the previous turn's offers."""
    before = previous(transcript, turn)
    return shown(before.result) if before is not None else NOTHING_SHOWN


def events_from(transcript: Transcript, start: int) -> tuple[list[dict[str, Any]], bool]:
    """The events of turns `start` onwards, each turn's from the store read after it (or, for a
    turn without one, the store read at the end), and whether every one of those turns' events
    is known."""
    final = transcript.final_state
    found, complete = [], True
    for turn in transcript.turns[max(start, 1) - 1:]:
        events = events_at(turn.state, turn.index)
        if events is None:
            events = events_at(final, turn.index)
        if events is None:
            complete = False
        else:
            found += events
    return found, complete


def relates(shown_operation: Any, operation: Any) -> bool:
    """Whether an operation as shown (an offer's, an ask's, a card's) is `operation`: the same
    name, or that name under a prefix (a card's `confirm_rebook` or `confirm.rebook` is the
    `rebook` it confirms). Case does not count."""
    if not (isinstance(shown_operation, str) and isinstance(operation, str) and operation):
        return False
    shown, op = shown_operation.lower(), operation.lower()
    return shown == op or any(shown.endswith(sep + op) for sep in "_-.: ")


def lookup(record: dict[str, Any], path: str) -> Any:
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


# The kinds of runtime_error after which the runtime could not be asked for anything more (the
# conversation loop's GONE): what it did not give then says nothing of what it keeps.
_GONE = ("timeout", "connection", "exited", "closed")


def runtime_gone(transcript: Transcript) -> str | None:
    """Why nothing more could be read from the runtime, when the conversation ended with the
    runtime gone (its server exited, it hung, it closed its stream): a check that finds no audit
    stream, no store or an unasked question says that, not that the runtime lacks the feature.
    None when the runtime was there to be asked."""
    error = transcript.error if isinstance(transcript.error, dict) else None
    if transcript.end != "runtime_error" or error is None:
        return None
    if not (error.get("kind") in _GONE or error.get("server_died") or error.get("collateral")):
        return None
    if not str(error.get("read_after", "nothing")).startswith("nothing"):
        return None         # it answered for its store and audit after the failure
    turn = error.get("turn")
    message = str(error.get("message", "")).split("; its stderr says", 1)[0]
    when = f"at turn {turn}" if isinstance(turn, int) and not isinstance(turn, bool) else "before its end"
    return f"the runtime was gone {when} ({secrets.cut(message, 300)}): nothing more could be asked of it"
