"""The run itself: plain `simrun` (and `simrun run`), and `simrun resume`.

Exit status: the run's verdict (`simrun.scoring.gate._run_verdict`): 0 when the run kept every guarantee,
met budgets.toml's [release] criteria and, with gate.baseline set in simrun.toml, passed the gate
against that baseline; 1 when any of these failed (each reason named in one line); 2 on a user
error (bad input, unknown run), printed as one line with no traceback, or when no conversation
could be judged; 3 when a `--sequential` run is still undecided at its round cap or budget, or a
release criterion set by hand could be passed or failed by the UNVERIFIABLE conversations
(inconclusive, never a pass); 4 when a run cut short (its budget, an interruption) failed nothing
in what it ran (incomplete, never a pass).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NoReturn, Optional

import typer

from simrun import (
    ClusterLost,
    Estimate,
    Finished,
    Outcome,
    Plan,
    PreparedRun,
    RunEvents,
    RunProgress,
    RunResult,
    RunStart,
    RunVerdict,
    Sequential,
    SimrunError,
    Store,
    __version__,
    prepare,
    prepare_resume,
    run_facts,
    text,
    write_step_summary,
)
from simrun.cli._common import (
    BUDGETS,
    CONFIG,
    DB,
    EXECUTOR,
    GOALS,
    HEADER,
    PERSONAS,
    RAY_ADDRESS,
    RAY_WORKERS,
    RUNTIME_COMMAND,
    TIMEOUT,
    TRANSPORT,
    URL,
    demo_said,
    err_line,
    fail,
    out,
    print_summary,
    runtime_settings,
    said,
    say,
)

VERDICT_JSON = typer.Option(None, "--verdict-json", help="Also write the run's verdict here as JSON: its status, "
                            "exit code and typed reasons (docs/reference/cli.md, 'The verdict as JSON').")


def run_command(
    ctx: typer.Context,
    budget: Optional[str] = typer.Option(None, "--budget", help="Most the run may spend, e.g. 5usd, $5, '5 USD' "
                                         "(to 8 decimal places)."),
    config: Optional[str] = CONFIG,
    budgets: Optional[str] = BUDGETS,
    db: Optional[str] = DB,
    personas: Optional[str] = PERSONAS,
    goals: Optional[str] = GOALS,
    repetitions: Optional[int] = typer.Option(None, "--repetitions", "-n", help="Conversations per persona x goal "
                                              "cell (1 to 10,000)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Run seed (a 64-bit integer); each cell derives its "
                                       "own from it."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Conversations in flight at once "
                                              "(1 to 4,096)."),
    user: Optional[str] = typer.Option(None, "--user", help="scripted (default), openai:<model> or anthropic:<model>."),
    reports: Optional[str] = typer.Option(None, "--reports", help="Folder for the HTML report."),
    transport: Optional[str] = TRANSPORT,
    url: Optional[str] = URL,
    runtime_command: Optional[str] = RUNTIME_COMMAND,
    timeout: Optional[float] = TIMEOUT,
    header: Optional[list[str]] = HEADER,
    replay: Optional[str] = typer.Option(None, "--replay", help="Re-run a stored run's conversations from its "
                                         "recorded model answers ($0); what the runtime now answers "
                                         "differently goes live."),
    replay_only: bool = typer.Option(False, "--replay-only", help="With --replay: never call the model; a "
                                     "conversation that would need to ends as provider_error."),
    shard: Optional[str] = typer.Option(None, "--shard", help="Run only shard i/n of the matrix (0-based), e.g. "
                                        "for one job of a CI matrix; `simrun merge` joins the shards."),
    fresh: bool = typer.Option(False, "--fresh", help="Start a new run even if the same run was cut short "
                               "(by default it is resumed)."),
    label: Optional[list[str]] = typer.Option(None, "--label", help="A name the run carries (a release, a branch), "
                                              "shown in `simrun runs`, its report and the dashboard; repeat for "
                                              "several. Replaces run.labels of simrun.toml."),
    executor: Optional[str] = EXECUTOR,
    ray_address: Optional[str] = RAY_ADDRESS,
    ray_workers: Optional[int] = RAY_WORKERS,
    sequential: bool = typer.Option(False, "--sequential", help="Run in rounds against gate.baseline and stop as "
                                    "soon as the sequential gate decides (budgets.toml [gate.sequential]); "
                                    "undecided at the round cap or the budget exits 3, inconclusive."),
    verdict_json: Optional[str] = VERDICT_JSON,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """Run the persona x goal matrix, store it, print the rates and write the report.

    Running the same configuration again finishes a run that was killed or interrupted."""
    if ctx.invoked_subcommand:
        given = [f"--{name}" for name, value in ctx.params.items() if value not in (None, False, [], ())]
        if given:
            # Flags before a command would be silently ignored by it: refuse, and say where they go.
            fail(SimrunError(f"{', '.join(given)} before `{ctx.invoked_subcommand}` does nothing there; "
                              f"put a command's flags after it (simrun {ctx.invoked_subcommand} --help)"))
        return
    if version:
        out.print(f"simrun {__version__}")
        raise typer.Exit(0)
    settings = runtime_settings(transport, url, runtime_command, timeout, header)
    try:
        # With no project here, the bundled demo, as the line above the run says.
        prepared = prepare(config, budget=budget, budgets=budgets, db=db, personas=personas, goals=goals,
                           repetitions=repetitions, seed=seed, concurrency=concurrency, user=user, reports=reports,
                           runtime_settings=settings, labels=label, replay=replay, replay_only=replay_only,
                           shard=shard_pair(shard), fresh=fresh, sequential=sequential, executor=executor,
                           ray_address=ray_address, ray_workers=ray_workers, demo_if_no_project=True)
    except SimrunError as exc:
        fail(exc)
    demo_said(prepared.plan.bundled_demo)
    run_and_report(prepared, verdict_json)


def shard_pair(given: str | None) -> tuple[int, int] | None:
    """`--shard i/n` as the pair the API takes (which says when shard i of n does not exist)."""
    if given is None:
        return None
    found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", given)
    if found is None:
        fail(SimrunError(f"--shard: {given!r}: write the shard as i/n with 0 <= i < n, e.g. 0/4"))
    return int(found.group(1)), int(found.group(2))


def run_and_report(prepared: PreparedRun, verdict_json: Optional[str] = None) -> NoReturn:
    """Run a prepared run through the library, print what it came to, and exit with its status."""
    try:
        outcome = prepared.run(events=ConsoleEvents(), verdict_json=verdict_json)
    except ClusterLost as exc:
        err_line(f"error: {said(exc)}; the conversations that finished are stored, and run "
                 f"{prepared.unfinished_run() or '(none recorded)'} is marked interrupted: start the cluster again "
                 "(or leave --ray-address out), then run the same command (or `simrun resume`) to finish it")
        raise typer.Exit(2) from None
    except SimrunError as exc:
        fail(exc)
    except KeyboardInterrupt:
        err_line(f"interrupted: the conversations that finished are stored, and run "
                 f"{prepared.unfinished_run() or '(none recorded)'} is marked interrupted; run the same command "
                 "again (or `simrun resume`) to finish it")
        raise typer.Exit(130) from None
    write_step_summary(outcome.verdict)
    _spend_summary(prepared.plan, outcome)
    out.print(f"database: {outcome.db}   run: {outcome.run_id}", highlight=False)
    out.print(f"report: {outcome.report}", highlight=False)
    if outcome.stopped:
        err_line(f"error: {outcome.stopped}; nothing more was sent. Fix the user model's settings (see "
                 f"docs/how-to/model-users.md, 'Local and self-hosted user models'), then "
                 f"`simrun resume {outcome.run_id}`")
    raise typer.Exit(outcome.exit_code)


def resume_command(run: str = typer.Argument("latest", help="The run to finish (default: the newest unfinished one)."),
                   config: Optional[str] = CONFIG, budgets: Optional[str] = BUDGETS, db: Optional[str] = DB,
                   budget: Optional[str] = typer.Option(None, "--budget", help="A new budget for the whole run "
                                                        "(what it spent already counts against it)."),
                   executor: Optional[str] = EXECUTOR, ray_address: Optional[str] = RAY_ADDRESS,
                   ray_workers: Optional[int] = RAY_WORKERS, verdict_json: Optional[str] = VERDICT_JSON) -> None:
    """Finish a run that was killed, interrupted or stopped by its budget: every conversation it
    stored is kept once, the rest are run, and its spend carries over."""
    try:
        prepared = prepare_resume(run, config=config, budgets=budgets, db=db, budget=budget, executor=executor,
                                  ray_address=ray_address, ray_workers=ray_workers)
    except SimrunError as exc:
        fail(exc)
    run_and_report(prepared, verdict_json)


class ConsoleEvents(RunEvents):
    """A run as the command line tells it: the plan's line, live progress, each round, the rates
    and the verdict (`print_summary`)."""

    def __init__(self) -> None:
        self.progress: RunProgress | None = None
        self.plan: Plan | None = None

    def note(self, text: str) -> None:
        say(text)

    def started(self, start: RunStart) -> None:
        plan = self.plan = start.plan
        reps = f"{plan.repetitions} repetition" + ("" if plan.repetitions == 1 else "s")
        out.print(f"simrun {__version__}: {len(plan.dataset.personas)} personas x {len(plan.dataset.goals)} goals x "
                  f"{reps} = {plan.conversations} conversations; user {plan.user}; "
                  f"runtime {start.runtime}; budget {text.usd(plan.budget)}", highlight=False, soft_wrap=True)
        if start.shard is not None:
            out.print(f"shard {start.shard[0]}/{start.shard[1]}: {start.conversations} of the {plan.conversations} "
                      "conversations", highlight=False)
        self.progress = RunProgress(out, start.conversations, plan.budget, start.ledger, workers=start.workers)
        self.progress.__enter__()

    def estimated(self, estimate: Estimate) -> None:
        out.print(f"plan: {estimate.range_text} for this matrix (p50–p90; {estimate.basis})",
                  highlight=False, soft_wrap=True)
        if estimate.cost_usd > estimate.budget_usd:
            # Said before anything is spent: such a run stops short, and its verdict is incomplete.
            say(f"warning: the plan's median estimate, ${estimate.cost_usd:.4f}, is over the budget "
                f"${estimate.budget_usd:.4f}: the budget buys about {estimate.affordable} of the "
                f"{estimate.conversations} conversations, and a run cut short is judged incomplete (exit 4), never "
                "passed; raise --budget, or lower --repetitions")

    def conversation(self, finished: Finished) -> None:
        if self.progress is not None:
            self.progress(finished)

    def round(self, rounds: Sequential) -> None:
        out.print(f"round {text.round_line(rounds.looks[-1], rounds.settings)}", highlight=False, soft_wrap=True)

    def resumed(self, result: RunResult, labels: Sequence[str]) -> None:
        out.print(f"resumed run {result.run_id}: {result.resumed} conversations were stored already; "
                  f"{result.conversations - (result.resumed or 0)} more now", highlight=False)
        if self.plan is not None and list(labels) != list(self.plan.labels):
            out.print(f"it keeps the labels it started with ({', '.join(labels) or 'none'}): a resumed run "
                      "is the same run", highlight=False, markup=False)

    def judged(self, store: Store, verdict: RunVerdict) -> None:
        print_summary(verdict, run_facts(store, verdict.run_id))

    def ended(self) -> None:
        if self.progress is not None:
            self.progress.__exit__(None, None, None)
            self.progress = None


def _spend_summary(plan: Plan, outcome: Outcome) -> None:
    if plan.user == "scripted":
        out.print(f"spent {text.usd(outcome.spent_usd)} of {text.usd(outcome.budget_usd)} (the scripted user is "
                  f"free); {text.usd(outcome.budget_usd - outcome.spent_usd)} left", highlight=False)
        return
    out.print(f"spent {text.usd(outcome.spent_usd)} (exactly ${outcome.spent_usd:.6f}, the sum of its calls) of "
              f"{text.usd(outcome.budget_usd)}; {text.usd(outcome.budget_usd - outcome.spent_usd)} left; the budget "
              f"allowed {outcome.conversations} of {outcome.planned} conversations", highlight=False, soft_wrap=True)
    if outcome.budget_stopped:
        out.print("the budget ran out: no new conversation started, and those in flight ended as budget_cut "
                  "(listed in the report; kept out of the rates)", style="yellow", highlight=False)
    estimated, cache = outcome.estimate, outcome.replay
    if estimated is not None and estimated.cost_usd:
        off = (outcome.spent_usd - estimated.cost_usd) / estimated.cost_usd
        out.print(f"plan estimated {estimated.range_text} (p50–p90) for this matrix; actual "
                  f"${outcome.spent_usd:.4f} ({off:+.0%} of the p50; basis: {estimated.source})",
                  highlight=False, soft_wrap=True)
    if cache is not None:
        out.print(f"replay: {cache.hits} answers from the recorded run, {cache.misses} not in it"
                  + (" (went live)" if cache.misses and not cache.only else ""), highlight=False)


def register(app: typer.Typer) -> None:
    app.command("resume")(resume_command)
    app.callback(invoke_without_command=True)(run_command)
    app.command("run", help="Same as plain `simrun`.")(run_command)
