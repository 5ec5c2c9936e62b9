"""The simulated-user role: one async call from the conversation so far to the next user turn.

A backend makes one `UserSession` per conversation (persona, goal, seed, repetition); the
session may keep state between turns (a model's message history, the scripted user's place in
the goal). Every backend honours every manner: the scripted one by rules and seeded draws, the
model-played ones through the prompt.

Backends register by the first part of their spec, the way a third party's would: `scripted`,
`openai:<model>`, `anthropic:<model>`. Model SDKs are imported only when such a backend is used.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

from simrun.scoring.dataset.models import Goal, Persona
from simrun.scoring.errors import ConfigError
from simrun.scoring.transcript import TurnRecord, UserTurn


class UserSession(Protocol):
    async def next_turn(self, turns: tuple[TurnRecord, ...]) -> UserTurn: ...


class UserBackend(Protocol):
    name: str
    paid: bool
    # A model backend also has `async start(recorded) -> output form` (called once before the
    # first conversation), `output` and `stopped` (why the run must stop early: the same provider
    # failure conversation after conversation). The scripted user needs none of them.

    def session(self, persona: Persona, goal: Goal, seed: int, repetition: int) -> UserSession: ...

    async def aclose(self) -> None:
        """Release connections; the runner calls it once the run is over."""


def make_user(spec: str, *, budgets=None, ledger=None, replay=None, settings=None, output: str = "auto",
              limiter=None, **options) -> UserBackend:
    """The backend for `spec`. A model backend fails here, before anything runs, if its API key
    or its price is missing. `settings` is simrun.toml's [user] section; `output` its
    run.user_output. `limiter` keeps the spec's [limits] (default: a window of this process's own;
    a cluster's workers share one)."""
    if spec == "scripted":
        from simrun.simulator.users.scripted import ScriptedUser

        return ScriptedUser(**options)
    kind = spec.split(":", 1)[0]
    if kind in ("openai", "anthropic"):
        from simrun.simulator.config import Budgets, UserSection
        from simrun.simulator.ledger import Ledger
        from simrun.simulator.limits import RateLimiter
        from simrun.simulator.money import parse_usd
        from simrun.simulator.pricing import price_for
        from simrun.simulator.users.model import ModelUser
        from simrun.simulator.users.providers import provider_for

        budgets, settings = budgets or Budgets(), settings or UserSection()
        price = price_for(budgets, spec)
        provider = provider_for(spec, offline=bool(replay and replay.only), timeout_s=settings.timeout_s,
                                temperature=settings.temperature, output=output, **options)
        per_conversation = budgets.budget.per_conversation
        limit = budgets.limits.get(spec)
        if limiter is None and limit is not None:
            limiter = RateLimiter(limit.requests_per_minute, limit.tokens_per_minute, window_s=limit.window_s)
        return ModelUser(spec, provider, price, ledger or Ledger(Decimal(0)), replay=replay, limiter=limiter,
                         max_tokens=settings.max_tokens, concurrency=settings.concurrency, output=output,
                         per_conversation=parse_usd(per_conversation, where="budget.per_conversation")
                         if per_conversation else None)
    raise ConfigError(f"unknown user backend {spec!r}; use scripted, openai:<model> or anthropic:<model>",
                      field="--user")
