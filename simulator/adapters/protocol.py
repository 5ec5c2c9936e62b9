"""The wire objects of protocol version 1, as pydantic models: what a runtime may send.

Only `reply` is required of a turn result; every other field is optional, and unknown fields
are allowed (additive changes keep version 1). A field that is present must have the right
type: `"understood": "yes"` or `"next_steps": "o-1"` is a protocol violation, reported by
`simrun check-runtime` and, during a run, ending the conversation as `runtime_error`.

The raw JSON is what simrun stores and scores (a field left out stays absent, which is how a
check knows to say UNVERIFIABLE); these models only decide whether the JSON is well formed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class Offer(_Wire):
    id: str
    operation: str | None = None
    record: str | None = None
    arguments: dict[str, Any] | None = None
    label: str | None = None


class CardAction(_Wire):
    id: str
    label: str | None = None


class Card(_Wire):
    id: str
    operation: str | None = None
    record: str | None = None
    arguments: dict[str, Any] | None = None
    actions: list[CardAction] | None = None


class Ask(_Wire):
    id: str | None = None
    operation: str | None = None
    record: str | None = None
    arguments: list[str] | None = None
    repeat_reason: str | None = None


class Verdicts(_Wire):
    refusal_emitted: bool | None = None
    hedge_injected: bool | None = None
    identity_score: float | None = None


class TurnResult(_Wire):
    reply: str
    understood: bool | None = None
    taken_offer: str | None = None
    ask: Ask | None = None
    next_steps: list[Offer] | None = None
    card: Card | None = None
    mentions: list[str] | None = None
    receipts: list[str] | None = None
    answer: Literal["answered", "unavailable"] | None = None
    verdicts: Verdicts | None = None


class Event(_Wire):
    id: str
    turn: int
    operation: str
    record: str | None = None
    status: Literal["committed", "refused"]
    offer: str | None = None
    reason: str | None = None
    arguments: dict[str, Any] | None = None


class State(_Wire):
    records: dict[str, dict[str, Any]]
    events: list[Event]


class TurnEvent(_Wire):
    turn: int
    surface: str | None = None
    verdicts: dict[str, Any] | None = None


class Audit(_Wire):
    turns: list[TurnEvent]


class Health(_Wire):
    protocol: int
    runtime: str | None = None
    version: str | None = None


class Started(_Wire):
    session: str


TURN_FIELDS = tuple(TurnResult.model_fields)


def violations(model: type[BaseModel], value: Any) -> list[str]:
    """Each way `value` breaks `model`, as 'field.path: what is wrong'."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        return [f"{'.'.join(str(p) for p in e['loc']) or '(the object)'}: {e['msg']}" for e in exc.errors()]
    return []
