"""A user model measured where the answer is known: `simrun check-user`.

`prepare_check_user` checks the model (its key, its price) and plans the check (its cost and,
at the server's measured pace, its time) without spending anything; `PreparedCheckUser.run`
plays it against the bundled reference runtime, whose goals are all reachable, and stores the
result where every report of a run with that model shows it beside the rates. A check stopped
early keeps its calls and conversations, and the same check finishes it (`kept` says what it kept).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from simrun._errors import ConfigError, SimrunError
from simrun._money import Money, amount_of, parse_usd
from simrun._settings import Budgets, Project
from simrun.scoring.gate import DEFAULT_THRESHOLD, Competence, competence
from simrun.scoring.store import Finished, Store
from simrun.simulator import (
    CheckUser,
    Estimate,
    Ledger,
    checks_db,
    eventloop,
    kept,
    load_project_file,
    measured_pace,
    project_budgets,
    project_db,
    reference_dataset,
)
from simrun.simulator.users import make_user

# What hears each finished conversation, for as long as the check runs: entered on its event loop
# with the check's ledger (the command line's progress lines are one).
Progress = Callable[[Ledger], AbstractContextManager[Callable[[Finished], None]]]


@dataclass(frozen=True)
class CheckKept:
    """What a stopped check kept in its database: its run, finished conversations, model calls
    and what they cost."""

    run_id: str
    conversations: int
    calls: int
    spent_usd: Decimal


@dataclass(frozen=True)
class UserCheck:
    """A check played: its run (in the checks' own database), what it measured (the stored
    row: goals reached per goal, simulator errors by kind and examples, provider errors, turns
    per reached goal, cost, output form), and the competence every report now shows."""

    run_id: str
    spent_usd: Decimal
    stopped: str | None                 # why the user model stopped the check, if it did
    measured: Mapping[str, Any]
    competence: Competence | None       # None: no conversation of the check could be judged

    @property
    def judged(self) -> bool:
        return self.competence is not None and bool(self.competence.judged)


@dataclass(frozen=True)
class PreparedCheckUser:
    """A check of a user model, checked and planned, nothing spent: `run` plays it."""

    user: str
    conversations: int                  # the check's matrix: 2 personas x every goal x repetitions
    budget: Decimal
    estimate: Estimate
    earlier: str | None                 # the unfinished check this one finishes (its run id)
    stored: int                         # conversations it stored already
    calls: int                          # model calls left to make, by the estimate
    pace: tuple[float, int] | None      # the server's measured pace: (seconds a call, calls measured)
    db: Path                            # the project's database, where the result is kept
    checks_db: Path                     # the check's own runs
    fresh: bool
    concurrency: int
    # How the check is played, with what prices and settings: the API's own business.
    _check: CheckUser = field(repr=False)
    _budgets: Budgets = field(repr=False)
    _project: Project = field(repr=False)

    @property
    def left(self) -> int:
        """Conversations left to play."""
        return self.conversations - self.stored

    def run(self, *, progress: Progress | None = None, note: Callable[[str], None] | None = None) -> UserCheck:
        """Play the check (finishing the unfinished one, unless `fresh`), store what it measured
        in the project's database, and give it. `progress`: hears each finished conversation;
        `note`: a line worth telling (the user model's output form)."""
        return eventloop.run(self._played(progress, note))

    async def _played(self, progress: Progress | None, note: Callable[[str], None] | None) -> UserCheck:
        ledger = Ledger(self.budget)
        with Store(self.db) as store, Store(self.checks_db) as checks:
            hearing = progress(ledger) if progress is not None else nullcontext(_nothing)
            with hearing as on_conversation:
                result, measured = await self._check.run(self._budgets, self._project, store, checks,
                                                        concurrency=self.concurrency, ledger=ledger,
                                                        resume=not self.fresh, on_user_ready=note,
                                                        on_conversation=on_conversation)
            found = competence(store, self.user)
        return UserCheck(result.run_id, result.spent_usd, result.stopped, measured, found)

    def kept(self) -> CheckKept | None:
        """What an interrupted check left in its database (None: nothing, it was stopped before its
        run began)."""
        try:
            with Store(self.checks_db, create=False) as checks:
                found = kept(checks, self.user)
        except (SimrunError, duckdb.Error):
            return None
        return None if found is None else CheckKept(*found)


def _nothing(finished: Finished) -> None:
    """What hears a conversation when nothing was asked to."""


def prepare_check_user(user: str, *, budget: Money | None = None, repetitions: int = 1,
                       threshold: float | None = None, concurrency: int | None = None, fresh: bool = False,
                       config: str | Path | None = None, budgets: str | Path | None = None,
                       db: str | Path | None = None) -> PreparedCheckUser:
    """How competent the user model `user` ("openai:<model>", "anthropic:<model>") is, made
    ready to measure: `repetitions` (1 to 20) of the 20 conversations (2 personas x 10 goals)
    against the bundled reference runtime, under `budget` (default: budgets.toml's
    budget.default). Below `threshold`, a goal-reached share (default 0.8), reports warn that a
    runtime's rates may mostly measure the user. `concurrency`: conversations in flight (default: run.concurrency).
    `fresh`: a new check even if this one was stopped before it finished."""
    if user == "scripted":
        raise ConfigError("check-user measures a model-played user; the scripted user is the reference "
                          "itself", field="user")
    if not 1 <= repetitions <= 20:
        raise ConfigError(f"must be from 1 to 20, got {repetitions}", field="repetitions")
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    if not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"must be from 0 to 1, got {threshold}", field="threshold")
    if concurrency is not None and concurrency < 1:
        raise ConfigError(f"must be at least 1, got {concurrency}", field="concurrency")
    project = load_project_file(config)
    money = project_budgets(budgets)
    amount = amount_of(budget) if budget is not None else parse_usd(money.budget.default, where="budget.default")
    make_user(user, budgets=money, settings=project.user, output=project.run.user_output)   # its key, its price
    check = CheckUser(user, reference_dataset(), repetitions, amount, threshold)
    path = Path(project_db(db, config))
    kept_in = checks_db(path)
    return eventloop.run(_planned(check, money, project, path, kept_in, fresh,
                                  concurrency or project.run.concurrency))


async def _planned(check: CheckUser, money: Budgets, project: Project, path: Path, kept_in: Path, fresh: bool,
                   concurrency: int) -> PreparedCheckUser:
    """The check's plan: its cost, the unfinished check it finishes, and its time at the server's
    measured pace."""
    with Store(path) as store, Store(kept_in) as checks:
        estimated = await check.estimate(money, store)
        earlier = None if fresh else check.earlier(checks)
        done = len(checks.conversation_ids(earlier["run_id"])) if earlier else 0
        pace = measured_pace(checks, check.backend)
    left = check.conversations - done
    calls = round(estimated.calls * left / check.conversations) if check.conversations else 0
    return PreparedCheckUser(check.backend, check.conversations, check.budget, estimated,
                             earlier["run_id"] if earlier else None, done, calls, pace, path, kept_in, fresh,
                             concurrency, check, money, project)


def check_user(user: str, *, budget: Money | None = None, repetitions: int = 1, threshold: float | None = None,
               concurrency: int | None = None, fresh: bool = False, config: str | Path | None = None,
               budgets: str | Path | None = None, db: str | Path | None = None) -> UserCheck:
    """Measure how competent the user model `user` is (`prepare_check_user`, then its run)."""
    return prepare_check_user(user, budget=budget, repetitions=repetitions, threshold=threshold,
                              concurrency=concurrency, fresh=fresh, config=config, budgets=budgets, db=db).run()
