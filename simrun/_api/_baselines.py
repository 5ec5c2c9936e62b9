"""Baselines: which one a call compares against, and one blessed from stored runs.

`chosen_baseline` is the one rule for every call that takes a baseline (the gate, a report, a
merge, a rescored or imported run's verdict): a blessed file or a stored run (`baseline`), or
git's REF:PATH (`baseline_ref`), at most one of them, else gate.baseline of simrun.toml.
`bless` writes a baseline file from one run, or from several runs of one matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from simrun._errors import ConfigError, Parameter
from simrun._version import __version__
from simrun.scoring.gate import (
    RunSummary,
    baseline_from_git,
    merge_runs,
    open_baseline,
    summary_from_store,
    write_baseline,
)
from simrun.scoring.store import Store
from simrun.simulator import load_project_file, project_baseline, project_db, project_file


def chosen_baseline(baseline: str | Path | RunSummary | None, baseline_ref: str | None, database: str | Path, *,
                    required: bool = True, config: str | Path | None = None) -> RunSummary | None:
    """`baseline` (a blessed file, a run id of the database at `database`, or a summary already
    read) or `baseline_ref` (git's REF:PATH), at most one of them, else gate.baseline of
    simrun.toml; with none of them, a ConfigError if `required`, else None."""
    if baseline is not None and baseline_ref is not None:
        raise ConfigError(("give one of ", Parameter("baseline"), " and ", Parameter("baseline_ref"), ", not both"),
                          field="baseline")
    if isinstance(baseline, RunSummary):
        return baseline
    if baseline_ref is not None:
        return baseline_from_git(baseline_ref)
    if baseline is not None:
        return open_baseline(str(baseline), database)
    found = project_baseline(load_project_file(config), project_file(config))
    if found is None and required:
        raise ConfigError(("no baseline: give ", Parameter("baseline"), " (a blessed file or a run id) or ",
                           Parameter("baseline_ref"), " (REF:PATH read from git), or set gate.baseline in "
                           "simrun.toml"), field="baseline")
    return found


@dataclass(frozen=True)
class Blessed:
    """A baseline written: what it summarises (its cells, dataset and scorer, and the runs blessed
    together, if several) and where it is."""

    summary: RunSummary
    path: Path


def bless(runs: str | Sequence[str], *, out: str | Path, db: str | Path | None = None,
          config: str | Path | None = None) -> Blessed:
    """Write the per-cell counts, dataset hash and scorer version of one run (a run id, or
    "latest"), or of several runs of one matrix blessed together (which lets the gate measure how
    far a cell's rate moves from run to run), to the baseline file `out`."""
    chosen = [runs] if isinstance(runs, str) else list(runs)
    with Store(project_db(db, config), create=False) as store:
        summary = merge_runs([summary_from_store(store, one) for one in chosen])
    return Blessed(summary, write_baseline(summary, out, simrun_version=__version__))
