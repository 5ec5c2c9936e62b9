"""A run in rounds, judged after each by the sequential gate (`simrun.scoring.gate._sequential`).

`run_in_rounds` runs every cell `per_round` more times, resumes the same run for the next round
(the store holds one run, like `simrun resume`), and asks the sequential gate after each round
whether the candidate failed, passed, or must go on. It stops at the first decision, at the round
cap, or when the budget (or the user model) stops the run; undecided then is inconclusive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simrun._errors import ConfigError
from simrun.scoring.gate import Sequential, sequential_gate, summary_from_store
from simrun.scoring.store import Store
from simrun.simulator._execute import execute
from simrun.simulator._ledger import Ledger
from simrun.simulator._project import Plan
from simrun.simulator._runner import RunResult
from simrun.simulator.adapters import RuntimeAdapter


async def run_in_rounds(plan: Plan, store: Store, *, runtime_for: Callable[[Plan], RuntimeAdapter],
                        resume: bool | str = True, on_round: Callable[[Sequential], None] | None = None,
                        **execute_args: Any) -> tuple[RunResult, Sequential]:
    """Round after round of `plan` (a plan made with `sequential=True`: its repetitions are the
    cap) against `plan.baseline`. `runtime_for(plan)` gives each round its runtime (a round's
    end closes it); `execute_args` go to `simrun.simulator._execute.execute` (executor, replay, callbacks)."""
    gate = plan.budgets.gate
    seq = gate.sequential
    if plan.baseline is None:
        raise ConfigError("a run in rounds is judged against a baseline: set gate.baseline in simrun.toml",
                          field="sequential")
    outcome: Sequential | None = None
    result: RunResult | None = None
    for round_ in range(1, seq.max_rounds + 1):
        # A fresh ledger each round: a resumed run counts what it spent already against the budget.
        result = await execute(plan, store, runtime=runtime_for(plan), ledger=Ledger(plan.budget),
                               resume=result.run_id if result else resume, upto=round_ * seq.per_round,
                               **execute_args)
        stopped = bool(result.budget_stopped or result.stopped)
        outcome = sequential_gate(plan.baseline, summary_from_store(store, result.run_id), gate, seq,
                                  finished=stopped, previous=outcome)
        if on_round is not None:
            on_round(outcome)
        if outcome.decision != "continue" or stopped:
            break
    assert result is not None and outcome is not None     # max_rounds >= 1: at least one round ran
    return result, outcome
