"""The run itself: plain `simrun` (and `simrun run`), and `simrun resume`.

Exit status: the run's verdict (`simrun.scoring.gate.run_verdict`): 0 when the run kept every guarantee,
met budgets.toml's [release] criteria and, with gate.baseline set in simrun.toml, passed the gate
against that baseline; 1 when any of these failed (each reason named in one line); 2 on a user
error (bad input, unknown run), printed as one line with no traceback, or when no conversation
could be judged; 3 when a `--sequential` run is still undecided at its round cap or budget
(inconclusive, never a pass).
"""

from __future__ import annotations

from typing import Optional

import duckdb
import typer

from simrun.cli.common import (
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
    err_line,
    fail,
    out,
    print_summary,
    runtime_flags,
    say,
)
from simrun.cli.gate import step_summary
from simrun.scoring.errors import ClusterLost, ConfigError, SimrunError
from simrun.scoring.gate import verdict_text as V
from simrun.scoring.pages.report import build_report
from simrun.scoring.store.database import Store
from simrun.scoring.store.model_calls import replay_answers
from simrun.simulator import __version__, eventloop
from simrun.simulator.executors import executor_for
from simrun.simulator.ledger import Ledger
from simrun.simulator.money import usd
from simrun.simulator.plan import estimate
from simrun.simulator.progress import RunProgress
from simrun.simulator.project import execute, load_plan, parse_shard, project_db, runtime_for
from simrun.simulator.rounds import run_in_rounds
from simrun.simulator.runner import in_shard, matrix
from simrun.simulator.users.model import ReplayCache


