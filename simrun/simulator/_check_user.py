"""`simrun check-user`: how competent a user model is, measured where the answer is known.

The bundled reference runtime (TripDesk, no faults) can reach every bundled goal: the scripted
user reaches all of them. A model that plays the user there and does not reach them is failing
on its own account. A small run (two personas, a plain and a terse one, times every goal: 20
conversations a repetition) under a budget gives the goal-reached share, the simulator errors by
kind, the turns per reached goal, the cost per conversation and the output form the model
answered in. Its sum (`simrun.scoring.gate._competence.measure`) is stored in the project's database,
where every report of a run with that backend and model shows it beside the rates.

The check is a run like any other, with the same ledger and interruption rules: every model call
is stored as it settles and every conversation as it ends, in a database of its own beside the
project's (`checks_db`: `simrun runs --db simrun.check-user.duckdb` lists the checks, `show`
reads their transcripts), so that the project's own runs stay those of its runtime. A check
stopped (Ctrl-C, SIGTERM, a budget) keeps what it did, and the same command finishes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from simrun._settings import Budgets, Project
from simrun.examples import tripdesk
from simrun.scoring.dataset import Dataset, load_dataset
from simrun.scoring.gate import DEFAULT_THRESHOLD, measure
from simrun.scoring.store import Finished, Store, save_user_check, spend
from simrun.simulator import _demo as demo
from simrun.simulator._ledger import Ledger
from simrun.simulator._plan import Estimate, estimate
from simrun.simulator._runner import RunResult, run_key, run_matrix
from simrun.simulator.adapters import PythonRuntime
from simrun.simulator.users import make_user

PERSONAS = ("plain-paula", "terse-tom")
SEED = 1
CONFIG = {"check_user": True}


def reference_dataset() -> Dataset:
    """Every bundled goal, with a plain and a terse persona: what the check plays."""
    reference = demo.folder()      # TripDesk's own personas and goals, in a clone or a wheel
    full = load_dataset(reference / "personas", reference / "goals")
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

    async def estimate(self, budgets: Budgets, store: Store | None) -> Estimate:
        (found,) = await estimate(self.dataset, PythonRuntime(tripdesk.TripDesk()), budgets, self.budget,
                                  repetitions=self.repetitions, seed=SEED, backends=[self.backend], store=store)
        return found

    def runtime(self) -> PythonRuntime:
        return PythonRuntime(tripdesk.TripDesk())

    def earlier(self, checks: Store) -> dict[str, Any] | None:
        """The unfinished check of this backend and matrix that the next run of it finishes."""
        key = run_key(self.dataset, CONFIG, seed=SEED, repetitions=self.repetitions, user=self.backend,
                      runtime=self.runtime().identity, shard=None)
        return checks.resumable(key)

    async def run(self, budgets: Budgets, project: Project, store: Store, checks: Store, *, concurrency: int,
                  ledger: Ledger | None = None, resume: bool = True,
                  on_user_ready: Callable[[str], None] | None = None,
                  on_conversation: Callable[[Finished], None] | None = None) -> tuple[RunResult, dict[str, Any]]:
        """Play the check as a run in `checks` (finishing an unfinished one unless `resume` is
        False); store its measure in `store`; return both."""
        ledger = ledger or Ledger(self.budget)
        run = project.run
        options: dict[str, Any] = {"base_url": run.user_base_url} if run.user_base_url else {}
        user = make_user(self.backend, budgets=budgets, ledger=ledger, settings=project.user,
                         output=run.user_output, **options)
        # The calls in flight at once, kept with the run (not part of its key) for the next plan's pace.
        at_once = min(concurrency, project.user.concurrency or concurrency, self.conversations)
        result = await run_matrix(self.dataset, self.runtime(), user, checks, repetitions=self.repetitions, seed=SEED,
                                  budget=self.budget, concurrency=concurrency, ledger=ledger, resume=resume,
                                  config={**CONFIG, "concurrency": at_once}, on_user_ready=on_user_ready,
                                  on_conversation=on_conversation)
        check = measure(checks, result.run_id, self.backend, self.threshold)
        save_user_check(store, check)
        return result, check


def checks_db(db: Path | str) -> Path:
    """Where check-user keeps its runs: beside the project's database (simrun.check-user.duckdb)."""
    db = Path(db)
    return db.with_name(f"{db.stem}.check-user{db.suffix or '.duckdb'}")


def measured_pace(checks: Store, backend: str) -> tuple[float, int] | None:
    """(seconds per call, calls measured) of the newest check of `backend` that made a call: the
    calls' mean latency over the calls it had in flight at once (a single-slot server's queue is
    in each call's latency, so this is the pace at which the server answers)."""
    row = checks.con.execute(
        "SELECT avg(m.latency_ms), count(*), any_value(TRY_CAST(r.config->>'concurrency' AS INTEGER)) "
        "FROM model_calls m JOIN runs r USING (run_id) WHERE r.user_backend = ? AND m.latency_ms > 0 "
        "GROUP BY r.run_id, r.started_at ORDER BY r.started_at DESC LIMIT 1", [backend]).fetchone()
    if row is None:
        return None
    latency_ms, calls, at_once = row
    return latency_ms / 1000 / max(at_once or 1, 1), calls


def kept(checks: Store, backend: str) -> tuple[str, int, int, Decimal] | None:
    """(run id, conversations, model calls, their cost) of the newest unfinished check of
    `backend`: what a stopped check kept, for the line that says so."""
    row = checks.con.execute("SELECT run_id FROM runs WHERE status <> 'finished' AND user_backend = ? "
                             "ORDER BY started_at DESC LIMIT 1", [backend]).fetchone()
    if row is None:
        return None
    spent, calls = spend(checks, row[0])
    return row[0], len(checks.conversation_ids(row[0])), calls, spent
