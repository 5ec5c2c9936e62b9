"""The merge gate as a library call: a candidate run judged against a baseline, as `simrun gate`.

`simrun.gate()` gives the candidate's whole verdict: its guarantees, its release criteria (those
it ran with, unless `budgets` says otherwise) and the gate against the baseline, fixed or, with
`sequential=True`, in rounds; against a history's newest run of its line with `history`. It
writes the verdict's Markdown, JUnit XML and JSON where the caller asks; the command line prints
the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simrun._api._baselines import chosen_baseline
from simrun._api._history import HistoryBaseline, baseline_from_history
from simrun._errors import ConfigError, GateError, Parameter, StoreError
from simrun._settings import stored_sequential
from simrun._writing import check_folder, write_file
from simrun.scoring.gate import (
    GateResult,
    RunSummary,
    RunVerdict,
    Sequential,
    gate_verdict,
    junit_xml,
    markdown,
    sequential_gate,
    summary_from_store,
    verdict_of_run,
    write_verdict_json,
)
from simrun.scoring.store import Store
from simrun.simulator import project_budgets, project_db


@dataclass(frozen=True)
class GateOutcome:
    """The candidate's verdict with the gate in it, and the gate's own result (per class, slice,
    cell and flipped conversation). `exit_code`: 0 passed, 1 failed, 3 undecided in rounds.

    `gate` is None when a history held no run to gate against (`history` says so): the
    candidate was judged on its guarantees and release criteria alone."""

    verdict: RunVerdict
    gate: GateResult | None
    rounds: Sequential | None = None    # the sequential gate's looks, with sequential=True
    history: HistoryBaseline | None = None   # the baseline taken from a history, or why there was none

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    @property
    def passed(self) -> bool:
        return self.verdict.passed


def gate(candidate: str = "latest", baseline: str | Path | RunSummary | None = None, *, baseline_ref: str | None = None,
         history: str | Path | None = None, db: str | Path | None = None, budgets: str | Path | None = None,
         config: str | Path | None = None, sequential: bool = False, verdict_json: str | Path | None = None,
         markdown_file: str | Path | None = None, junit_file: str | Path | None = None) -> GateOutcome:
    """Judge `candidate` (a run id, or "latest") against `baseline` (a blessed file, a run id, or
    a summary already read; default: gate.baseline of simrun.toml), `baseline_ref` (REF:PATH read
    from git), or `history` (the newest finished run of the candidate's line kept in that history:
    a folder or an object-store URL). `budgets`: gate thresholds and release criteria (default
    ./budgets.toml; the candidate's release criteria are those it ran with unless `budgets` is
    given). `sequential`: judge its repetitions as rounds, with the settings it ran with (a
    `sequential=True` run) or budgets.toml's. `verdict_json`, `markdown_file`, `junit_file`: also
    write the verdict there, as JSON, Markdown (a pull-request comment) and JUnit XML."""
    for path, parameter in ((verdict_json, "verdict_json"), (markdown_file, "markdown_file"),
                            (junit_file, "junit_file")):
        check_folder(path, parameter=parameter)
    database = project_db(db, config)
    money = project_budgets(budgets)
    found = None
    if history is not None:
        if baseline is not None or baseline_ref is not None:
            raise ConfigError(("give one of ", Parameter("history"), " and ", Parameter("baseline"), " or ",
                               Parameter("baseline_ref"), ", not both"), field="history")
        found = baseline_from_history(str(history), candidate, database)
        base = found.summary
    else:
        base = chosen_baseline(baseline, baseline_ref, database, config=config)
    result = rounds = None
    with Store(database, create=False) as store:
        if base is not None:
            try:
                cand = summary_from_store(store, candidate)
            except StoreError as exc:
                raise GateError(f"no candidate run {candidate!r}: {exc}") from None
            if sequential:
                # The settings it ran in rounds with (a StoreError when out of bounds), else budgets.toml's.
                settings = stored_sequential(store.run(cand.run_id), str(store.path)) or money.gate.sequential
                rounds = sequential_gate(base, cand, money.gate, settings, finished=True)
                result = rounds.gate
            else:
                result = gate_verdict(base, cand, money.gate)
            candidate = cand.run_id
        verdict = verdict_of_run(store, candidate, money.release if budgets else None, baseline=base,
                                 gate=result, sequential=rounds, fallback=money.release)
    write_verdict_json(verdict, verdict_json)
    if markdown_file is not None:
        write_file(markdown_file, markdown(verdict), what="the Markdown summary")
    if junit_file is not None:
        write_file(junit_file, junit_xml(verdict), what="the JUnit XML")
    return GateOutcome(verdict, result, rounds, found)
