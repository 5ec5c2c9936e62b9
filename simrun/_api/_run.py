"""A run as a library call: what plain `simrun` does, from a project to a verdict.

`simrun.run()` (and `run_async`) is the whole of a run, and the command line calls nothing else:
the project is loaded and checked before anything is spent (`prepare`), the runtime's health is
asked, a model-played user's spend estimated, the matrix run (in rounds against the baseline with
`sequential=True`), the release criteria kept with the run (so that a later `simrun report`
judges it the same way), the verdict made once, and the report and the JSON
verdict written from it. What a run says as it goes (the progress, a resumed run, each round) is
told to a `RunEvents`; the default says nothing, and the command line's console is one.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import duckdb

from simrun._errors import ConfigError, SimrunError
from simrun._writing import write_file
from simrun.scoring.gate import RunVerdict, Sequential, verdict_of_run
from simrun.scoring.pages import build_report
from simrun.scoring.store import Finished, Store, replay_answers
from simrun.simulator import (
    ClusterExecutor,
    Estimate,
    Ledger,
    Plan,
    RunResult,
    estimate,
    eventloop,
    execute,
    faulty_run,
    in_shard,
    load_plan,
    matrix,
    parse_shard,
    project_db,
    run_in_rounds,
    runtime_for,
)
from simrun.simulator.executors import executor_for
from simrun.simulator.users import ReplayCache

if TYPE_CHECKING:
    from simrun.simulator.adapters import RuntimeAdapter


@dataclass(frozen=True)
class RunStart:
    """What a run is about to do, once its runtime answered: told to `RunEvents.started`."""

    plan: Plan
    runtime: str                        # the runtime, as its transport describes it
    conversations: int                  # the conversations this run (or this shard) will hold
    shard: tuple[int, int] | None
    ledger: Ledger                      # the run's spend, as it goes
    workers: Callable[[], int] | None   # on a cluster: how many of its workers are alive now


class RunEvents:
    """What a run tells as it goes. Each method does nothing here: override those you want.

    They are called on the run's event loop, in this order: `note` (the executor reached),
    `started`, `estimated` (a model-played user), `note` (the user model's output form),
    `conversation` for each one finished, `round` after each round (sequential), `resumed`,
    `judged` (the store still open, for what a caller wants to read beside the verdict),
    `ended` (also when the run fails)."""

    def note(self, text: str) -> None:
        """A line worth telling (which executor, which output form the user model answers in)."""

    def started(self, start: RunStart) -> None:
        """The runtime answered and nothing has run yet."""

    def estimated(self, estimate: Estimate) -> None:
        """What `simrun plan` would have said of a model-played user's spend, before it is spent."""

    def conversation(self, finished: Finished) -> None:
        """One conversation finished and stored."""

    def round(self, rounds: Sequential) -> None:
        """A round of a sequential run was judged: `rounds.looks[-1]` is the newest look."""

    def resumed(self, result: RunResult, labels: Sequence[str]) -> None:
        """The run finished one an earlier attempt had started; `labels` are those it keeps."""

    def judged(self, store: Store, verdict: RunVerdict) -> None:
        """The run's verdict is made; `store` is open for reading."""

    def ended(self) -> None:
        """The run is over, or failed: whatever `started` set up can be taken down."""


@dataclass(frozen=True)
class Outcome:
    """What a run came to: its verdict, its exit status and where it is kept.

    `exit_code` is the command line's: the verdict's (0 passed, 1 failed, 2 not judged, 3
    inconclusive), or 2 when the user model stopped the run (`stopped` says why). In a test,
    `assert outcome.passed, outcome.verdict` fails with the verdict's lines."""

    run_id: str
    verdict: RunVerdict
    report: Path
    db: Path
    spent_usd: Decimal
    budget_usd: Decimal
    conversations: int                  # conversations this run holds
    planned: int                        # conversations its matrix (or shard) has
    budget_stopped: bool                # the budget ran out before the matrix did
    stopped: str | None                 # why the user model stopped the run, if it did
    resumed: int | None                 # conversations an earlier attempt had stored
    estimate: Estimate | None           # the plan's estimate of a model-played user's spend
    replay: ReplayCache | None = field(default=None, repr=False)
    verdict_json: Path | None = None    # where the verdict was written as JSON, if asked
    kept: str | None = None             # where the run was kept in run.history (None: not kept)

    @property
    def exit_code(self) -> int:
        return 2 if self.stopped else self.verdict.exit_code

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class PreparedRun:
    """A run checked and ready, nothing spent yet: `prepare` makes one, `execute` runs it.

    Every error in the project, its files or the options is raised by `prepare` (a
    `simrun.ConfigError` naming the file, line or field), before the runtime is reached."""

    plan: Plan
    replay: ReplayCache | None = None
    shard: tuple[int, int] | None = None
    resume: bool | str = True           # True: finish the same run if it was cut short; a run id: that run
    executor: ClusterExecutor | None = None   # None: in this process (`simrun.simulator.executors`)

    async def execute(self, *, events: RunEvents | None = None, verdict_json: str | Path | None = None) -> Outcome:
        """Run it and judge it. `verdict_json`: also write the verdict there, as JSON."""
        return await _execute(self, events or RunEvents(), verdict_json)


class RunOptions(TypedDict, total=False):
    """What a run may be told, each over simrun.toml's setting as the flag of the same name is on
    the command line (docs/reference/cli.md); None, as left out, keeps the file's."""

    budget: str | None              # most the run may spend: "5usd"
    budgets: str | Path | None      # budgets.toml
    db: str | None
    personas: str | None
    goals: str | None
    repetitions: int | None
    seed: int | None
    concurrency: int | None
    user: str | None                # scripted, openai:<model>, anthropic:<model>
    reports: str | None
    runtime: dict[str, Any] | None  # over simrun.toml's [runtime]: transport, url, command, target, options, ...
    labels: Sequence[str] | None
    replay: str | None              # a stored run whose recorded model answers are replayed ($0)
    replay_only: bool               # with replay: never call the model
    shard: str | None               # "i/n"
    fresh: bool                     # a new run even if the same run was cut short
    sequential: bool                # in rounds against gate.baseline
    executor: str | None            # in-process or ray
    ray_address: str | None
    ray_workers: int | None


class ResumeOptions(TypedDict, total=False):
    """What finishing a run may be told (`simrun resume`)."""

    config: str | Path | None
    budgets: str | Path | None
    db: str | None
    budget: str | None              # a new budget for the whole run (what it spent counts against it)
    executor: str | None
    ray_address: str | None
    ray_workers: int | None


def _known(options: Mapping[str, object], allowed: type, call: str) -> None:
    """A keyword the call does not take is refused by name, with the nearest it does take: a typo
    (`repetition=1`) is never a setting silently left out."""
    for name in options:
        if name not in allowed.__annotations__:
            near = difflib.get_close_matches(name, allowed.__annotations__, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; it takes {', '.join(allowed.__annotations__)}"
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}{hint}")


def prepare(config: str | Path | None = None, **options: Unpack[RunOptions]) -> PreparedRun:
    """A run of the project at `config` (default: ./simrun.toml if there is one, else the bundled
    demo), each option (`RunOptions`) over the file's setting as the flag of the same name is on
    the command line. Raises `ConfigError` on bad input, before anything is spent."""
    _known(options, RunOptions, "prepare")
    o = options
    replay, replay_only, user = o.get("replay"), o.get("replay_only", False), o.get("user")
    seed, repetitions, db = o.get("seed"), o.get("repetitions"), o.get("db")
    if replay_only and not replay:
        raise ConfigError("--replay-only needs --replay RUN", field="--replay-only")
    recorded = _replayed(replay, db, config) if replay else None
    if recorded:
        # A replay repeats the recorded run: its user backend, seed and repetitions.
        user = user or recorded["user_backend"]
        seed = recorded["seed"] if seed is None else seed
        repetitions = repetitions or recorded["repetitions"]
    labels = o.get("labels")
    labels = [labels] if isinstance(labels, str) else labels       # one label, not its letters
    plan = load_plan(config=config, budgets=o.get("budgets"), budget=o.get("budget"), personas=o.get("personas"),
                     goals=o.get("goals"), repetitions=repetitions, seed=seed, concurrency=o.get("concurrency"),
                     user=user, db=db, reports=o.get("reports"), runtime_flags=o.get("runtime"),
                     check_user=not replay_only, labels=list(labels) if labels else None,
                     sequential=o.get("sequential", False))
    if plan.sequential and o.get("shard"):
        raise ConfigError("a sequential run decides on the whole matrix after each round; it cannot be "
                          "sharded", field="--shard")
    cache = ReplayCache(recorded["answers"], only=replay_only, output=recorded["user_output"]) if recorded else None
    return PreparedRun(plan, cache, parse_shard(o.get("shard")), not o.get("fresh", False),
                       executor_for(plan, o.get("executor"), address=o.get("ray_address"),
                                    workers=o.get("ray_workers")))


def prepare_resume(run: str = "latest", **options: Unpack[ResumeOptions]) -> PreparedRun:
    """The run `run` (default: the newest unfinished one) made ready to finish: every conversation
    it stored is kept once, the rest are run, and its spend carries over (`ResumeOptions`)."""
    _known(options, ResumeOptions, "prepare_resume")
    config, db, budget = options.get("config"), options.get("db"), options.get("budget")
    with Store(project_db(db, config), create=False) as store:
        earlier = store.latest_unfinished() if run == "latest" else store.run(run)
    if earlier["status"] == "finished":
        raise ConfigError(f"run {earlier['run_id']} is finished; there is nothing to resume", field="RUN")
    stored = earlier["config"]
    shard = parse_shard(earlier.get("shard"))
    plan = load_plan(config=config, budgets=options.get("budgets"), db=db,
                     budget=budget or f"{stored['budget_usd']}usd",
                     repetitions=stored["repetitions"], seed=stored["seed"], user=stored["user"],
                     runtime_flags={k: v for k, v in stored["runtime"].items()
                                    if k in ("transport", "url", "command", "timeout_s", "target", "options")})
    if plan.dataset.hash != earlier["dataset_hash"]:
        raise ConfigError(f"the personas and goals changed since run {earlier['run_id']} (dataset "
                          f"{earlier['dataset_hash']}, now {plan.dataset.hash}); it cannot be finished as "
                          "the same run", field="RUN")
    return PreparedRun(plan, shard=shard, resume=earlier["run_id"],
                       executor=executor_for(plan, options.get("executor"), address=options.get("ray_address"),
                                             workers=options.get("ray_workers")))


async def run_async(config: str | Path | None = None, *, events: RunEvents | None = None,
                    verdict_json: str | Path | None = None,
                    **options: Unpack[RunOptions]) -> Outcome:
    """Run the project at `config` and judge it: `prepare(config, **options)`, then execute it."""
    prepared = prepare(config, **options)
    return await prepared.execute(events=events, verdict_json=verdict_json)


def run(config: str | Path | None = None, *, events: RunEvents | None = None,
        verdict_json: str | Path | None = None,
        **options: Unpack[RunOptions]) -> Outcome:
    """`run_async` on an event loop of its own (uvloop where it is installed): for code that is
    not async already. Bad input raises `simrun.ConfigError` before anything is spent."""
    return _on_a_loop_of_its_own("run", prepare(config, **options), events, verdict_json)


def demo(*, repetitions: int | None = None, db: str | None = None, reports: str | None = None,
         events: RunEvents | None = None, verdict_json: str | Path | None = None) -> Outcome:
    """What `simrun demo` runs: the bundled demo with a dead end, a loop and a broken guarantee
    planted in its runtime, in its own database (default simrun-demo.duckdb, so that a team's
    `latest` run stays theirs), wherever it is called from. Its outcome fails: a broken guarantee
    fails a run."""
    return _on_a_loop_of_its_own("demo", prepare_demo(repetitions=repetitions, db=db, reports=reports), events,
                                 verdict_json)


def prepare_demo(*, repetitions: int | None = None, db: str | None = None, reports: str | None = None) -> PreparedRun:
    """`simrun demo`'s run, checked and ready (`demo` runs it)."""
    return prepare(**faulty_run(db or "simrun-demo.duckdb", reports or "reports"), repetitions=repetitions)


def _on_a_loop_of_its_own(call: str, prepared: PreparedRun, events: RunEvents | None,
                          verdict_json: str | Path | None) -> Outcome:
    """`prepared` run on an event loop of its own (uvloop where it is installed), for `run`, `demo`
    and `resume`. Inside a running loop it cannot start one, and says what to do instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return eventloop.run(prepared.execute(events=events, verdict_json=verdict_json))
    raise SimrunError(f"simrun.{call}() runs its own event loop, and this code already runs in one: "
                      f"use `await simrun.run_async(...)` (or `await simrun.prepare(...).execute()`)")


def resume(run: str = "latest", *, events: RunEvents | None = None, verdict_json: str | Path | None = None,
           **options: Unpack[ResumeOptions]) -> Outcome:
    """Finish a run that was killed, interrupted or stopped by its budget (`prepare_resume`)."""
    return _on_a_loop_of_its_own("resume", prepare_resume(run, **options), events, verdict_json)


def interrupted_run(db: str | Path) -> str:
    """The run an interruption left behind: the newest unfinished one in the database at `db`."""
    try:
        with Store(db, create=False) as store:
            return str(store.latest_unfinished()["run_id"])
    except (SimrunError, duckdb.Error):   # interrupted before its run was recorded
        return "(none recorded)"


def _replayed(run: str, db: str | None, config: str | Path | None) -> dict[str, Any]:
    with Store(project_db(db, config), create=False) as store:
        recorded = store.run(run)
        recorded["answers"] = replay_answers(store, recorded["run_id"])
    if not recorded["answers"]:
        raise ConfigError(f"run {recorded['run_id']} recorded no model answers to replay "
                          f"(its user was {recorded['user_backend']})", field="--replay")
    return recorded


async def _execute(prepared: PreparedRun, events: RunEvents, verdict_json: str | Path | None) -> Outcome:
    plan, executor, shard = prepared.plan, prepared.executor, prepared.shard
    writable(verdict_json)
    runtime: RuntimeAdapter = runtime_for(plan)
    try:
        try:
            await runtime.health()
            if executor is not None:
                # Before anything is spent: a cluster that cannot be reached is bad input.
                events.note(f"executor: {executor.connect()}")
        except BaseException:
            await runtime.aclose()
            raise
        total = plan.conversations
        if shard is not None:
            total = sum(1 for cell in matrix(plan.dataset, plan.repetitions, plan.seed) if in_shard(cell.id, shard))
        ledger = Ledger(plan.budget)
        workers = (lambda: executor.alive) if executor is not None else None
        events.started(RunStart(plan, runtime.description, total, shard, ledger, workers))
        with Store(plan.db) as store:
            estimated = None
            if plan.user != "scripted" and prepared.replay is None:
                (estimated,) = await estimate(plan.dataset, runtime_for(plan), plan.budgets, plan.budget,
                                              repetitions=plan.repetitions, seed=plan.seed, backends=[plan.user],
                                              store=store)
                events.estimated(estimated)
                if estimated.cost_usd > plan.budget:
                    # Said before anything is spent: such a run stops short, and its verdict is incomplete.
                    events.note(f"warning: the plan's median estimate, ${estimated.cost_usd:.4f}, is over the budget "
                                f"${plan.budget:.4f}: the budget buys about {estimated.affordable} of the "
                                f"{estimated.conversations} conversations, and a run cut short is judged incomplete "
                                "(exit 4), never passed; raise --budget, or lower --repetitions")
            result, rounds = await _matrix(prepared, runtime, store, ledger, events)
            if result.resumed is not None:
                events.resumed(result, store.run(result.run_id)["labels"])
            # Kept with the run: a report written again later, and the dashboard, judge it the same way.
            store.set_release_criteria(result.run_id, plan.budgets.release.model_dump())
            verdict = verdict_of_run(store, result.run_id, plan.budgets.release, baseline=plan.baseline,
                                     gate_settings=plan.budgets.gate, sequential=rounds)
            events.judged(store, verdict)
            report = build_report(store, result.run_id, plan.reports, gate_settings=plan.budgets.gate,
                                  release=plan.budgets.release, baseline=plan.baseline, verdict=verdict)
    finally:
        events.ended()
    written = write_verdict_json(verdict, verdict_json)
    kept = _kept(plan, result.run_id, shard, events)
    return Outcome(run_id=result.run_id, verdict=verdict, report=Path(report), db=Path(plan.db),
                   spent_usd=result.spent_usd, budget_usd=result.budget_usd, conversations=result.conversations,
                   planned=result.planned, budget_stopped=result.budget_stopped, stopped=result.stopped,
                   resumed=result.resumed, estimate=estimated, replay=prepared.replay, verdict_json=written,
                   kept=kept)


def _kept(plan: Plan, run_id: str, shard: tuple[int, int] | None, events: RunEvents) -> str | None:
    """With run.history set, a finished run kept there as one file (`simrun history keep`): where,
    or None. A shard is kept once merged, and a run cut short, once resumed and finished; a
    history that cannot take it is said, and costs the run nothing: it was judged and stored."""
    if plan.history is None or shard is not None:
        return None
    from simrun.scoring.store import keep_run

    try:
        _, where = keep_run(plan.db, run_id, plan.history)
    except SimrunError as exc:
        events.note(f"history: run {run_id} not kept in {plan.history}: {exc}")
        return None
    events.note(f"history: run {run_id} kept -> {where}")
    return where


async def _matrix(prepared: PreparedRun, runtime: RuntimeAdapter, store: Store, ledger: Ledger,
                  events: RunEvents) -> tuple[RunResult, Sequential | None]:
    """The conversations: in rounds against the baseline (sequential), or the whole matrix at once."""
    plan = prepared.plan
    if plan.sequential:
        first = iter([runtime])     # the runtime checked above runs the first round; each round closes its own
        return await run_in_rounds(plan, store, runtime_for=lambda p: next(first, None) or runtime_for(p),
                                   resume=prepared.resume, replay=prepared.replay,
                                   on_conversation=events.conversation, on_user_ready=events.note,
                                   executor=prepared.executor, on_round=events.round)
    result = await execute(plan, store, runtime=runtime, replay=prepared.replay, shard=prepared.shard,
                           resume=prepared.resume, ledger=ledger, on_conversation=events.conversation,
                           on_user_ready=events.note, executor=prepared.executor)
    return result, None


def writable(path: str | Path | None) -> None:
    """Where the verdict's JSON goes, checked before anything is spent, as every other bad option."""
    if path is not None and not Path(path).parent.is_dir():
        raise ConfigError(f"the folder {Path(path).parent} does not exist; create it first", field="--verdict-json")


def write_verdict_json(verdict: RunVerdict, path: str | Path | None) -> Path | None:
    """The verdict as JSON at `path` (None: nowhere)."""
    if path is None:
        return None
    from simrun.scoring.gate import verdict_json

    return write_file(path, verdict_json(verdict), what="the verdict's JSON")

