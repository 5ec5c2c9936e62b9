"""The simulated-user role: one async call from the conversation so far to the next user turn.

A backend makes one `UserSession` per conversation (persona, goal, seed, repetition); the
session may keep state between turns (a model's message history, the scripted user's place in
the goal). Every backend honours every manner: the scripted one by rules and seeded draws, the
model-played ones through the prompt.
"""

from __future__ import annotations

from typing import Protocol

from scoring.transcript import TurnRecord, UserTurn
from simulator.dataset import Goal, Persona


class UserSession(Protocol):
    async def next_turn(self, turns: tuple[TurnRecord, ...]) -> UserTurn: ...


class UserBackend(Protocol):
    name: str
    paid: bool

    def session(self, persona: Persona, goal: Goal, seed: int, repetition: int) -> UserSession: ...


def make_user(spec: str, **options) -> UserBackend:
    """`scripted` (the default). Model backends (`openai:<model>`, `anthropic:<model>`) come next."""
    if spec == "scripted":
        from simulator.users.scripted import ScriptedUser

        return ScriptedUser(**options)
    from simulator.errors import ConfigError

    if spec.split(":", 1)[0] in ("openai", "anthropic"):
        raise ConfigError(f"user backend {spec!r} is not available in this version yet; "
                          "use --user scripted", field="--user")
    raise ConfigError(f"unknown user backend {spec!r}; use scripted, openai:<model> or anthropic:<model>",
                      field="--user")
