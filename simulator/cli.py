"""The `simrun` command: a thin shell over `simulator.project` and `scoring`.

Exit status: 0 when the run kept every guarantee, 1 when a guarantee was broken (a failed run),
2 on a user error (bad input, unknown run), which is printed as one line with no traceback.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from scoring import rates as R
from scoring.report import build_report
from scoring.store import Store
from simulator import __version__
from simulator.config import Budgets, load_budgets
from simulator.errors import ConfigError, SimrunError
from simulator.money import usd
from simulator.plan import estimate
from simulator.progress import RunProgress
from simulator.project import execute, load_plan, parse_shard, project_db, runtime_for
from simulator.users.model import ReplayCache

app = typer.Typer(add_completion=False, no_args_is_help=False, rich_markup_mode=None,
                  pretty_exceptions_show_locals=False,
                  help="Evaluate a conversational runtime with simulated users, and gate releases on the rates.")
out = Console()
if not out.is_terminal:
    out = Console(width=120)   # CI logs: keep class names whole


def err_line(text: str) -> None:
    # One line, never wrapped: editors and CI annotations jump to "file:line".
    typer.secho(text, err=True, fg="red", bold=True)


def _fail(exc: SimrunError) -> None:
    err_line(f"error: {exc}")
    raise typer.Exit(2)


CONFIG = typer.Option(None, "--config", help="Project file (default: ./simrun.toml if there is one).")
BUDGETS = typer.Option(None, "--budgets", help="Prices, default budget and gate thresholds (default: ./budgets.toml).")
DB = typer.Option(None, "--db", help="DuckDB file (default: run.db of simrun.toml, else simrun.duckdb).")
PERSONAS = typer.Option(None, "--personas", help="Folder of persona YAML files.")
TRANSPORT = typer.Option(None, "--transport", help="python, http or stdio (over simrun.toml's runtime.transport).")
URL = typer.Option(None, "--url", help="http: the base URL of a running runtime.")
RUNTIME_COMMAND = typer.Option(None, "--runtime-command", help="http or stdio: the command that starts the runtime.")
TIMEOUT = typer.Option(None, "--timeout", help="Seconds one runtime request may take.")
HEADER = typer.Option(None, "--header", help="http: NAME=VALUE request header; ${VAR} is read from the environment.")
GOALS = typer.Option(None, "--goals", help="Folder of goal YAML files.")


def run_command(
    ctx: typer.Context,
    budget: Optional[str] = typer.Option(None, "--budget", help="Most the run may spend, e.g. 5usd, $5, '5 USD'."),
    config: Optional[str] = CONFIG,
    budgets: Optional[str] = BUDGETS,
    db: Optional[str] = DB,
    personas: Optional[str] = PERSONAS,
    goals: Optional[str] = GOALS,
    repetitions: Optional[int] = typer.Option(None, "--repetitions", "-n", help="Conversations per persona x goal cell."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Run seed; each cell derives its own from it."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Conversations in flight at once."),
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
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """Run the persona x goal matrix, store it, print the rates and write the report.

    Running the same configuration again finishes a run that was killed or interrupted."""
    if ctx.invoked_subcommand:
        given = [f"--{name}" for name, value in ctx.params.items() if value not in (None, False, [], ())]
        if given:
            # Flags before a command would be silently ignored by it: refuse, and say where they go.
            _fail(SimrunError(f"{', '.join(given)} before `{ctx.invoked_subcommand}` does nothing there; "
                              f"put a command's flags after it (simrun {ctx.invoked_subcommand} --help)"))
        return
    if version:
        out.print(f"simrun {__version__}")
        raise typer.Exit(0)
    if replay_only and not replay:
        _fail(ConfigError("--replay-only needs --replay RUN", field="--replay-only"))
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
                         check_user=not replay_only)
        cache = ReplayCache(recorded["answers"], only=replay_only) if recorded else None
        _run_and_report(plan, cache, shard=parse_shard(shard), resume=not fresh)
    except SimrunError as exc:
        _fail(exc)


def _run_and_report(plan, cache=None, *, shard=None, resume=True) -> None:
    """Run a plan, print its summary and report, and exit with the run's status."""
    try:
        result, code, path, estimated = asyncio.run(_run(plan, runtime_for(plan), cache, shard, resume))
    except SimrunError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        err_line("interrupted: the conversations that finished are stored, and the run is marked interrupted; "
                 "run the same command again (or `simrun resume RUN`) to finish it")
        raise typer.Exit(130)
    _spend_summary(plan, result, estimated, cache)
    out.print(f"database: {plan.db}   run: {result.run_id}", highlight=False)
    out.print(f"report: {path}", highlight=False)
    raise typer.Exit(code)


