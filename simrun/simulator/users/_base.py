"""The simulated-user role: one async call from the conversation so far to the next user turn.

A backend makes one `UserSession` per conversation (persona, goal, seed, repetition); the
session may keep state between turns (a model's message history, the scripted user's place in
the goal). Every backend honours every manner: the scripted one by rules and seeded draws, the
model-played ones through the prompt.

Backends register by the first part of their spec, the way a third party's would: `scripted`,
`openai:<model>`, `anthropic:<model>`. Model SDKs are imported only when such a backend is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from simrun._errors import ConfigError
from simrun._transcript import TurnRecord, UserTurn
from simrun.scoring.dataset import Goal, Persona

if TYPE_CHECKING:
    from simrun._settings import Budgets, UserSection
    from simrun.simulator._ledger import CallLedger
    from simrun.simulator._limits import RateLimiter
    from simrun.simulator.users._model import ReplayCache


class UserSession(Protocol):
    """One conversation's simulated user."""

    @property
    def calls(self) -> Sequence[dict[str, Any]]:
        """Every paid (or replayed) call this conversation made, as the ledger recorded it (with
        its `cost_usd`): the conversation's cost. () for a backend that makes none."""

    async def next_turn(self, turns: tuple[TurnRecord, ...]) -> UserTurn: ...


class UserBackend(Protocol):
    """Everything the runner, the conversation loop and the Ray executor use of a backend. A free
    backend (the scripted user) states the paid members with their defaults: no ledger, no
    limiter, no replay, no output form, never stopped, and a `start` that settles nothing."""

    name: str           # its spec (`scripted`, `openai:<model>`): part of a run's key
    paid: bool
    # Why the run must stop early (the same provider failure conversation after conversation),
    # once it must; None until then. The Ray executor sets it from a worker's report.
    stopped: str | None

    @property
    def output(self) -> str | None:
        """The structured-output form `start` settled (recorded with the run, and given to a
        cluster's workers so that none probes again); None for a backend that has none."""

    @property
    def ledger(self) -> CallLedger[Any] | None:
        """What its calls are held against: the run's ledger (the runner takes it when given
        none), or a cluster worker's float; None for a free backend."""

    @property
    def limiter(self) -> RateLimiter | None:
        """Its [limits] window, whose bookings a cluster's shared window starts from; None without limits."""

    @property
    def replay(self) -> ReplayCache | None:
        """The recorded answers of a `--replay` run, whose hits and misses a cluster adds up; None otherwise."""

    def session(self, persona: Persona, goal: Goal, seed: int, repetition: int) -> UserSession: ...

    async def start(self, recorded: str | None = None) -> str | None:
        """Called once before the first conversation: settle the output form (`recorded`: the one
        a resumed run used) and return it; None for a backend that has none to settle."""

    def describe_output(self) -> str:
        """The output form `start` settled, and the forms passed over, for the user to read."""

    async def aclose(self) -> None:
        """Release connections; the runner calls it once the run is over."""


def make_user(spec: str, *, budgets: Budgets | None = None, ledger: CallLedger[Any] | None = None,
              replay: ReplayCache | None = None, settings: UserSection | None = None, output: str = "auto",
              limiter: RateLimiter | None = None, **options: Any) -> UserBackend:
    """The backend for `spec`. A model backend fails here, before anything runs, if its API key
    or its price is missing. `settings` is simrun.toml's [user] section; `output` its
    run.user_output. `limiter` keeps the spec's [limits] (default: a window of this process's own;
    a cluster's workers share one)."""
    if spec == "scripted":
        from simrun.simulator.users._scripted import ScriptedUser

        return ScriptedUser(**options)
    kind = spec.split(":", 1)[0]
    if kind in ("openai", "anthropic"):
        from simrun._money import parse_usd
        from simrun._settings import Budgets, UserSection
        from simrun.simulator._ledger import Ledger
        from simrun.simulator._limits import RateLimiter
        from simrun.simulator._pricing import price_for
        from simrun.simulator.users._model import ModelUser
        from simrun.simulator.users._providers import provider_for

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
                      field="user")
