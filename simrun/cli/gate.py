"""The commands around comparing runs: `baseline bless`, `gate`, `rescore`, `export`, `import`.

A thin shell over `simrun.scoring.gate.summary`, `simrun.scoring.gate.compare`, `simrun.scoring.store.rescore` and `simrun.scoring.store.bundle`,
registered on the main app by `register(app)`. Exit status as for every simrun command: 2 on a
user error, printed as one line. `simrun gate` exits 1 when the candidate fails the gate.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from simrun.cli.common import fail, out, print_gate, print_rounds, print_verdict, say
from simrun.scoring.dataset.files import Dataset, load_dataset
from simrun.scoring.errors import ConfigError, GateError, SimrunError, StoreError
from simrun.scoring.gate import verdict_text as V
from simrun.scoring.gate.baseline import baseline_from_git, open_baseline, write_baseline
from simrun.scoring.gate.compare import gate_verdict
from simrun.scoring.gate.run_verdict import verdict_of_run
from simrun.scoring.gate.sequential import SequentialSettings, sequential_gate
from simrun.scoring.gate.summary import RunSummary, summary_from_store
from simrun.scoring.store.bundle import export_bundle, import_bundle, load_bundle, write_bundle
from simrun.scoring.store.database import Store
from simrun.scoring.store.rescore import rescore_run
from simrun.scoring.store.run_ids import new_run_id
from simrun.simulator import __version__
from simrun.simulator.config import Budgets, Project, load_budgets, load_project
from simrun.simulator.project import given_file, load_project_file, project_baseline, project_db

DB = typer.Option(None, "--db", help="DuckDB file (default: run.db of simrun.toml, else simrun.duckdb).")
CONFIG = typer.Option(None, "--config", help="Project file, for the personas and goals folders (default: ./simrun.toml).")
PERSONAS = typer.Option(None, "--personas", help="Folder of persona YAML files.")
GOALS = typer.Option(None, "--goals", help="Folder of goal YAML files.")


def current_dataset(config: Optional[str], personas: Optional[str], goals: Optional[str]) -> Dataset:
    """The project's personas and goals, resolved as `simrun` resolves them (paths relative to simrun.toml)."""
    config_file = given_file(config, "simrun.toml", "--config")
    project = load_project(config_file) if config_file else Project()
    base = config_file.parent if config_file else Path(".")
    return load_dataset(Path(personas) if personas else base / project.run.personas,
                        Path(goals) if goals else base / project.run.goals)


def _write(path: str, text: str, what: str) -> None:
    target = Path(path)
    if not target.parent.is_dir():
        raise SimrunError(f"{path}: the folder {target.parent} does not exist; create it, or write the {what} elsewhere")
    target.write_text(text, encoding="utf-8")


# --- baseline bless --------------------------------------------------------------------------

baseline_app = typer.Typer(add_completion=False, rich_markup_mode=None, no_args_is_help=True,
                           help="Blessed baselines: small per-cell summaries of a run, to commit and gate on.")


@baseline_app.command("bless")
def bless(run: str = typer.Argument(..., help="Run id, or 'latest'."),
          out_file: str = typer.Option(..., "--out", help="The JSON file to write (commit it)."),
          db: Optional[str] = DB) -> None:
    """Write a run's per-cell counts, dataset hash and scorer version to a baseline file."""
    try:
        with Store(project_db(db), create=False) as store:
            summary = summary_from_store(store, run)
        path = write_baseline(summary, out_file, simrun_version=__version__)
    except SimrunError as exc:
        fail(exc)
    out.print(f"blessed run {summary.run_id} ({len(summary.cells)} cells, dataset {summary.dataset_hash}, "
              f"scorer {summary.scorer_version}) -> {path}", highlight=False, soft_wrap=True)


# --- gate ------------------------------------------------------------------------------------

BASELINE_REF = typer.Option(None, "--baseline-ref", help="Read the baseline file from git, as REF:PATH "
                            "(e.g. origin/main:baselines/main.json): the protected branch, never the pull request.")
