"""The commands around comparing runs: `baseline bless`, `gate`, `rescore`, `export`, `import`.

A thin shell over the library (`simrun.gate`, `simrun.scoring.gate._summary`,
`simrun.scoring.store._rescore` and `simrun.scoring.store._bundle`), registered on the main app by
`register(app)`: it parses flags, calls, writes and prints. Exit status as for every simrun command: 2 on a
user error, printed as one line. `simrun gate` exits 1 when the candidate fails the gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from simrun._api import chosen_baseline
from simrun._api import gate as judge_gate
from simrun._errors import SimrunError
from simrun._settings import Budgets, Project, load_budgets, load_project
from simrun._writing import write_file
from simrun.cli._common import fail, out, print_gate, print_rounds, print_verdict, say
from simrun.cli._history import baseline_from_history, ungated_verdict
from simrun.cli._step_summary import write_step_summary
from simrun.scoring.dataset import Dataset, load_dataset
from simrun.scoring.gate import RunSummary, RunVerdict, merge_runs, summary_from_store, verdict_of_run, write_baseline
from simrun.scoring.gate import verdict_text as V
from simrun.scoring.store import Store, export_bundle, import_bundle, load_bundle, new_run_id, rescore_run, write_bundle
from simrun.simulator import __version__, given_file, project_db

DB = typer.Option(None, "--db", help="DuckDB file (default: run.db of simrun.toml, else simrun.duckdb).")
CONFIG = typer.Option(None, "--config", help="Project file, for the personas and goals folders "
                      "(default: ./simrun.toml).")
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
    write_file(path, text, what=f"the {what}")


# --- baseline bless --------------------------------------------------------------------------

baseline_app = typer.Typer(add_completion=False, rich_markup_mode=None, no_args_is_help=True,
                           help="Blessed baselines: small per-cell summaries of a run, to commit and gate on.")


@baseline_app.command("bless")
def bless(run: list[str] = typer.Argument(..., help="Run id, or 'latest'; several runs of one matrix (the "
                                              "same personas, goals, scorer, user and repetitions) let the gate "
                                              "measure how far a cell's rate moves from run to run."),
          out_file: str = typer.Option(..., "--out", help="The JSON file to write (commit it)."),
          db: Optional[str] = DB) -> None:
    """Write the per-cell counts, dataset hash and scorer version of one run, or of several runs
    blessed together, to a baseline file."""
    try:
        with Store(project_db(db), create=False) as store:
            summary = merge_runs([summary_from_store(store, one) for one in run])
        path = write_baseline(summary, out_file, simrun_version=__version__)
    except SimrunError as exc:
        fail(exc)
    what = f"{len(summary.runs)} runs ({', '.join(summary.runs)})" if summary.runs else f"run {summary.run_id}"
    out.print(f"blessed {what} ({len(summary.cells)} cells, dataset {summary.dataset_hash}, "
              f"scorer {summary.scorer_version}) -> {path}", highlight=False, soft_wrap=True)
    if not summary.runs:
        say("a baseline of one run, so the gate will assume runs do not differ as a whole; bless several "
            "runs made apart, five or more (`simrun baseline bless RUN RUN RUN RUN RUN --out FILE`), to measure "
            "how far they do")


# --- gate ------------------------------------------------------------------------------------

BASELINE_REF = typer.Option(None, "--baseline-ref", help="Read the baseline file from git, as REF:PATH "
                            "(e.g. origin/main:baselines/main.json): the protected branch, never the pull request.")
SHARED_CELLS_ONLY = typer.Option(False, "--shared-cells-only", hidden=True, help="Kept so that scripts that "
                                 "pass it still run: the gate always compares the cells both runs share by "
                                 "content, and lists the others.")


def gate(baseline: Optional[str] = typer.Option(None, "--baseline", help="A blessed baseline file, or a run id "
                                                "(default: gate.baseline of simrun.toml)."),
         candidate: str = typer.Option(..., "--candidate", help="The run to judge (a run id, or 'latest')."),
         baseline_ref: Optional[str] = BASELINE_REF,
         shared_cells_only: bool = SHARED_CELLS_ONLY,
         db: Optional[str] = DB,
         budgets: Optional[str] = typer.Option(None, "--budgets", help="Gate thresholds (default: ./budgets.toml)."),
         markdown: Optional[str] = typer.Option(None, "--markdown", help="Write the Markdown summary here."),
         junit: Optional[str] = typer.Option(None, "--junit", help="Write JUnit XML here."),
         verdict_json: Optional[str] = typer.Option(None, "--verdict-json", help="Write the candidate's verdict "
                                                    "here as JSON: its status, exit code, typed reasons and the "
                                                    "gate's per-class results (docs/reference/cli.md, 'The verdict "
                                                    "as JSON')."),
         sequential: bool = typer.Option(False, "--sequential", help="Judge the candidate's repetitions as rounds "
                                         "with the sequential gate (budgets.toml [gate.sequential], or the settings "
                                         "a run made with `simrun --sequential` ran with): exit 3 when undecided."),
         history: Optional[str] = typer.Option(None, "--history", help="Gate against the newest run of main (a "
                                               "pull request's base) kept in this history: a folder or an "
                                               "object-store URL. With none there yet, say so and judge the "
                                               "candidate on its guarantees and release criteria alone.")
         ) -> None:
    """Compare a candidate run with a baseline, and give the candidate's verdict: exit 1 on a significant
    regression (over all cells, or in one goal or persona), any guarantee violation, or a failed release
    criterion (budgets.toml [release]), each named in one line; with --sequential, exit 3 when the rounds
    run so far decide nothing (inconclusive, never a pass)."""
    try:
        # The candidate's whole verdict (`simrun.gate`): its guarantees, its release criteria (those
        # it ran with, unless --budgets says otherwise) and this gate. Here it is only written and printed.
        # The library writes the verdict's JSON, as it does for a run: one writer for that document.
        chosen: str | RunSummary | None = baseline
        if history is not None:
            chosen, note = baseline_from_history(history, candidate, db, baseline or baseline_ref)
            say(note)
        judged = None if history is not None and chosen is None else judge_gate(
            candidate, chosen, baseline_ref=baseline_ref, db=db, budgets=budgets, sequential=sequential,
            verdict_json=verdict_json)
        verdict = judged.verdict if judged is not None else ungated_verdict(candidate, db, budgets, verdict_json)
        text = V.markdown(verdict)
        if markdown:
            _write(markdown, text, "Markdown summary")
        if junit:
            _write(junit, V.junit_xml(verdict), "JUnit XML")
        write_step_summary(text)
    except SimrunError as exc:
        fail(exc)
    except OSError as exc:
        fail(SimrunError(f"cannot write the gate's summary: {exc}"))
    if judged is not None:
        print_gate(judged.gate)
        if judged.rounds is not None:
            print_rounds(judged.rounds)
    print_verdict(verdict)
    raise typer.Exit(verdict.exit_code)


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


def _verdict_now(store: Store, run_id: str, database: str) -> RunVerdict:
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
