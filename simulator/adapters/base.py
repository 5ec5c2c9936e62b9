"""The runtime role: start, turn, state, audit, close; async, one adapter per transport.

Adapters return plain JSON values. A runtime that fails mid-conversation raises `RuntimeFault`
with its evidence; the conversation loop records it as `runtime_error` and the run goes on.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from simulator.errors import RuntimeFault, RuntimeUnavailable

PROTOCOL_VERSION = 1


class RuntimeAdapter(Protocol):
    description: str

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


def check_turn_result(result: Any) -> dict[str, Any]:
    """A turn result must be a JSON object with a string `reply`; all else is optional."""
    result = as_json(result, "turn result")
    if not isinstance(result, dict):
        raise RuntimeFault("malformed", "the turn result is not a JSON object", body=repr(result)[:500])
    if not isinstance(result.get("reply"), str):
        raise RuntimeFault("missing_reply", "the turn result has no string 'reply'",
                           body=json.dumps(result)[:500])
    return result


def check_health(health: Any, where: str) -> dict[str, Any]:
    if not isinstance(health, dict) or "protocol" not in health:
        raise RuntimeUnavailable(f"{where}: health did not answer with a 'protocol' field; "
                                 "a runtime must return {\"protocol\": 1, ...}")
    if health["protocol"] != PROTOCOL_VERSION:
        raise RuntimeUnavailable(
            f"{where}: the runtime speaks protocol {health['protocol']!r}; this simrun speaks "
            f"protocol {PROTOCOL_VERSION}. Upgrade simrun or pin the runtime to protocol 1.")
    return health
