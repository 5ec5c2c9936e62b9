"""A project: simrun.toml + budgets.toml + personas + goals, resolved into one runnable plan.

Everything is validated here, before any run row is written or any cent is spent. The CLI and
Python users both go through `load_plan` and `execute`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from simulator.adapters.python import PythonRuntime
from simulator.config import Budgets, Project, load_budgets, load_project
from simulator.dataset import Dataset, load_dataset
from simulator.errors import ConfigError
from simulator.money import parse_usd
from simulator.runner import RunResult, run_matrix
from simulator.users.base import UserBackend, make_user


@dataclass(frozen=True)
class Plan:
    project: Project
    budgets: Budgets
    dataset: Dataset
    budget: Decimal
    repetitions: int
    seed: int
    concurrency: int
    user: str
    db: Path
    reports: Path
    runtime_target: str
    runtime_options: dict[str, Any] = field(default_factory=dict)
    files: tuple[str, ...] = ()      # the configuration files read

    @property
    def conversations(self) -> int:
        return len(self.dataset.personas) * len(self.dataset.goals) * self.repetitions

    def config(self) -> dict[str, Any]:
        """What is stored with the run: enough to re-run it, and never a secret."""
        return {
            "repetitions": self.repetitions, "seed": self.seed, "concurrency": self.concurrency,
            "user": self.user, "budget_usd": str(self.budget),
            "runtime": {"transport": "python", "target": self.runtime_target,
                        "options": self.runtime_options},
            "personas": [p.id for p in self.dataset.personas], "goals": [g.id for g in self.dataset.goals],
        }


def _file(given: str | Path | None, default: str, flag: str) -> Path | None:
    """A file named by a flag must exist; the default file is optional."""
    if given is None:
        return Path(default) if Path(default).exists() else None
    if not Path(given).is_file():
        raise ConfigError(f"no such file: {given}", field=flag)
    return Path(given)


def load_plan(*, config: str | Path | None = None, budgets: str | Path | None = None,
              budget: str | None = None, personas: str | None = None, goals: str | None = None,
              repetitions: int | None = None, seed: int | None = None, concurrency: int | None = None,
              user: str | None = None, db: str | None = None, reports: str | None = None) -> Plan:
    """Resolve flags over files over defaults, and validate all of it before anything runs."""
    config_file = _file(config, "simrun.toml", "--config")
    budgets_file = _file(budgets, "budgets.toml", "--budgets")
    project = load_project(config_file) if config_file else Project()
    money = load_budgets(budgets_file) if budgets_file else Budgets()
    amount = parse_usd(budget) if budget is not None else parse_usd(money.budget.default, where="budget.default")
    for flag, value in (("--repetitions", repetitions), ("--concurrency", concurrency)):
        if value is not None and value < 1:
            raise ConfigError(f"must be at least 1, got {value}", field=flag)
    # Paths in simrun.toml are relative to it, like a pyproject.toml's.
    base = config_file.parent if config_file else Path(".")
    run = project.run
    dataset = load_dataset(Path(personas) if personas else base / run.personas,
                           Path(goals) if goals else base / run.goals)
    plan = Plan(project=project, budgets=money, dataset=dataset, budget=amount,
                repetitions=repetitions or run.repetitions, seed=run.seed if seed is None else seed,
                concurrency=concurrency or run.concurrency, user=user or run.user,
                db=Path(db) if db else base / run.db, reports=Path(reports) if reports else base / run.reports,
                runtime_target=project.runtime.target, runtime_options=dict(project.runtime.options),
                files=tuple(str(f) for f in (config_file, budgets_file) if f))
    if not plan.db.parent.is_dir():
        raise ConfigError(f"the folder {plan.db.parent} does not exist", field="--db")
    if plan.reports.exists() and not plan.reports.is_dir():
        raise ConfigError(f"{plan.reports} is a file, not a folder for reports", field="--reports")
    make_user(plan.user)   # an unknown or unavailable backend fails here, before anything runs
    return plan


def runtime_for(plan: Plan) -> PythonRuntime:
    return PythonRuntime.from_target(plan.runtime_target, plan.runtime_options)


async def execute(plan: Plan, store, *, user: UserBackend | None = None, runtime=None,
                  on_conversation=None) -> RunResult:
    return await run_matrix(plan.dataset, runtime or runtime_for(plan), user or make_user(plan.user), store,
                            repetitions=plan.repetitions, seed=plan.seed, budget=plan.budget,
                            concurrency=plan.concurrency, config=plan.config(),
                            on_conversation=on_conversation)