@app.command()
def resume(run: str = typer.Argument("latest", help="The run to finish (default: the newest)."),
           config: Optional[str] = CONFIG, budgets: Optional[str] = BUDGETS, db: Optional[str] = DB,
           budget: Optional[str] = typer.Option(None, "--budget", help="A new budget for the whole run "
                                                "(what it spent already counts against it).")) -> None:
    """Finish a run that was killed, interrupted or stopped by its budget: every conversation it
    stored is kept once, the rest are run, and its spend carries over."""
    try:
        with Store(project_db(db, config), create=False) as store:
            earlier = store.run(run)
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
    except SimrunError as exc:
        _fail(exc)
    _run_and_report(plan, shard=shard)


def _replayed(run: str, db: Optional[str], config: Optional[str]) -> dict:
    with Store(project_db(db, config), create=False) as store:
        recorded = store.run(run)
        recorded["answers"] = store.replay_answers(recorded["run_id"])
    if not recorded["answers"]:
        raise ConfigError(f"run {recorded['run_id']} recorded no model answers to replay "
                          f"(its user was {recorded['user_backend']})", field="--replay")
    return recorded


async def _run(plan, runtime, replay=None, shard=None, resume=True):
    try:
        await runtime.health()
    except BaseException:
        await runtime.aclose()
        raise
    reps = f"{plan.repetitions} repetition" + ("" if plan.repetitions == 1 else "s")
    out.print(f"simrun {__version__}: {len(plan.dataset.personas)} personas x {len(plan.dataset.goals)} goals x "
              f"{reps} = {plan.conversations} conversations; user {plan.user}; "
              f"runtime {runtime.description}; budget {usd(plan.budget)}", highlight=False, soft_wrap=True)
    estimated = None
    if plan.user != "scripted" and replay is None:
        # What `simrun plan` would have said, to compare with the spend afterwards.
        (estimated,) = await estimate(plan.dataset, runtime_for(plan), plan.budgets, plan.budget,
                                      repetitions=plan.repetitions, seed=plan.seed, backends=[plan.user])
    with Store(plan.db) as store, RunProgress(out, plan.conversations, plan.budget) as progress:
        result = await execute(plan, store, runtime=runtime, replay=replay, shard=shard, resume=resume,
                               on_conversation=progress)
        if result.resumed is not None:
            out.print(f"resumed run {result.run_id}: {result.resumed} conversations were stored already; "
                      f"{result.conversations - result.resumed} more now", highlight=False)
        code = _summary(store, result.run_id)
        path = build_report(store, result.run_id, plan.reports)
    return result, code, path, estimated


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
        out.print(f"plan estimated {usd(estimated.cost_usd)} for this matrix; actual {usd(result.spent_usd)} "
                  f"({off:+.0%})", highlight=False)
    if cache is not None:
        out.print(f"replay: {cache.hits} answers from the recorded run, {cache.misses} not in it"
                  + (" (went live)" if cache.misses and not cache.only else ""), highlight=False)


def runtime_flags(transport, url, command, timeout, headers) -> dict:
    """Runtime settings given as flags, over simrun.toml's [runtime]."""
    flags: dict = {}
    if transport:
        flags["transport"] = transport
    if url:
        flags |= {"url": url, "command": None, "transport": transport or "http"}
    if command:
        flags |= {"command": command, "url": None}
    if timeout is not None:
        flags["timeout_s"] = timeout
    for item in headers or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{item!r}: write a header as NAME=VALUE (VALUE may use ${{VAR}})", field="--header")
        flags.setdefault("headers", {})[name.strip()] = value
    return flags


app.callback(invoke_without_command=True)(run_command)
app.command("run", help="Same as plain `simrun`.")(run_command)


