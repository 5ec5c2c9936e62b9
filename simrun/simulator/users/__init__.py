"""The simulated users: who talks to the runtime, turn by turn.

    base       the contract (`UserBackend`, `UserSession`: one async call per turn, and the
               members a paid backend adds, stated by a free one with their defaults) and
               `make_user(spec)`, which picks a backend
    scripted   the scripted user: deterministic, offline and free, the default
    manners    how a persona's manner changes what the scripted user writes
    asked      which arguments a reply asks for in words (a runtime with no asks as data)
    model      a user played by a model, paid for under a hard budget, with a replay cache
    prompt     what a model-played user is told, and how its answer is read
    providers  the model APIs (OpenAI and compatible, Anthropic), and what a model user asks
               of one (`Provider`)
    wire       the light path for OpenAI-compatible servers: plain HTTP, simrun's own errors
               (`ModelAPIError`, `ModelStatusError`), the environment's proxy
    bounded    the HTTP client the Anthropic SDK is given: answers bounded, the same proxy

Imports: `scoring` (personas, goals, transcripts, the judge's reading of a turn) and the rest of
`simulator` (ledger, limits, pricing, retry); the model SDKs only when such a backend is made.
"""

from __future__ import annotations

from simrun.simulator.users._base import UserBackend, make_user
from simrun.simulator.users._model import ReplayCache
from simrun.simulator.users._prompt import OPENING, action_json, action_schema, render_result, stable_prefix
from simrun.simulator.users._providers import KEY_VARIABLES, MalformedResponse
from simrun.simulator.users._scripted import ScriptedUser
from simrun.simulator.users._wire import ModelAPIError, ModelStatusError

__all__ = [
    "KEY_VARIABLES",
    "MalformedResponse",
    "ModelAPIError",
    "ModelStatusError",
    "OPENING",
    "ReplayCache",
    "ScriptedUser",
    "UserBackend",
    "action_json",
    "action_schema",
    "make_user",
    "render_result",
    "stable_prefix",
]

if __name__ != "simrun.simulator.users":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.simulator.users; import it as `simrun.simulator.users`, not `{__name__}`")
