"""`simrun check-user`: how competent a user model is, measured where the answer is known.

The bundled reference runtime (TripDesk, no faults) can reach every bundled goal: the scripted
user reaches all of them. A model that plays the user there and does not reach them is failing
on its own account. A small run (two personas, a plain and a terse one, times every goal: 20
conversations a repetition) under a budget gives the goal-reached share, the simulator errors by
kind, the turns per reached goal, the cost per conversation and the output form the model
answered in. The conversations run in memory; their sum (`scoring.gate.competence.measure`) is
stored in the project's database, where every report of a run with that backend and model
shows it beside the rates.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import tripdesk
from scoring.store.model_calls import save_user_check
from scoring.gate.competence import DEFAULT_THRESHOLD, measure
from scoring.dataset.files import Dataset, load_dataset
from scoring.errors import ConfigError
from scoring.store.database import Store
from simulator.adapters.python import PythonRuntime
from simulator.ledger import Ledger
from simulator.plan import Estimate, estimate
from simulator.runner import RunResult, run_matrix
from simulator.users.base import make_user

REFERENCE = Path(tripdesk.__file__).resolve().parent.parent
PERSONAS = ("plain-paula", "terse-tom")
SEED = 1


def reference_dataset() -> Dataset:
    """Every bundled goal, with a plain and a terse persona: what the check plays."""
    if not (REFERENCE / "goals").is_dir():
        raise ConfigError(f"the bundled reference goals are not at {REFERENCE / 'goals'}; check-user needs simrun's "
                          "source tree (pip install -e)", field="check-user")
    full = load_dataset(REFERENCE / "personas", REFERENCE / "goals")
    personas = tuple(full.persona(p) for p in PERSONAS)
    return Dataset(personas, full.goals, full.hash, full.item_hashes)


@dataclass(frozen=True)
class CheckUser:
    backend: str
    dataset: Dataset
    repetitions: int
    budget: Decimal
    threshold: float = DEFAULT_THRESHOLD

    @property
    def conversations(self) -> int:
        return len(self.dataset.personas) * len(self.dataset.goals) * self.repetitions

    async def estimate(self, budgets, store: Store | None) -> Estimate:
        (found,) = await estimate(self.dataset, PythonRuntime(tripdesk.TripDesk()), budgets, self.budget,
                                  repetitions=self.repetitions, seed=SEED, backends=[self.backend], store=store)
        return found

    async def run(self, budgets, project, store: Store, *, concurrency: int,
                  on_user_ready=None) -> tuple[RunResult, dict]:
        """Play the check in memory; store its measure in `store`; return both."""
        ledger = Ledger(self.budget)
        run = project.run
        options = {"base_url": run.user_base_url} if run.user_base_url else {}
        user = make_user(self.backend, budgets=budgets, ledger=ledger, settings=project.user,
                         output=run.user_output, **options)
        with Store(":memory:") as scratch:
            result = await run_matrix(self.dataset, PythonRuntime(tripdesk.TripDesk()), user, scratch,
                                      repetitions=self.repetitions, seed=SEED, budget=self.budget,
                                      concurrency=concurrency, ledger=ledger, resume=False,
                                      config={"check_user": True}, on_user_ready=on_user_ready)
            check = measure(scratch, result.run_id, self.backend, self.threshold)
        save_user_check(store, check)
        return result, check
