"""Hand-built transcripts for the scorer's tests: every evidence field present and saying
"nothing" unless a test says otherwise, so each test changes exactly what it is about."""

from __future__ import annotations

import dataclasses
from typing import Any

from simrun._transcript import Transcript, TurnRecord, UserTurn
from simrun.scoring.dataset._models import Goal, Persona

RECORDS = {
    "traveler:P-1": {"type": "traveler", "name": "Ana Souza"},
    "trip:T-1": {"type": "trip", "name": "Lisbon offsite", "bags": 1,
                 "segments": {"outbound": {"date": "2027-03-10"}, "return": {"date": "2027-03-17"}}},
    "trip:T-2": {"type": "trip", "name": "Porto visit", "bags": 2,
                 "segments": {"outbound": {"date": "2027-02-02"}, "return": {"date": "2027-02-09"}}},
}


def persona(**fields: Any) -> Persona:
    return Persona.model_validate({"id": "plain-paula", "name": "Paula", **fields})


def goal(**fields: Any) -> Goal:
    data = {
        "id": "g", "title": "Add a bag", "instructions": "Add one bag to the Lisbon offsite trip.",
        "facts": {"trip": "Lisbon offsite"},
        "steps": [{"operation": "add_bag", "record": "trip:T-1", "say": ["Add a bag to {trip}."]}],
        "success": {},
    }
    return Goal.model_validate({**data, **fields})


def msg(text: str) -> UserTurn:
    return UserTurn("message", text)


def click(offer: str) -> UserTurn:
    return UserTurn("click", offer=offer)


def offer(oid: str, operation: str = "add_bag", record: str = "trip:T-1") -> dict:
    return {"id": oid, "operation": operation, "record": record, "arguments": {}, "label": oid}


def ask(aid: str = "a-1", operation: str = "rebook", record: str = "trip:T-1",
        arguments: tuple[str, ...] = ("date",), repeat_reason: str | None = None) -> dict:
    return {"id": aid, "operation": operation, "record": record, "arguments": list(arguments),
            "repeat_reason": repeat_reason}


def card(cid: str = "c-2", record: str = "trip:T-1", actions: tuple[str, ...] = ("o-9",)) -> dict:
    return {"id": cid, "operation": "confirm", "record": record,
            "actions": [{"id": a, "label": "Confirm"} for a in actions]}


def result(reply: str = "Done.", **fields: Any) -> dict:
    """A turn result with every evidence field present and saying 'nothing'; override as needed."""
    base = {"reply": reply, "understood": True, "taken_offer": None, "ask": None, "next_steps": [],
            "card": None, "mentions": [], "receipts": [], "answer": None,
            "verdicts": {"refusal_emitted": False, "hedge_injected": False}}
    return {**base, **fields}


def state(*events: dict, records: dict | None = None) -> dict:
    return {"records": dict(RECORDS if records is None else records), "events": list(events)}


def event(eid: str, turn: int, *, status: str = "committed", record: str = "trip:T-1",
          operation: str = "add_bag", offer: str | None = None) -> dict:
    return {"id": eid, "turn": turn, "operation": operation, "record": record, "status": status,
            "offer": offer, "reason": None if status == "committed" else "not allowed"}


def transcript(*turns: tuple, **fields: Any) -> Transcript:
    """Turns as (user, result) or (user, result, state); indices are 1-based in order."""
    records = []
    for i, turn in enumerate(turns, start=1):
        user, res, *rest = turn
        records.append(TurnRecord(i, user, res, rest[0] if rest else state()))
    fields.setdefault("initial_state", state())
    fields.setdefault("audit", [{"turn": i, "surface": "chat", "verdicts": {}} for i in range(1, len(turns) + 1)])
    return Transcript("plain-paula", "g", 7, 0, tuple(records), fields.pop("end", "turn_cap"), **fields)


def drop(t: Transcript, index: int, *keys: str) -> Transcript:
    """The same transcript with fields left out of turn `index`'s result."""
    turns = list(t.turns)
    turn = turns[index - 1]
    turns[index - 1] = dataclasses.replace(
        turn, result={k: v for k, v in turn.result.items() if k not in keys})
    return dataclasses.replace(t, turns=tuple(turns))


def with_state(t: Transcript, index: int, new_state: dict | None) -> Transcript:
    turns = list(t.turns)
    turns[index - 1] = dataclasses.replace(turns[index - 1], state=new_state)
    return dataclasses.replace(t, turns=tuple(turns))


def turns_of(check) -> list[int | None]:
    return [f.turn for f in check.findings]


G, P = goal(), persona()