def _summary(store: Store, run_id: str) -> int:
    rates = R.class_rates(store, run_id)
    outcome = R.outcome(store, run_id)
    table = Table(title=f"run {run_id}", title_justify="left")
    for col in ("class", "kind", "rate", "95% interval", "conversations", "UNVERIFIABLE"):
        table.add_column(col, justify="left" if col in ("class", "kind") else "right")
    pct = lambda v: "–" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    for r in [*rates, outcome.runtime_error_rate]:
        low, high = r.interval
        style = "bold red" if r.occurrences and r.kind == "guarantee" else ("yellow" if r.occurrences else None)
        table.add_row(r.cls, r.kind, pct(r.rate), f"{pct(low)} – {pct(high)}", f"{r.occurrences}/{r.scored}",
                      str(r.unverifiable), style=style)
    out.print(table)
    low, high = outcome.goal_interval
    ends = ", ".join(f"{k} {v}" for k, v in outcome.ends.items())
    out.print(f"goal reached: {pct(outcome.goal_rate)} ({outcome.goal_reached}/{outcome.goal_scored}, "
              f"95% {pct(low)} – {pct(high)}); ends: {ends}", highlight=False, soft_wrap=True)
    if outcome.runtime_errors:
        out.print(f"the runtime failed in {outcome.runtime_errors} conversation(s): see runtime_error in the report",
                  style="yellow", highlight=False)
    broken = [r for r in rates if r.kind == "guarantee" and r.occurrences]
    if broken:
        out.print("FAILED: guarantees broken: " + ", ".join(
            f"{r.cls} in {r.occurrences} conversation(s), {r.turn_occurrences} finding(s)" for r in broken),
            style="bold red", highlight=False, soft_wrap=True)
        return 1
    out.print("every guarantee held", style="green")
    return 0


@app.command()
def validate(config: Optional[str] = CONFIG, budgets: Optional[str] = BUDGETS,
             personas: Optional[str] = PERSONAS, goals: Optional[str] = GOALS,
             transport: Optional[str] = TRANSPORT, url: Optional[str] = URL,
             runtime_command: Optional[str] = RUNTIME_COMMAND, timeout: Optional[float] = TIMEOUT,
             header: Optional[list[str]] = HEADER) -> None:
    """Check personas, goals, simrun.toml and budgets.toml, and that the runtime answers."""
    try:
        plan = load_plan(config=config, budgets=budgets, personas=personas, goals=goals,
                         runtime_flags=runtime_flags(transport, url, runtime_command, timeout, header))
        health = asyncio.run(_health(runtime_for(plan)))
    except SimrunError as exc:
        _fail(exc)
    files = ", ".join(f"{p} ok" for p in plan.files) or "no simrun.toml or budgets.toml (defaults)"
    out.print(f"ok: {len(plan.dataset.personas)} personas, {len(plan.dataset.goals)} goals "
              f"(dataset {plan.dataset.hash}); {files}; runtime {health.get('runtime')} "
              f"{health.get('version')} speaks protocol {health['protocol']}", highlight=False, soft_wrap=True)


async def _health(runtime) -> dict:
    try:
        return await runtime.health()
    finally:
        await runtime.aclose()


@app.command()
def runs(db: Optional[str] = DB) -> None:
    """List the runs in the database, newest first."""
    try:
        with Store(project_db(db), create=False) as store:
            rows = store.runs()
    except SimrunError as exc:
        _fail(exc)
    table = Table()
    for col in ("run", "started", "status", "user", "dataset", "conversations", "goal reached", "spent"):
        table.add_column(col, no_wrap=col == "run")
    for r in rows:
        rate = "–" if r["goal_rate"] is None else f"{100 * r['goal_rate']:.1f}%"
        table.add_row(r["run_id"], str(r["started_at"])[:19], r["status"], r["user_backend"], r["dataset_hash"],
                      str(r["conversations"]), rate, usd(r["spent_usd"]))
    out.print(table)


@app.command()
def report(run: str = typer.Argument("latest", help="Run id, or 'latest'."), db: Optional[str] = DB,
           reports: str = typer.Option("reports", "--reports", help="Output folder."),
           baseline: Optional[str] = typer.Option(None, "--baseline", help="A blessed baseline file or a run id: "
                                                  "the report shows each class's delta and the gate's verdict."),
           budgets: Optional[str] = BUDGETS) -> None:
    """Write (again) the HTML report of a stored run, against a baseline if given."""
    from scoring.baseline import open_baseline
    from simulator.project import _file

    try:
        database = project_db(db)
        base = open_baseline(baseline, database) if baseline else None
        budgets_file = _file(budgets, "budgets.toml", "--budgets")
        settings = (load_budgets(budgets_file) if budgets_file else Budgets()).gate
        with Store(database, create=False) as store:
            path = build_report(store, run, reports, baseline=base, gate_settings=settings)
    except SimrunError as exc:
        _fail(exc)
    out.print(f"report: {path}", highlight=False)