SHARED_CELLS_ONLY = typer.Option(False, "--shared-cells-only", hidden=True, help="Kept so that scripts that "
                                 "pass it still run: the gate always compares the cells both runs share by "
                                 "content, and lists the others.")


def chosen_baseline(baseline: Optional[str], baseline_ref: Optional[str], database: str,
                    required: bool = True) -> RunSummary | None:
    """--baseline FILE|RUN or --baseline-ref REF (at most one of them), else gate.baseline of
    simrun.toml; with neither, an error if `required`, else None."""
    if baseline is not None and baseline_ref is not None:
        raise ConfigError("give one of --baseline FILE|RUN and --baseline-ref REF:PATH, not both", field="--baseline")
    if baseline is None and baseline_ref is None:
        found = project_baseline(load_project_file(), given_file(None, "simrun.toml", "--config"))
        if found is None and required:
            raise ConfigError("no baseline: give --baseline FILE|RUN or --baseline-ref REF:PATH, or set gate.baseline "
                              "in simrun.toml", field="--baseline")
        return found
    return baseline_from_git(baseline_ref) if baseline_ref else open_baseline(baseline, database)


def gate(baseline: Optional[str] = typer.Option(None, "--baseline", help="A blessed baseline file, or a run id "
                                                "(default: gate.baseline of simrun.toml)."),
         candidate: str = typer.Option(..., "--candidate", help="The run to judge (a run id, or 'latest')."),
         baseline_ref: Optional[str] = BASELINE_REF,
         shared_cells_only: bool = SHARED_CELLS_ONLY,
         db: Optional[str] = DB,
         budgets: Optional[str] = typer.Option(None, "--budgets", help="Gate thresholds (default: ./budgets.toml)."),
         markdown: Optional[str] = typer.Option(None, "--markdown", help="Write the Markdown summary here."),
         junit: Optional[str] = typer.Option(None, "--junit", help="Write JUnit XML here."),
         sequential: bool = typer.Option(False, "--sequential", help="Judge the candidate's repetitions as rounds "
                                         "with the sequential gate (budgets.toml [gate.sequential], or the settings "
                                         "a run made with `simrun --sequential` ran with): exit 3 when undecided.")
         ) -> None:
    """Compare a candidate run with a baseline, and give the candidate's verdict: exit 1 on a significant
    regression (over all cells, or in one goal or persona), any guarantee violation, or a failed release
    criterion (budgets.toml [release]), each named in one line; with --sequential, exit 3 when the rounds
    run so far decide nothing (inconclusive, never a pass)."""
    database = project_db(db)
    try:
        budgets_file = given_file(budgets, "budgets.toml", "--budgets")
        money = load_budgets(budgets_file) if budgets_file else Budgets()
        base = chosen_baseline(baseline, baseline_ref, database)
        with Store(database, create=False) as store:
            try:
                cand = summary_from_store(store, candidate)
            except StoreError as exc:
                raise GateError(f"no candidate run {candidate!r}: {exc}") from None
            rounds = None
            if sequential:
                recorded = (store.run(cand.run_id).get("config") or {}).get("sequential")
                settings = SequentialSettings(**(recorded if isinstance(recorded, dict)
                                                 else money.gate.sequential.model_dump()))
                rounds = sequential_gate(base, cand, money.gate, settings, finished=True)
                result = rounds.gate
            else:
                result = gate_verdict(base, cand, money.gate)
            # The candidate's whole verdict: its guarantees, its release criteria (those it ran with,
            # unless --budgets says otherwise) and this gate.
            verdict = verdict_of_run(store, cand.run_id, money.release if budgets else None, baseline=base,
                                     gate=result, sequential=rounds, fallback=money.release)
        text = V.markdown(verdict)
        if markdown:
            _write(markdown, text, "Markdown summary")
        if junit:
            _write(junit, V.junit_xml(verdict), "JUnit XML")
        step_summary(text)
    except SimrunError as exc:
        fail(exc)
    except OSError as exc:
        fail(SimrunError(f"cannot write the gate's summary: {exc}"))
    print_gate(result)
    if rounds is not None:
        print_rounds(rounds)
    print_verdict(verdict)
    raise typer.Exit(verdict.exit_code)


