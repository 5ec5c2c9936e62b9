"""`simrun validate --runtime`: the goals checked against a live runtime, before anything is spent.

The scripted user (free) plays each goal once, as a plain persona, against the runtime; the
conversations go to a throw-away database; and the names the goals use (record fields and types,
operations) are compared with everything that runtime's stores held, exactly as after a run
(`simrun.scoring.store._seen`). A goal that names `bag` where the runtime's records have `bags` is named
here, not after a paid run reported 0% goal reached.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Protocol

from simrun.scoring.dataset import Dataset, Persona
from simrun.scoring.store import Store, record_goal_problems
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters import RuntimeAdapter
from simrun.simulator.users import ScriptedUser

PROBE = Persona(id="validate-probe", name="Validate probe")      # no manners: asks plainly


@dataclass(frozen=True)
class GoalCheck:
    conversations: int
    problems: tuple[str, ...]        # one line each, as a run's verdict would give them


class Checked(Protocol):
    """What `check_goals` reads of a run's plan (`simrun.simulator._project.Plan`)."""

    @property
    def dataset(self) -> Dataset: ...
    @property
    def seed(self) -> int: ...
    @property
    def budget(self) -> Decimal: ...
    @property
    def concurrency(self) -> int: ...


async def check_goals(plan: Checked, runtime: RuntimeAdapter) -> GoalCheck:
    """Play each goal of `plan` once against `runtime` (which this closes) and name the goals that
    name what its stores never held."""
    dataset = replace(plan.dataset, personas=(PROBE,),
                      item_hashes={**plan.dataset.item_hashes, f"persona:{PROBE.id}": "probe"})
    with tempfile.TemporaryDirectory(prefix="simrun-validate-") as folder, \
            Store(Path(folder) / "validate.duckdb") as store:
        result = await run_matrix(dataset, runtime, ScriptedUser(), store, repetitions=1, seed=plan.seed,
                                  budget=plan.budget, concurrency=plan.concurrency, config={"validate": "runtime"})
        return GoalCheck(result.conversations, tuple(record_goal_problems(store, result.run_id, dataset.goals)))