@app.command()
def show(run: str = typer.Argument(..., help="Run id, or 'latest'."),
         conversation: Optional[str] = typer.Argument(None, help="persona/goal/repetition; omit to list them."),
         db: Optional[str] = DB, as_json: bool = typer.Option(False, "--json", help="Print the raw transcript.")) -> None:
    """Print one stored conversation turn by turn (or list a run's conversations)."""
    try:
        with Store(project_db(db), create=False) as store:
            run_id = store.run(run)["run_id"]
            if conversation is None:
                for cid, end, reached in store.conversation_list(run_id):
                    goal = "goal reached" if reached else "goal UNVERIFIABLE" if reached is None else "goal not reached"
                    out.print(f"{cid}  {end}  {goal}", highlight=False, soft_wrap=True)
                return
            t = store.transcript(run_id, conversation)
            findings = store.findings(run_id, conversation)
            detail = store.conversation_row(run_id, conversation)
    except SimrunError as exc:
        _fail(exc)
    if as_json:
        from dataclasses import asdict

        sys.stdout.write(json.dumps(asdict(t), indent=2, default=str) + "\n")
        return
    out.print(f"{conversation}: end {detail['end_reason']}, {len(t.turns)} turns, seed {t.seed}; "
              f"goal: {detail['goal_detail']}", highlight=False, soft_wrap=True)
    for turn in t.turns:
        said = f"clicks {turn.user.offer}" if turn.user.kind == "click" else turn.user.text
        out.print(f"#{turn.index} user:    {said}", highlight=False, markup=False)
        if turn.result:
            out.print(f"   runtime: {turn.result.get('reply')}", highlight=False, markup=False)
        for f in findings:
            if f["turn"] == turn.index:
                out.print(f"   ! {f['class']}: {f['detail']}", style="red", highlight=False, markup=False)
    for f in findings:
        if f["turn"] is None:
            out.print(f"! {f['class']}: {f['detail']}", style="red", highlight=False, markup=False)
    if t.error:
        out.print(f"error: {t.error.get('message')}", style="red", highlight=False, markup=False)


@app.command("check-runtime")
def check_runtime_command(
        config: Optional[str] = CONFIG, personas: Optional[str] = PERSONAS, goals: Optional[str] = GOALS,
        goal: Optional[str] = typer.Option(None, "--goal", help="The goal whose setup and words to use."),
        transport: Optional[str] = TRANSPORT, url: Optional[str] = URL,
        runtime_command: Optional[str] = RUNTIME_COMMAND, timeout: Optional[float] = TIMEOUT,
        header: Optional[list[str]] = HEADER) -> None:
    """Hold a short conformance conversation with the runtime and report what it supplies.

    Exit 0 when it keeps protocol 1, 1 on a protocol violation, 2 when it cannot be reached."""
    from simulator.conformance import check_runtime

    try:
        plan = load_plan(config=config, personas=personas, goals=goals,
                         runtime_flags=runtime_flags(transport, url, runtime_command, timeout, header))
        chosen = plan.dataset.goal(goal) if goal else plan.dataset.goals[0]
        report = asyncio.run(check_runtime(runtime_for(plan), chosen))
    except StopIteration:
        _fail(ConfigError(f"no goal {goal!r}; goals are: {', '.join(g.id for g in plan.dataset.goals)}",
                          field="--goal"))
    except SimrunError as exc:
        _fail(exc)
    health = report.health or {}
    out.print(f"runtime {report.runtime}: {health.get('runtime')} {health.get('version')}, protocol "
              f"{health.get('protocol')}; probe goal {chosen.id}, {len(report.turns)} turns", highlight=False,
              soft_wrap=True)
    ops = Table(title="operations", title_justify="left")
    ops.add_column("operation")
    ops.add_column("")
    for op in ("health", "start", "turn", "state", "audit", "close"):
        ops.add_row(op, report.operations.get(op, "not reached"))
    out.print(ops)
    fields = Table(title="turn-result fields (turns that carried each)", title_justify="left")
    fields.add_column("field")
    fields.add_column("turns", justify="right")
    answered = sum(1 for t in report.turns if t.result is not None)
    for name, n in report.field_presence().items():
        fields.add_row(name, f"{n}/{answered}", style=None if n == answered else "yellow")
    out.print(fields)
    unverifiable = report.unverifiable()
    if unverifiable:
        out.print("UNVERIFIABLE in a run (never counted as passes):", style="yellow")
        for cls, lacking in unverifiable.items():
            out.print(f"  {cls}: needs {', '.join(lacking)}", highlight=False, markup=False)
    else:
        out.print("every class and guarantee can be checked", style="green")
    for v in report.violations:
        out.print(f"VIOLATION at {v.where}: {v.problem}\n    {v.json}", style="red", highlight=False,
                  markup=False, soft_wrap=True)
    if report.violations:
        raise typer.Exit(1)
    out.print("protocol 1 kept", style="green")


