"""Reading evidence out of turn results and store snapshots, absent fields kept absent.

`MISSING` is not None: a runtime that sends `"ask": null` says it asked nothing, while one that
leaves `ask` out says nothing at all, and a check over it is UNVERIFIABLE.
"""

from __future__ import annotations

from typing import Any

from scoring.transcript import Transcript, TurnRecord


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


def get(result: dict[str, Any] | None, name: str) -> Any:
    if result is None:
        return MISSING
    return result.get(name, MISSING)


def shown_offers(result: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """Offer id -> {operation, record} for every offer a turn showed, or None if unknown.

    Card actions count as offers, with the card's record. None means the turn left out
    `next_steps` or `card`, so what the user could press is not known.
    """
    steps, card = get(result, "next_steps"), get(result, "card")
    if steps is MISSING or card is MISSING:
        return None
    offers = {o["id"]: {"operation": o.get("operation"), "record": o.get("record")}
              for o in steps or [] if isinstance(o, dict) and "id" in o}
    if isinstance(card, dict):
        for action in card.get("actions") or []:
            if isinstance(action, dict) and "id" in action:
                offers[action["id"]] = {"operation": card.get("operation"), "record": card.get("record")}
    return offers


def block_ids(result: dict[str, Any]) -> set[str]:
    """Ids of the cards and offers a turn carried as data."""
    ids = set(shown_offers(result) or {})
    card = get(result, "card")
    if isinstance(card, dict) and "id" in card:
        ids.add(card["id"])
    return ids


def events_at(state: dict[str, Any] | None, turn: int) -> list[dict[str, Any]] | None:
    if state is None or not isinstance(state.get("events"), list):
        return None
    return [e for e in state["events"] if isinstance(e, dict) and e.get("turn") == turn]


def previous(transcript: Transcript, turn: TurnRecord) -> TurnRecord | None:
    return transcript.turns[turn.index - 2] if turn.index >= 2 else None


def lookup(record: dict[str, Any], path: str) -> Any:
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value
