"""The shards of one run joined into one run, judged and reported as the same run unsharded
would be: `simrun merge`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from simrun._api._baselines import chosen_baseline
from simrun._api._report import RunFacts, run_facts
from simrun.scoring.gate import RunSummary, RunVerdict, verdict_of_run
from simrun.scoring.pages import build_report
from simrun.scoring.store import Store
from simrun.scoring.store import merge as merge_shards
from simrun.simulator import project_budgets


@dataclass(frozen=True)
class Merged:
    """The joined run: its id and database, its verdict, what its summary shows beside the rates,
    and its report."""

    run_id: str
    db: Path
    shards: int
    verdict: RunVerdict
    facts: RunFacts
    report: Path


def merge(shards: Sequence[str | Path], *, out: str | Path, reports: str | Path = "reports", partial: bool = False,
          baseline: str | Path | RunSummary | None = None, baseline_ref: str | None = None,
          budgets: str | Path | None = None, config: str | Path | None = None) -> Merged:
    """Join the DuckDB files of shards 0..n-1 of one run (each from `shard=(i, n)`) into one run
    in the new database `out`, and report it into `reports`, judged as the same run unsharded
    would be: against `baseline` or `baseline_ref` (as for `gate`; default: gate.baseline of
    simrun.toml) too. `partial`: join shards that did not finish too (the run is then marked
    interrupted)."""
    settings = project_budgets(budgets)
    base = chosen_baseline(baseline, baseline_ref, out, required=False, config=config)
    run_id = merge_shards(out, list(shards), partial=partial)
    with Store(out, create=False) as store:
        verdict = verdict_of_run(store, run_id, settings.release, baseline=base, gate_settings=settings.gate)
        facts = run_facts(store, run_id)
        path = build_report(store, run_id, reports, gate_settings=settings.gate, release=settings.release,
                            baseline=base, verdict=verdict)
    return Merged(run_id, Path(out), len(shards), verdict, facts, Path(path))