@app.command()
def merge(shards: list[str] = typer.Argument(..., help="The DuckDB files of shards 0..n-1 of one run."),
          out_file: str = typer.Option(..., "--out", help="The DuckDB file to write the joined run to."),
          reports: str = typer.Option("reports", "--reports", help="Folder for the joined run's report.")) -> None:
    """Join the shards of a run (each from `simrun --shard i/n`) into one run, and report it."""
    from scoring.merge import merge as merge_shards

    try:
        run_id = merge_shards(out_file, shards)
        with Store(out_file, create=False) as store:
            code = _summary(store, run_id)
            path = build_report(store, run_id, reports)
    except SimrunError as exc:
        _fail(exc)
    out.print(f"merged {len(shards)} shards into run {run_id} in {out_file}; report: {path}", highlight=False)
    raise typer.Exit(code)


@app.command("plan")
def plan_command(
        budget: Optional[str] = typer.Option(None, "--budget", help="The budget to compare with, e.g. 5usd."),
        config: Optional[str] = CONFIG, budgets: Optional[str] = BUDGETS, personas: Optional[str] = PERSONAS,
        goals: Optional[str] = GOALS,
        repetitions: Optional[int] = typer.Option(None, "--repetitions", "-n"),
        seed: Optional[int] = typer.Option(None, "--seed"),
        user: Optional[str] = typer.Option(None, "--user", help="Price only this backend (default: every priced one)."),
        transport: Optional[str] = TRANSPORT, url: Optional[str] = URL,
        runtime_command: Optional[str] = RUNTIME_COMMAND, timeout: Optional[float] = TIMEOUT,
        header: Optional[list[str]] = HEADER) -> None:
    """Estimate what the matrix costs per model backend, before spending anything.

    A free dry run with the scripted user gives the conversations' lengths; their prompts are
    priced with budgets.toml, the stable prefix as cached after each conversation's first call."""
    try:
        plan = load_plan(config=config, budgets=budgets, budget=budget, personas=personas, goals=goals,
                         repetitions=repetitions, seed=seed, check_user=False,
                         runtime_flags=runtime_flags(transport, url, runtime_command, timeout, header))
        if user and user != "scripted" and user not in plan.budgets.prices:
            from simulator.pricing import price_for

            price_for(plan.budgets, user)
        estimates = asyncio.run(estimate(plan.dataset, runtime_for(plan), plan.budgets, plan.budget,
                                         repetitions=plan.repetitions, seed=plan.seed,
                                         backends=[user] if user and user != "scripted" else None))
    except SimrunError as exc:
        _fail(exc)
    table = Table(title=f"{plan.conversations} conversations, budget {usd(plan.budget)}", title_justify="left")
    for col in ("backend", "calls", "input tokens", "cached", "cache writes", "output", "estimated cost",
                "per conversation", "the budget buys"):
        table.add_column(col, justify="left" if col == "backend" else "right", no_wrap=col == "backend")
    table.add_row("scripted", "0", "0", "0", "0", "0", "$0.00", "$0.00", f"{plan.conversations} (all)")
    for e in estimates:
        share = f"{e.affordable} ({e.affordable / e.conversations:.0%})" if e.conversations else "–"
        table.add_row(e.backend, str(e.calls), f"{e.usage.input_tokens:,}", f"{e.usage.cached_input_tokens:,}",
                      f"{e.usage.cache_write_tokens:,}", f"{e.usage.output_tokens:,}", f"${e.cost_usd:.4f}",
                      f"${e.per_conversation:.5f}", share)
    out.print(table)
    out.print("estimates count tokens as characters / 4; a run prints its actual spend beside this estimate",
              highlight=False)


@app.command()
def schema(out_dir: str = typer.Option("schemas", "--out", help="Folder to write the JSON Schemas to.")) -> None:
    """Write the JSON Schemas of persona and goal files, for editors."""
    from simulator.dataset import json_schemas

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in json_schemas().items():
        (folder / f"{name}.schema.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
        out.print(f"wrote {folder / f'{name}.schema.json'}", highlight=False)


from simulator import gate_cli  # noqa: E402  (registers baseline, gate, rescore, export, import)
gate_cli.register(app)


def main() -> None:
    app()
