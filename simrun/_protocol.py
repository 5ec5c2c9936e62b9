"""The wire objects of protocol version 1, as pydantic models: what a runtime may send.

Only `reply` is required of a turn result; every other field is optional, and unknown fields
are allowed (additive changes keep version 1). A field that is present must have the right
type: `"understood": "yes"` or `"next_steps": "o-1"` is a protocol violation, reported by
`simrun check-runtime` and, during a run, ending the conversation as `runtime_error`.

The raw JSON is what simrun stores and scores (a field left out stays absent, which is how a
check knows to say UNVERIFIABLE); these models only decide whether the JSON is well formed.
"""

from __future__ import annotations

import functools
from typing import Any, Literal, Required

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

# TypedDicts rather than models: validating one builds no object per offer, which is six times
# faster on a reply with 100,000 offers (a hostile runtime's, say) and keeps the event loop moving.
_WIRE = ConfigDict(extra="allow", strict=True)


@with_config(_WIRE)
class Offer(TypedDict, total=False):
    id: Required[str]
    operation: str | None
    record: str | None
    arguments: dict[str, Any] | None
    label: str | None


@with_config(_WIRE)
class CardAction(TypedDict, total=False):
    id: Required[str]
    label: str | None


@with_config(_WIRE)
class Card(TypedDict, total=False):
    id: Required[str]
    operation: str | None
    record: str | None
    arguments: dict[str, Any] | None
    actions: list[CardAction] | None


@with_config(_WIRE)
class Ask(TypedDict, total=False):
    id: str | None
    operation: str | None
    record: str | None
    arguments: list[str] | None
    repeat_reason: str | None


@with_config(_WIRE)
class Verdicts(TypedDict, total=False):
    refusal_emitted: bool | None
    hedge_injected: bool | None
    identity_score: float | None


@with_config(_WIRE)
class Event(TypedDict, total=False):
    id: Required[str]
    turn: Required[int]
    operation: Required[str]
    record: str | None
    status: Required[Literal["committed", "refused"]]
    offer: str | None
    reason: str | None
    arguments: dict[str, Any] | None


@with_config(_WIRE)
class State(TypedDict, total=False):
    records: Required[dict[str, dict[str, Any]]]
    events: Required[list[Event]]


@with_config(_WIRE)
class TurnResult(TypedDict, total=False):
    reply: Required[str]
    understood: bool | None
    taken_offer: str | None
    ask: Ask | None
    next_steps: list[Offer] | None
    card: Card | None
    mentions: list[str] | None
    receipts: list[str] | None
    answer: Literal["answered", "unavailable"] | None
    verdicts: Verdicts | None
    # Optional (additive): the store after this turn, as `state` would answer. A runtime that sends
    # it saves simrun the state request after every turn (docs/protocol.md, "The store with the turn").
    state: State | None


@with_config(_WIRE)
class TurnEvent(TypedDict, total=False):
    turn: Required[int]
    surface: str | None
    verdicts: dict[str, Any] | None


@with_config(_WIRE)
class Audit(TypedDict, total=False):
    turns: Required[list[TurnEvent]]


@with_config(_WIRE)
class Health(TypedDict, total=False):
    protocol: Required[int]
    runtime: str | None
    version: str | None


@with_config(_WIRE)
class Started(TypedDict, total=False):
    session: Required[str]
    # Optional (additive): the store as the session starts, as `state` would answer. A runtime that
    # sends it saves simrun the state request before the first turn (docs/protocol.md).
    state: State | None


SNAPSHOT = "state"    # the turn result's field that carries the store after the turn, if the runtime sends it
# The fields of a turn result that are evidence for the checks (the snapshot is the store's, not the turn's).
TURN_FIELDS = tuple(name for name in TurnResult.__annotations__ if name != SNAPSHOT)


def split_snapshot(result: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """(the turn result without its store snapshot, the snapshot or None). The transcript keeps
    the turn's result as the runtime would have sent it without the snapshot, and the store
    beside it, as for a runtime whose store was read apart: the same seeds give the same rows."""
    if result.get(SNAPSHOT) is None:
        return ({k: v for k, v in result.items() if k != SNAPSHOT} if SNAPSHOT in result else result), None
    rest = dict(result)
    return rest, rest.pop(SNAPSHOT)


@functools.cache
def _adapter(shape: type) -> TypeAdapter[Any]:
    return TypeAdapter(shape)


def violations(shape: type, value: Any) -> list[str]:
    """Each way `value` breaks `shape`, as 'field.path: what is wrong'."""
    try:
        _adapter(shape).validate_python(value)
    except ValidationError as exc:
        return [f"{'.'.join(str(p) for p in e['loc']) or '(the object)'}: {e['msg']}" for e in exc.errors()]
    return []