def run_command(
    ctx: typer.Context,
    budget: Optional[str] = typer.Option(None, "--budget", help="Most the run may spend, e.g. 5usd, $5, '5 USD' (to 8 decimal places)."),
    config: Optional[str] = CONFIG,
    budgets: Optional[str] = BUDGETS,
    db: Optional[str] = DB,
    personas: Optional[str] = PERSONAS,
    goals: Optional[str] = GOALS,
    repetitions: Optional[int] = typer.Option(None, "--repetitions", "-n", help="Conversations per persona x goal cell (1 to 10,000)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Run seed (a 64-bit integer); each cell derives its own from it."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Conversations in flight at once (1 to 4,096)."),
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
    if replay_only and not replay:
        fail(ConfigError("--replay-only needs --replay RUN", field="--replay-only"))
    try:
        recorded = _replayed(replay, db, config) if replay else None
        if recorded:
            # A replay repeats the recorded run: its user backend, seed and repetitions.
            user = user or recorded["user_backend"]
            seed = recorded["seed"] if seed is None else seed
            repetitions = repetitions or recorded["repetitions"]
        plan = load_plan(config=config, budgets=budgets, budget=budget, personas=personas, goals=goals,
                         repetitions=repetitions, seed=seed, concurrency=concurrency, user=user, db=db,
                         reports=reports, runtime_flags=runtime_flags(transport, url, runtime_command,
                                                                      timeout, header),
                         check_user=not replay_only, labels=label, sequential=sequential)
        if sequential and shard:
            raise ConfigError("a sequential run decides on the whole matrix after each round; it cannot be "
                              "sharded", field="--shard")
        cache = ReplayCache(recorded["answers"], only=replay_only, output=recorded["user_output"]) if recorded else None
        _run_and_report(plan, cache, shard=parse_shard(shard), resume=not fresh,
                        executor=executor_for(plan, executor, address=ray_address, workers=ray_workers))
    except SimrunError as exc:
        fail(exc)


def _run_and_report(plan, cache=None, *, shard=None, resume: bool | str = True, executor=None) -> None:
    """Run a plan, print its summary and report, and exit with the run's status."""
    try:
        result, code, path, estimated = eventloop.run(_run(plan, runtime_for(plan), cache, shard, resume, executor))
    except ClusterLost as exc:
        err_line(f"error: {exc}; the conversations that finished are stored, and run {_interrupted_run(plan)} is "
                 "marked interrupted: start the cluster again (or leave --ray-address out), then run the same "
                 "command (or `simrun resume`) to finish it")
        raise typer.Exit(2)
    except SimrunError as exc:
        fail(exc)
    except KeyboardInterrupt:
        err_line(f"interrupted: the conversations that finished are stored, and run {_interrupted_run(plan)} is "
                 "marked interrupted; run the same command again (or `simrun resume`) to finish it")
        raise typer.Exit(130)
    _spend_summary(plan, result, estimated, cache)
    out.print(f"database: {plan.db}   run: {result.run_id}", highlight=False)
    out.print(f"report: {path}", highlight=False)
    if result.stopped:
        err_line(f"error: {result.stopped}; nothing more was sent. Fix the user model's settings (see "
                 f"docs/how-to/model-users.md, 'Local and self-hosted user models'), then `simrun resume {result.run_id}`")
        raise typer.Exit(2)
    raise typer.Exit(code)


def _interrupted_run(plan) -> str:
    """The run an interruption left behind: the newest unfinished one in the run's database."""
    try:
        with Store(plan.db, create=False) as store:
            return store.latest_unfinished()["run_id"]
    except (SimrunError, duckdb.Error):   # interrupted before its run was recorded
        return "(none recorded)"


def resume(run: str = typer.Argument("latest", help="The run to finish (default: the newest unfinished one)."),
           config: Optional[str] = CONFIG, budgets: Optional[str] = BUDGETS, db: Optional[str] = DB,
           budget: Optional[str] = typer.Option(None, "--budget", help="A new budget for the whole run "
                                                "(what it spent already counts against it)."),
           executor: Optional[str] = EXECUTOR, ray_address: Optional[str] = RAY_ADDRESS,
           ray_workers: Optional[int] = RAY_WORKERS) -> None:
    """Finish a run that was killed, interrupted or stopped by its budget: every conversation it
    stored is kept once, the rest are run, and its spend carries over."""
    try:
        with Store(project_db(db, config), create=False) as store:
            earlier = store.latest_unfinished() if run == "latest" else store.run(run)
        if earlier["status"] == "finished":
            raise ConfigError(f"run {earlier['run_id']} is finished; there is nothing to resume", field="RUN")
        stored = earlier["config"]
        shard = parse_shard(earlier.get("shard"))
        plan = load_plan(config=config, budgets=budgets, db=db, budget=budget or f"{stored['budget_usd']}usd",
                         repetitions=stored["repetitions"], seed=stored["seed"], user=stored["user"],
                         runtime_flags={k: v for k, v in stored["runtime"].items()
                                        if k in ("transport", "url", "command", "timeout_s", "target", "options")})
        if plan.dataset.hash != earlier["dataset_hash"]:
            raise ConfigError(f"the personas and goals changed since run {earlier['run_id']} (dataset "
                              f"{earlier['dataset_hash']}, now {plan.dataset.hash}); it cannot be finished as "
                              "the same run", field="RUN")
        chosen = executor_for(plan, executor, address=ray_address, workers=ray_workers)
    except SimrunError as exc:
        fail(exc)
    _run_and_report(plan, shard=shard, resume=earlier["run_id"], executor=chosen)


def _replayed(run: str, db: Optional[str], config: Optional[str]) -> dict:
    with Store(project_db(db, config), create=False) as store:
        recorded = store.run(run)
        recorded["answers"] = replay_answers(store, recorded["run_id"])
    if not recorded["answers"]:
        raise ConfigError(f"run {recorded['run_id']} recorded no model answers to replay "
                          f"(its user was {recorded['user_backend']})", field="--replay")
    return recorded


async def _run(plan, runtime, replay=None, shard=None, resume=True, executor=None):
    try:
        await runtime.health()
        if executor is not None:
            # Before anything is spent: a cluster that cannot be reached is bad input, one line.
            say(f"executor: {executor.connect()}")
    except BaseException:
        await runtime.aclose()
        raise
    reps = f"{plan.repetitions} repetition" + ("" if plan.repetitions == 1 else "s")
    out.print(f"simrun {__version__}: {len(plan.dataset.personas)} personas x {len(plan.dataset.goals)} goals x "
              f"{reps} = {plan.conversations} conversations; user {plan.user}; "
              f"runtime {runtime.description}; budget {usd(plan.budget)}", highlight=False, soft_wrap=True)
    estimated = None
    total = plan.conversations
    if shard is not None:
        total = sum(1 for cell in matrix(plan.dataset, plan.repetitions, plan.seed) if in_shard(cell.id, shard))
        out.print(f"shard {shard[0]}/{shard[1]}: {total} of the {plan.conversations} conversations", highlight=False)
    ledger = Ledger(plan.budget)
    workers = (lambda: executor.alive) if executor is not None else None
    with Store(plan.db) as store, RunProgress(out, total, plan.budget, ledger, workers=workers) as progress:
        if plan.user != "scripted" and replay is None:
            # What `simrun plan` would have said, to compare with the spend afterwards.
            (estimated,) = await estimate(plan.dataset, runtime_for(plan), plan.budgets, plan.budget,
                                          repetitions=plan.repetitions, seed=plan.seed, backends=[plan.user],
                                          store=store)
            out.print(f"plan: {estimated.range_text} for this matrix (p50–p90; {estimated.basis})",
                      highlight=False, soft_wrap=True)
        rounds = None
        if plan.sequential:
            first = iter([runtime])     # the runtime checked above runs the first round; each round closes its own
            result, rounds = await run_in_rounds(
                plan, store, runtime_for=lambda p: next(first, None) or runtime_for(p), resume=resume,
                replay=replay, on_conversation=progress, on_user_ready=say, executor=executor,
                on_round=lambda s: out.print(f"round {V.round_line(s.looks[-1], s.settings)}", highlight=False,
                                             soft_wrap=True))
        else:
            result = await execute(plan, store, runtime=runtime, replay=replay, shard=shard, resume=resume,
                                   ledger=ledger, on_conversation=progress, on_user_ready=say, executor=executor)
        if result.resumed is not None:
            out.print(f"resumed run {result.run_id}: {result.resumed} conversations were stored already; "
                      f"{result.conversations - result.resumed} more now", highlight=False)
            kept = store.run(result.run_id)["labels"]
            if kept != list(plan.labels):
                out.print(f"it keeps the labels it started with ({', '.join(kept) or 'none'}): a resumed run "
                          "is the same run", highlight=False, markup=False)
        # Kept with the run: a report written again later, and the dashboard, judge it the same way.
        store.set_release_criteria(result.run_id, plan.budgets.release.model_dump())
        verdict = print_summary(store, result.run_id, plan.budgets.release, baseline=plan.baseline,
                                gate_settings=plan.budgets.gate, sequential=rounds)
        path = build_report(store, result.run_id, plan.reports, gate_settings=plan.budgets.gate,
                            release=plan.budgets.release, baseline=plan.baseline, verdict=verdict)
    step_summary(V.markdown(verdict))
    return result, verdict.exit_code, path, estimated


def _spend_summary(plan, result, estimated, cache) -> None:
    if plan.user == "scripted":
        out.print(f"spent {usd(result.spent_usd)} of {usd(result.budget_usd)} (the scripted user is free); "
                  f"{usd(result.budget_usd - result.spent_usd)} left", highlight=False)
        return
    out.print(f"spent {usd(result.spent_usd)} (exactly ${result.spent_usd:.6f}, the sum of its calls) of "
              f"{usd(result.budget_usd)}; {usd(result.budget_usd - result.spent_usd)} left; the budget allowed "
              f"{result.conversations} of {result.planned} conversations", highlight=False, soft_wrap=True)
    if result.budget_stopped:
        out.print("the budget ran out: no new conversation started, and those in flight ended as budget_cut "
                  "(listed in the report; kept out of the rates)", style="yellow", highlight=False)
    if estimated is not None and estimated.cost_usd:
        off = (result.spent_usd - estimated.cost_usd) / estimated.cost_usd
        out.print(f"plan estimated {estimated.range_text} (p50–p90) for this matrix; actual ${result.spent_usd:.4f} "
                  f"({off:+.0%} of the p50; basis: {estimated.source})", highlight=False, soft_wrap=True)
    if cache is not None:
        out.print(f"replay: {cache.hits} answers from the recorded run, {cache.misses} not in it"
                  + (" (went live)" if cache.misses and not cache.only else ""), highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(resume)
    app.callback(invoke_without_command=True)(run_command)
    app.command("run", help="Same as plain `simrun`.")(run_command)
