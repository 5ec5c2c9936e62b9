"""A project checked before a run: its files and that the runtime answers (`simrun validate`),
the runtime's conformance to the protocol (`simrun check-runtime`), and what the matrix would
cost per model backend (`simrun plan`). None of them spends anything."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simrun._errors import ConfigError
from simrun._money import Money
from simrun.scoring.dataset import Goal
from simrun.scoring.store import Store
from simrun.simulator import (
    Conformance,
    Estimate,
    GoalCheck,
    Plan,
    check_goals,
    estimate,
    eventloop,
    load_plan,
    price_for,
    runtime_for,
    user_backend,
)
from simrun.simulator import check_runtime as conformance
from simrun.simulator.adapters import RuntimeAdapter


def _plan(config: str | Path | None, personas: str | Path | None, goals: str | Path | None, runtime: object | None,
          runtime_settings: Mapping[str, Any] | None, demo_if_no_project: bool, **settings: Any) -> Plan:
    """The project's plan, its user checked (an unknown backend, or one without its key or
    price, fails here, as it would fail a run)."""
    plan = load_plan(config=config, personas=personas, goals=goals, runtime=runtime, runtime_settings=runtime_settings,
                     demo_if_no_project=demo_if_no_project, **settings)
    user_backend(plan)
    return plan


@dataclass(frozen=True)
class Validated:
    """A project that checked out: its plan, the runtime's health answer, and, when its goals
    were played against the runtime, what that found (`goals.problems`: none when every field,
    type and operation they name was held)."""

    plan: Plan
    health: Mapping[str, Any]
    goals: GoalCheck | None


def validate(*, config: str | Path | None = None, budgets: str | Path | None = None,
             personas: str | Path | None = None, goals: str | Path | None = None, runtime: object | None = None,
             runtime_settings: Mapping[str, Any] | None = None, play_goals: bool = False,
             demo_if_no_project: bool = False) -> Validated:
    """Check personas, goals, simrun.toml and budgets.toml (the arguments as `simrun.prepare`'s),
    and that the runtime answers. `play_goals`: also play each goal once with the scripted user
    (free) against the runtime, and name the goals that name record fields, record types or
    operations it never held."""
    plan = _plan(config, personas, goals, runtime, runtime_settings, demo_if_no_project, budgets=budgets)
    health = eventloop.run(_health(runtime_for(plan)))
    played = eventloop.run(check_goals(plan, runtime_for(plan))) if play_goals else None
    return Validated(plan, health, played)


async def _health(runtime: RuntimeAdapter) -> dict[str, Any]:
    try:
        return await runtime.health()
    finally:
        await runtime.aclose()


@dataclass(frozen=True)
class RuntimeCheck:
    """A conformance conversation held: the plan, the goal it played, and what the runtime gave
    (`report.violations` empty: it keeps protocol 1)."""

    plan: Plan
    goal: str
    report: Conformance


def check_runtime(*, config: str | Path | None = None, personas: str | Path | None = None,
                     goals: str | Path | None = None, goal: str | None = None, runtime: object | None = None,
                     runtime_settings: Mapping[str, Any] | None = None,
                     demo_if_no_project: bool = False) -> RuntimeCheck:
    """Hold a short conformance conversation with the runtime (the arguments as
    `simrun.prepare`'s), with the setup and words of `goal` (default: the first), and report what
    it supplies: the operations it answered, the fields its turns carried, the evidence it gives
    and the checks that would be UNVERIFIABLE without more, and each protocol violation."""
    plan = _plan(config, personas, goals, runtime, runtime_settings, demo_if_no_project)
    chosen = _goal(plan, goal)
    report = eventloop.run(conformance(runtime_for(plan), chosen, list(plan.dataset.goals)))
    return RuntimeCheck(plan, chosen.id, report)


def _goal(plan: Plan, goal: str | None) -> Goal:
    if goal is None:
        return plan.dataset.goals[0]
    try:
        return plan.dataset.goal(goal)
    except StopIteration:
        raise ConfigError(f"no goal {goal!r}; goals are: {', '.join(g.id for g in plan.dataset.goals)}",
                          field="goal") from None


@dataclass(frozen=True)
class CostEstimate:
    """What the matrix of `plan` would cost: one estimate per priced model backend (the scripted
    user is free), with the calls and tokens it would take."""

    plan: Plan
    estimates: tuple[Estimate, ...]


def estimate_cost(*, budget: Money | None = None, config: str | Path | None = None, budgets: str | Path | None = None,
                  personas: str | Path | None = None, goals: str | Path | None = None, repetitions: int | None = None,
                  seed: int | None = None, user: str | None = None, runtime: object | None = None,
                  runtime_settings: Mapping[str, Any] | None = None,
                  demo_if_no_project: bool = False) -> CostEstimate:
    """Estimate what the matrix costs per model backend (only `user`'s, when given; default: every
    priced one), before spending anything, against `budget`. A free dry run with the scripted
    user gives the conversations' lengths; their prompts are priced with budgets.toml, the stable
    prefix as cached after each conversation's first call; a backend's earlier runs in the
    project's database, where it has some, are its history."""
    plan = load_plan(config=config, budgets=budgets, budget=budget, personas=personas, goals=goals,
                     repetitions=repetitions, seed=seed, runtime=runtime, runtime_settings=runtime_settings,
                     demo_if_no_project=demo_if_no_project)
    priced = user if user and user != "scripted" else None
    if priced is not None and priced not in plan.budgets.prices:
        price_for(plan.budgets, priced)     # refused, saying how to price it
    store = Store(plan.db, create=False) if plan.db.exists() else None   # its history; never created here
    try:
        found = eventloop.run(estimate(plan.dataset, runtime_for(plan), plan.budgets, plan.budget,
                                       repetitions=plan.repetitions, seed=plan.seed, store=store,
                                       backends=[priced] if priced else None))
    finally:
        if store is not None:
            store.close()
    return CostEstimate(plan, tuple(found))
