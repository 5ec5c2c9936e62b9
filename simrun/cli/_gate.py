"""The commands around comparing runs: `baseline bless`, `gate`, `rescore`, `export`, `import`.

A thin shell over the library (`simrun.gate`, `simrun.bless`, `simrun.rescore`,
`simrun.export_bundle`, `simrun.import_bundle`), registered on the main app by `register(app)`:
it parses flags, calls, and prints. Exit status as for every simrun command: 2 on a user error,
printed as one line. `simrun gate` exits 1 when the candidate fails the gate.
"""

from __future__ import annotations

from typing import Optional

import typer

from simrun import SimrunError, bless, export_bundle, gate, import_bundle, rescore, write_step_summary
from simrun.cli._common import fail, out, print_gate, print_rounds, print_verdict, say

DB = typer.Option(None, "--db", help="DuckDB file (default: run.db of simrun.toml, else simrun.duckdb).")
CONFIG = typer.Option(None, "--config", help="Project file, for the personas and goals folders "
                      "(default: ./simrun.toml).")
PERSONAS = typer.Option(None, "--personas", help="Folder of persona YAML files.")
GOALS = typer.Option(None, "--goals", help="Folder of goal YAML files.")


# --- baseline bless --------------------------------------------------------------------------

baseline_app = typer.Typer(add_completion=False, rich_markup_mode=None, no_args_is_help=True,
                           help="Blessed baselines: small per-cell summaries of a run, to commit and gate on.")


@baseline_app.command("bless")
def bless_command(
        run: list[str] = typer.Argument(..., help="Run id, or 'latest'; several runs of one matrix (the "
                                                  "same personas, goals, scorer, user and repetitions) let the "
                                                  "gate measure how far a cell's rate moves from run to run."),
        out_file: str = typer.Option(..., "--out", help="The JSON file to write (commit it)."),
        db: Optional[str] = DB) -> None:
    """Write the per-cell counts, dataset hash and scorer version of one run, or of several runs
    blessed together, to a baseline file."""
    try:
        blessed = bless(run, out=out_file, db=db)
    except SimrunError as exc:
        fail(exc)
    summary, path = blessed.summary, blessed.path
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


def gate_command(
        baseline: Optional[str] = typer.Option(None, "--baseline", help="A blessed baseline file, or a run id "
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
        # it ran with, unless --budgets says otherwise) and this gate, written where asked; printed here.
        judged = gate(candidate, baseline, baseline_ref=baseline_ref, history=history, db=db, budgets=budgets,
                      sequential=sequential, verdict_json=verdict_json, markdown_file=markdown, junit_file=junit)
        write_step_summary(judged.verdict)
    except SimrunError as exc:
        fail(exc)
    found = judged.history
    if found is not None and found.run_id is None:
        say(f"not gated: the history {found.location} holds no finished run of {found.line} yet, so there is no "
            "baseline; judged on its guarantees and release criteria alone")
    elif found is not None:
        say(f"gated against run {found.run_id}, the newest of {found.line} in the history {found.location}")
    if judged.gate is not None:
        print_gate(judged.gate)
        if judged.rounds is not None:
            print_rounds(judged.rounds)
    print_verdict(judged.verdict)
    raise typer.Exit(judged.verdict.exit_code)


# --- rescore, export, import -----------------------------------------------------------------

def rescore_command(
        run: str = typer.Argument(..., help="Run id, or 'latest'."), db: Optional[str] = DB,
        config: Optional[str] = CONFIG, personas: Optional[str] = PERSONAS,
        goals: Optional[str] = GOALS) -> None:
    """Score a stored run's transcripts again with the current scorer (no runtime, no model, no cost)."""
    try:
        result = rescore(run, db=db, config=config, personas=personas, goals=goals)
    except SimrunError as exc:
        fail(exc)
    out.print(f"rescored run {result.run_id}: {result.conversations} conversations with scorer "
              f"{result.scorer_version} (was {result.previous_version}); {result.changed} changed",
              highlight=False, soft_wrap=True)
    say(f"verdict of run {result.run_id}: {result.verdict.headline()}")


def export_command(
        run: str = typer.Argument(..., help="Run id, or 'latest'."),
        out_file: str = typer.Option(..., "--out", help="The bundle file to write."),
        db: Optional[str] = DB) -> None:
    """Export a run's conversations as a Plumbline-style bundle (turns, responses, whole records)."""
    try:
        exported = export_bundle(run, out=out_file, db=db)
    except SimrunError as exc:
        fail(exc)
    out.print(f"exported run {exported.run_id}: {exported.items} items -> {exported.path}", highlight=False)


def import_command(
        bundle: str = typer.Argument(..., help="A bundle file (from `simrun export` or Plumbline-style)."),
        db: Optional[str] = DB, config: Optional[str] = CONFIG, personas: Optional[str] = PERSONAS,
        goals: Optional[str] = GOALS) -> None:
    """Score the recorded conversations of a bundle into a new run, offline."""
    try:
        result = import_bundle(bundle, db=db, config=config, personas=personas, goals=goals)
    except SimrunError as exc:
        fail(exc)
    for warning in result.warnings:
        out.print(f"warning: {warning}", style="yellow", highlight=False, soft_wrap=True)
    out.print(f"imported {result.conversations} conversations from {bundle} into run {result.run_id} "
              f"(database {result.db})", highlight=False, soft_wrap=True)
    say(f"verdict of run {result.run_id}: {result.verdict.headline()}")


def register(app: typer.Typer) -> None:
    app.add_typer(baseline_app, name="baseline")
    app.command("gate")(gate_command)
    app.command("rescore")(rescore_command)
    app.command("export")(export_command)
    app.command("import")(import_command)
