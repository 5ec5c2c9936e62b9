"""The runtime role: start, turn, state, audit, close; async, one adapter per transport.

Adapters return plain JSON values. A runtime that fails mid-conversation raises `RuntimeFault`
with its evidence; the conversation loop records it as `runtime_error` and the run goes on.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from simulator.adapters.protocol import Audit, Started, State, TurnResult, violations
from scoring.errors import RuntimeFault, RuntimeUnavailable

PROTOCOL_VERSION = 1


class RuntimeAdapter(Protocol):
    description: str     # what it is, as the user will recognise it (with the port it got)
    identity: str        # what it is across runs: part of a run's key, so never a random port

    async def health(self) -> dict[str, Any]: ...
    async def start(self, request: dict[str, Any]) -> str: ...
    async def turn(self, session: str, payload: dict[str, Any]) -> dict[str, Any]: ...
    async def state(self, session: str) -> dict[str, Any] | None: ...
    async def audit(self, session: str) -> list[dict[str, Any]] | None: ...
    async def close(self, session: str) -> None: ...
    async def aclose(self) -> None: ...


def as_json(value: Any, what: str) -> Any:
    """A deep copy through JSON: what an HTTP runtime would have sent, and nothing shared."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise RuntimeFault("malformed", f"the runtime's {what} is not JSON: {exc}",
                           body=repr(value)[:500]) from None


def _checked(model, value: Any, what: str) -> Any:
    problems = violations(model, value)
    if problems:
        raise RuntimeFault("malformed", f"the runtime's {what} breaks protocol 1: {'; '.join(problems[:3])}",
                           body=json.dumps(value, default=str)[:2000])
    return value


def check_turn_result(result: Any) -> dict[str, Any]:
    """A turn result (parsed JSON) must be an object with a string `reply`; present fields well typed."""
    if not isinstance(result, dict):
        raise RuntimeFault("malformed", "the turn result is not a JSON object", body=repr(result)[:2000])
    if not isinstance(result.get("reply"), str):
        raise RuntimeFault("missing_reply", "the turn result has no string 'reply'",
                           body=json.dumps(result)[:2000])
    return _checked(TurnResult, result, "turn result")


def check_started(reply: Any) -> str:
    return _checked(Started, reply, "start reply")["session"]


def check_state(state: Any) -> dict[str, Any]:
    return _checked(State, state, "state")


def check_audit(audit: Any) -> list[dict[str, Any]]:
    return _checked(Audit, audit, "audit")["turns"]


class Checked:
    """How adapters hand back what a runtime said: checked against protocol 1 (`strict`, the
    default for runs), or as it came, for `simrun check-runtime` to list every violation."""

    strict = True

    @property
    def identity(self) -> str:
        return self.description

    def _turn(self, raw: Any) -> dict[str, Any]:
        return check_turn_result(raw) if self.strict else raw

    def _started(self, raw: Any) -> str:
        if self.strict:
            return check_started(raw)
        if not isinstance(raw, dict) or not isinstance(raw.get("session"), str):
            raise RuntimeFault("malformed", "start did not answer {\"session\": \"...\"}",
                               body=json.dumps(raw, default=str)[:2000])
        return raw["session"]

    def _state(self, raw: Any) -> Any:
        return check_state(raw) if self.strict else raw

    def _audit(self, raw: Any) -> Any:
        if self.strict:
            return check_audit(raw)
        return raw.get("turns") if isinstance(raw, dict) else raw


def check_health(health: Any, where: str) -> dict[str, Any]:
    if not isinstance(health, dict) or "protocol" not in health:
        raise RuntimeUnavailable(f"{where}: health did not answer with a 'protocol' field; "
                                 "a runtime must return {\"protocol\": 1, ...}")
    if health["protocol"] != PROTOCOL_VERSION:
        raise RuntimeUnavailable(
            f"{where}: the runtime speaks protocol {health['protocol']!r}; this simrun speaks "
            f"protocol {PROTOCOL_VERSION}. Upgrade simrun or pin the runtime to protocol 1.")
    return health
