"""The merge gate as a library call: a candidate run judged against a baseline, as `simrun gate`.

`simrun.gate()` gives the candidate's whole verdict: its guarantees, its release criteria (those
it ran with, unless `budgets` says otherwise) and the gate against the baseline, fixed or, with
`sequential=True`, in rounds. The command line prints it and writes its Markdown, JUnit and JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simrun._api._run import writable, write_verdict_json
from simrun._errors import ConfigError, GateError, StoreError
from simrun._settings import Budgets, load_budgets, stored_sequential
from simrun.scoring.gate import (
    GateResult,
    RunSummary,
    RunVerdict,
    Sequential,
    baseline_from_git,
    gate_verdict,
    open_baseline,
    sequential_gate,
    summary_from_store,
    verdict_of_run,
)
from simrun.scoring.store import Store
from simrun.simulator import given_file, load_project_file, project_baseline, project_db


@dataclass(frozen=True)
class GateOutcome:
    """The candidate's verdict with the gate in it, and the gate's own result (per class, slice,
    cell and flipped conversation). `exit_code`: 0 passed, 1 failed, 3 undecided in rounds."""

    verdict: RunVerdict
    gate: GateResult
    rounds: Sequential | None = None    # the sequential gate's looks, with sequential=True

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    @property
    def passed(self) -> bool:
        return self.verdict.passed


def chosen_baseline(baseline: str | None, baseline_ref: str | None, database: str,
                    required: bool = True, config: str | Path | None = None) -> RunSummary | None:
    """`baseline` (a blessed file or a run id) or `baseline_ref` (git's REF:PATH), at most one of
    them, else gate.baseline of simrun.toml; with neither, an error if `required`, else None."""
    if baseline is not None and baseline_ref is not None:
        raise ConfigError("give one of --baseline FILE|RUN and --baseline-ref REF:PATH, not both", field="--baseline")
    if baseline is None and baseline_ref is None:
        found = project_baseline(load_project_file(config), given_file(config, "simrun.toml", "--config"))
        if found is None and required:
            raise ConfigError("no baseline: give --baseline FILE|RUN or --baseline-ref REF:PATH, or set gate.baseline "
                              "in simrun.toml", field="--baseline")
        return found
    if baseline_ref is not None:
        return baseline_from_git(baseline_ref)
    assert baseline is not None     # one of the two, by the test above
    return open_baseline(baseline, database)


def gate(candidate: str = "latest", baseline: str | Path | RunSummary | None = None, *, baseline_ref: str | None = None,
         db: str | Path | None = None, budgets: str | Path | None = None, config: str | Path | None = None,
         sequential: bool = False, verdict_json: str | Path | None = None) -> GateOutcome:
    """Judge `candidate` (a run id, or "latest") against `baseline` (a blessed file, a run id, or a
    summary already read, as `simrun gate --history` reads one; default: gate.baseline of
    simrun.toml) or `baseline_ref` (REF:PATH read from git). `budgets`:
    gate thresholds and release criteria (default ./budgets.toml; the candidate's release criteria
    are those it ran with unless `budgets` is given). `sequential`: judge its repetitions as
    rounds, with the settings it ran with (a `simrun --sequential` run) or budgets.toml's.
    `verdict_json`: also write the verdict there, as JSON (what `simrun gate --verdict-json` writes)."""
    writable(verdict_json)
    database = project_db(str(db) if db is not None else None, config)
    budgets_file = given_file(budgets, "budgets.toml", "--budgets")
    money = load_budgets(budgets_file) if budgets_file else Budgets()
    if isinstance(baseline, RunSummary):
        if baseline_ref is not None:
            raise ConfigError("give one of a baseline and --baseline-ref REF:PATH, not both", field="--baseline")
        base: RunSummary | None = baseline
    else:
        base = chosen_baseline(str(baseline) if baseline is not None else None, baseline_ref, database, config=config)
    assert base is not None     # required: chosen_baseline raised otherwise
    with Store(database, create=False) as store:
        try:
            cand = summary_from_store(store, candidate)
        except StoreError as exc:
            raise GateError(f"no candidate run {candidate!r}: {exc}") from None
        rounds = None
        if sequential:
            # The settings it ran in rounds with (a StoreError when out of bounds), else budgets.toml's.
            settings = stored_sequential(store.run(cand.run_id), str(store.path)) or money.gate.sequential
            rounds = sequential_gate(base, cand, money.gate, settings, finished=True)
            result = rounds.gate
        else:
            result = gate_verdict(base, cand, money.gate)
        verdict = verdict_of_run(store, cand.run_id, money.release if budgets else None, baseline=base,
                                 gate=result, sequential=rounds, fallback=money.release)
    write_verdict_json(verdict, verdict_json)
    return GateOutcome(verdict, result, rounds)
