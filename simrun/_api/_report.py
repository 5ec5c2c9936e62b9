"""A stored run's verdict and report, made again as it would be made now: `simrun report`.

`report` writes the HTML report of a stored run (its verdict first, against a baseline if one is
given); `run_facts` is what a run's summary shows beside its rates. A rescored or imported run's
verdict is made by `verdict_now`, as `report` would make it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simrun._api._baselines import chosen_baseline
from simrun.scoring.gate import Competence, RunSummary, RunVerdict, competence, verdict_of_run
from simrun.scoring.pages import build_report
from simrun.scoring.store import Store
from simrun.simulator import project_budgets, project_db


@dataclass(frozen=True)
class Report:
    """A report written: the run's id, the verdict it opens on, and the page."""

    run_id: str
    verdict: RunVerdict
    path: Path


def report(run: str = "latest", *, db: str | Path | None = None, reports: str | Path = "reports",
           baseline: str | Path | RunSummary | None = None, baseline_ref: str | None = None,
           budgets: str | Path | None = None, config: str | Path | None = None) -> Report:
    """Write (again) the HTML report of a stored run (a run id, or "latest") into `reports`,
    against `baseline` or `baseline_ref` if given (as for `gate`; default: gate.baseline of
    simrun.toml, if set): each class's delta, the gate's verdict and the conversations that
    flipped. The run is judged by the release criteria it ran with, unless `budgets` is given."""
    database = project_db(db, config)
    base = chosen_baseline(baseline, baseline_ref, database, required=False, config=config)
    money = project_budgets(budgets)
    with Store(database, create=False) as store:
        # The criteria the run was judged with, unless `budgets` says otherwise.
        verdict = verdict_of_run(store, run, money.release if budgets else None, baseline=base,
                                 gate_settings=money.gate, fallback=money.release)
        path = build_report(store, run, reports, baseline=base, gate_settings=money.gate, release=money.release,
                            verdict=verdict)
    return Report(verdict.run_id, verdict, Path(path))


def verdict_now(store: Store, run_id: str, database: str | Path) -> RunVerdict:
    """A run's verdict as `report` would give it now (gate.baseline of simrun.toml, and the
    criteria it ran with, else ./budgets.toml's): what a rescored or imported run now says."""
    money = project_budgets()
    return verdict_of_run(store, run_id, baseline=chosen_baseline(None, None, database, required=False),
                          gate_settings=money.gate, fallback=money.release)


@dataclass(frozen=True)
class RunFacts:
    """What a run's summary shows beside its rates, read from its store: who played the user, the
    first provider error (its conversation, turn and what the server said), and that user
    model's check-user result (None: never checked, or the scripted user)."""

    run_id: str
    user: str
    first_provider_error: Mapping[str, Any] | None
    competence: Competence | None


def run_facts(store: Store, run_id: str) -> RunFacts:
    """The facts beside the rates of the run `run_id` of `store` (`RunEvents.judged` hands over
    the store of a run as it is judged)."""
    user = str(store.run(run_id)["user_backend"])
    return RunFacts(run_id, user, store.first_error(run_id, "provider_error"),
                    None if user == "scripted" else competence(store, user))