def step_summary(text: str) -> None:
    """Append to $GITHUB_STEP_SUMMARY, when GitHub Actions gives one."""
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")


# --- rescore, export, import -----------------------------------------------------------------

def rescore(run: str = typer.Argument(..., help="Run id, or 'latest'."), db: Optional[str] = DB,
            config: Optional[str] = CONFIG, personas: Optional[str] = PERSONAS,
            goals: Optional[str] = GOALS) -> None:
    """Score a stored run's transcripts again with the current scorer (no runtime, no model, no cost)."""
    try:
        dataset = current_dataset(config, personas, goals)
        with Store(project_db(db), create=False) as store:
            result = rescore_run(store, run, dataset)
            verdict = _verdict_now(store, result.run_id, project_db(db))
    except SimrunError as exc:
        fail(exc)
    out.print(f"rescored run {result.run_id}: {result.conversations} conversations with scorer "
              f"{result.scorer_version} (was {result.previous_version}); {result.changed} changed",
              highlight=False, soft_wrap=True)
    say(f"verdict of run {result.run_id}: {verdict.headline()}")


def _verdict_now(store: Store, run_id: str, database: str):
    """A run's verdict as `simrun report` would give it now (gate.baseline of simrun.toml, and the
    criteria it ran with, else ./budgets.toml's): what a rescored or imported run now says."""
    budgets_file = given_file(None, "budgets.toml", "--budgets")
    money = load_budgets(budgets_file) if budgets_file else Budgets()
    return verdict_of_run(store, run_id, baseline=chosen_baseline(None, None, database, required=False),
                          gate_settings=money.gate, fallback=money.release)


def export(run: str = typer.Argument(..., help="Run id, or 'latest'."),
           out_file: str = typer.Option(..., "--out", help="The bundle file to write."),
           db: Optional[str] = DB) -> None:
    """Export a run's conversations as a Plumbline-style bundle (turns, responses, whole records)."""
    try:
        with Store(project_db(db), create=False) as store:
            bundle = export_bundle(store, run, producer=f"simrun {__version__}")
        path = write_bundle(bundle, out_file)
    except SimrunError as exc:
        fail(exc)
    out.print(f"exported run {bundle['run']['run_id']}: {len(bundle['items'])} items -> {path}", highlight=False)


def import_(bundle: str = typer.Argument(..., help="A bundle file (from `simrun export` or Plumbline-style)."),
            db: Optional[str] = DB, config: Optional[str] = CONFIG, personas: Optional[str] = PERSONAS,
            goals: Optional[str] = GOALS) -> None:
    """Score the recorded conversations of a bundle into a new run, offline."""
    try:
        loaded = load_bundle(bundle)
        dataset = current_dataset(config, personas, goals)
        with Store(project_db(db)) as store:
            result = import_bundle(store, loaded, dataset, run_id=new_run_id(), source=bundle,
                                   simrun_version=__version__)
            verdict = _verdict_now(store, result.run_id, project_db(db))
    except SimrunError as exc:
        fail(exc)
    for warning in result.warnings:
        out.print(f"warning: {warning}", style="yellow", highlight=False, soft_wrap=True)
    out.print(f"imported {result.conversations} conversations from {bundle} into run {result.run_id} "
              f"(database {project_db(db)})", highlight=False, soft_wrap=True)
    say(f"verdict of run {result.run_id}: {verdict.headline()}")


def register(app: typer.Typer) -> None:
    app.add_typer(baseline_app, name="baseline")
    app.command("gate")(gate)
    app.command("rescore")(rescore)
    app.command("export")(export)
    app.command("import")(import_)
