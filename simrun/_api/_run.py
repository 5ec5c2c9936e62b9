"""A run as a library call: what plain `simrun` does, from a project to a verdict.

`simrun.run()` (and `run_async`) is the whole of a run, and the command line calls nothing else:
the project is loaded and checked before anything is spent (`prepare`), the runtime's health is
asked, a model-played user's spend estimated, the matrix run (in rounds against the baseline with
`sequential=True`), the release criteria kept with the run (so that a later `simrun report`
judges it the same way), the verdict made once, and the report and the JSON verdict written
from it. What a run says as it goes (the progress, a resumed run, each round) is told to a
`RunEvents`; the default says nothing, and the command line's console is one. It writes nothing
its caller did not ask for: its database, its report, and the verdict's JSON when asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from simrun._errors import ConfigError, Parameter, SimrunError
from simrun._money import Money
from simrun._writing import check_folder
from simrun.scoring.gate import RunVerdict, Sequential, verdict_of_run, write_verdict_json
from simrun.scoring.pages import build_report
from simrun.scoring.store import Finished, Store, keep_run, replay_answers
from simrun.simulator import (
    ClusterExecutor,
    Estimate,
    Ledger,
    Plan,
    RunResult,
    checked_shard,
    estimate,
    eventloop,
    execute,
    faulty_run,
    in_shard,
    load_plan,
    matrix,
    project_db,
    run_in_rounds,
    runtime_for,
    user_backend,
)
from simrun.simulator.adapters import RuntimeAdapter
from simrun.simulator.executors import executor_for
from simrun.simulator.users import ReplayCache


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
    `ended` (also when the run fails), `note` (where the run was kept, with run.history set)."""

    def note(self, text: str) -> None:
        """A line worth telling (which executor, which output form the user model answers in)."""

    def started(self, start: RunStart) -> None:
        """The runtime answered and nothing has run yet."""

    def estimated(self, estimate: Estimate) -> None:
        """What `simrun.plan` would have said of a model-played user's spend, before it is spent
        (`estimate.cost_usd` over `estimate.budget_usd`: the budget will cut the run short)."""

    def conversation(self, finished: Finished) -> None:
        """One conversation finished and stored."""

    def round(self, rounds: Sequential) -> None:
        """A round of a sequential run was judged: `rounds.looks[-1]` is the newest look."""

    def resumed(self, result: RunResult, labels: Sequence[str]) -> None:
        """The run finished one an earlier attempt had started; `labels` are those it keeps."""

    def judged(self, store: Store, verdict: RunVerdict) -> None:
        """The run's verdict is made; `store` is open for reading (`simrun.run_facts`)."""

    def ended(self) -> None:
        """The run is over, or failed: whatever `started` set up can be taken down."""


@dataclass(frozen=True)
class Outcome:
    """What a run came to: its verdict, its exit status and where it is kept.

    `exit_code` is the command line's: the verdict's (0 passed, 1 failed, 2 not judged, 3
    inconclusive, 4 incomplete), or 2 when the user model stopped the run (`stopped` says why). In
    a test, `assert outcome.passed, outcome.verdict` fails with the verdict's lines."""

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
    """A run checked and ready, nothing spent yet: `prepare` makes one, `execute` (or `run`) runs it.

    Every error in the project, its files or the arguments is raised by `prepare` (a
    `simrun.ConfigError` naming the file, line, field or parameter), before the runtime is reached."""

    plan: Plan
    replay: ReplayCache | None = None
    shard: tuple[int, int] | None = None
    resume: bool | str = True           # True: finish the same run if it was cut short; a run id: that run
    executor: ClusterExecutor | None = None   # None: in this process (`simrun.simulator.executors`)

    async def execute(self, *, events: RunEvents | None = None, verdict_json: str | Path | None = None) -> Outcome:
        """Run it and judge it, on the running event loop. `verdict_json`: also write the verdict
        there, as JSON."""
        return await _execute(self, events or RunEvents(), verdict_json)

    def run(self, *, events: RunEvents | None = None, verdict_json: str | Path | None = None) -> Outcome:
        """`execute` on an event loop of its own (uvloop where it is installed): for code that is
        not async already."""
        return _on_a_loop_of_its_own("run", self.execute(events=events, verdict_json=verdict_json))

    def unfinished_run(self) -> str | None:
        """The run an interruption left behind: the newest unfinished one in this run's database
        (None: it was interrupted before its run was recorded)."""
        try:
            with Store(self.plan.db, create=False) as store:
                return str(store.latest_unfinished()["run_id"])
        except (SimrunError, duckdb.Error):
            return None


def prepare(config: str | Path | None = None, *, budget: Money | None = None, budgets: str | Path | None = None,
            db: str | Path | None = None, personas: str | Path | None = None, goals: str | Path | None = None,
            repetitions: int | None = None, seed: int | None = None, concurrency: int | None = None,
            user: str | None = None, reports: str | Path | None = None, runtime: object | None = None,
            runtime_settings: Mapping[str, Any] | None = None, labels: str | Sequence[str] | None = None,
            replay: str | None = None, replay_only: bool = False, shard: tuple[int, int] | None = None,
            fresh: bool = False, sequential: bool = False, executor: str | None = None,
            ray_address: str | None = None, ray_workers: int | None = None,
            demo_if_no_project: bool = False) -> PreparedRun:
    """A run of the project at `config` (default: ./simrun.toml), checked and ready; nothing is
    spent. Each argument left out (None) keeps simrun.toml's setting (docs/how-to/python-api.md):

    - `budget`: the most the run may spend, in US dollars: a number (`5`, `0.5`, a `Decimal`) or
      text (`"5usd"`, `"$5"`); default budgets.toml's budget.default.
    - `budgets`: budgets.toml (default ./budgets.toml); `db`, `reports`: the database and the
      reports folder; `personas`, `goals`: their folders.
    - `repetitions`, `seed`, `concurrency`: over [run]'s; `user`: "scripted", "openai:<model>"
      or "anthropic:<model>"; `labels`: what the run is called (a release, a branch).
    - `runtime`: the runtime itself, over [runtime]'s transport and target: its import string
      ("pkg.mod:Class", "pkg.mod:function"), or the object (a class, an instance, a function),
      run in this process. `runtime_settings`: over the rest of [runtime] ({"url": ..., "options":
      {...}, "timeout_s": ..., "headers": {...}}).
    - `replay`: a stored run whose recorded model answers are replayed ($0); `replay_only`: never
      call the model. `shard`: run only shard (i, n) of the matrix. `fresh`: a new run even if
      the same run was cut short. `sequential`: in rounds against gate.baseline.
    - `executor`: "in-process" (default) or "ray", with `ray_address` and `ray_workers`.
    - `demo_if_no_project`: with no project here (no simrun.toml, no personas or goals folder),
      run the bundled demo's personas and goals rather than refuse.

    Raises `ConfigError` on bad input, naming the file, line or parameter, before anything is spent."""
    if replay_only and not replay:
        raise ConfigError((Parameter("replay_only", True), " needs ", Parameter("replay")), field="replay_only")
    recorded = _replayed(replay, db, config) if replay else None
    if recorded:
        # A replay repeats the recorded run: its user backend, seed and repetitions.
        user = user or recorded["user_backend"]
        seed = recorded["seed"] if seed is None else seed
        repetitions = repetitions or recorded["repetitions"]
    plan = load_plan(config=config, budgets=budgets, budget=budget, personas=personas, goals=goals,
                     repetitions=repetitions, seed=seed, concurrency=concurrency, user=user, db=db, reports=reports,
                     runtime=runtime, runtime_settings=runtime_settings, labels=labels, sequential=sequential,
                     demo_if_no_project=demo_if_no_project)
    if not replay_only:
        user_backend(plan)   # an unknown backend, or one without its key or price, fails here
    if plan.sequential and shard is not None:
        raise ConfigError("a sequential run decides on the whole matrix after each round; it cannot be "
                          "sharded", field="shard")
    cache = ReplayCache(recorded["answers"], only=replay_only, output=recorded["user_output"]) if recorded else None
    return PreparedRun(plan, cache, checked_shard(shard), not fresh,
                       executor_for(plan, executor, address=ray_address, workers=ray_workers))


def prepare_resume(run: str = "latest", *, config: str | Path | None = None, budgets: str | Path | None = None,
                   db: str | Path | None = None, budget: Money | None = None, executor: str | None = None,
                   ray_address: str | None = None, ray_workers: int | None = None) -> PreparedRun:
    """The run `run` (default: the newest unfinished one) made ready to finish: every conversation
    it stored is kept once, the rest are run, and its spend carries over. `budget`: a new budget
    for the whole run (what it spent counts against it); the rest as for `prepare`."""
    with Store(project_db(db, config), create=False) as store:
        earlier = store.latest_unfinished() if run == "latest" else store.run(run)
    if earlier["status"] == "finished":
        raise ConfigError(f"run {earlier['run_id']} is finished; there is nothing to resume", field="run")
    stored = earlier["config"]
    plan = load_plan(config=config, budgets=budgets, db=db,
                     budget=budget if budget is not None else f"{stored['budget_usd']}usd",
                     repetitions=stored["repetitions"], seed=stored["seed"], user=stored["user"],
                     runtime_settings={k: v for k, v in stored["runtime"].items()
                                       if k in ("transport", "url", "command", "timeout_s", "target", "options")})
    if plan.dataset.hash != earlier["dataset_hash"]:
        raise ConfigError(f"the personas and goals changed since run {earlier['run_id']} (dataset "
                          f"{earlier['dataset_hash']}, now {plan.dataset.hash}); it cannot be finished as "
                          "the same run", field="run")
    return PreparedRun(plan, shard=_stored_shard(earlier.get("shard")), resume=earlier["run_id"],
                       executor=executor_for(plan, executor, address=ray_address, workers=ray_workers))


def _stored_shard(text: str | None) -> tuple[int, int] | None:
    """A shard as the runner stores it with its run: "i/n"."""
    if not text:
        return None
    index, _, count = text.partition("/")
    return int(index), int(count)


async def run_async(config: str | Path | None = None, *, budget: Money | None = None,
                    budgets: str | Path | None = None, db: str | Path | None = None,
                    personas: str | Path | None = None, goals: str | Path | None = None,
                    repetitions: int | None = None, seed: int | None = None, concurrency: int | None = None,
                    user: str | None = None, reports: str | Path | None = None, runtime: object | None = None,
                    runtime_settings: Mapping[str, Any] | None = None, labels: str | Sequence[str] | None = None,
                    replay: str | None = None, replay_only: bool = False, shard: tuple[int, int] | None = None,
                    fresh: bool = False, sequential: bool = False, executor: str | None = None,
                    ray_address: str | None = None, ray_workers: int | None = None,
                    demo_if_no_project: bool = False, events: RunEvents | None = None,
                    verdict_json: str | Path | None = None) -> Outcome:
    """Run the project at `config` and judge it, on the running event loop: `prepare` with the
    same arguments, then execute it. `events` hears it as it goes; `verdict_json`: also write
    the verdict there, as JSON."""
    prepared = prepare(config, budget=budget, budgets=budgets, db=db, personas=personas, goals=goals,
                       repetitions=repetitions, seed=seed, concurrency=concurrency, user=user, reports=reports,
                       runtime=runtime, runtime_settings=runtime_settings, labels=labels, replay=replay,
                       replay_only=replay_only, shard=shard, fresh=fresh, sequential=sequential, executor=executor,
                       ray_address=ray_address, ray_workers=ray_workers, demo_if_no_project=demo_if_no_project)
    return await prepared.execute(events=events, verdict_json=verdict_json)


def run(config: str | Path | None = None, *, budget: Money | None = None, budgets: str | Path | None = None,
        db: str | Path | None = None, personas: str | Path | None = None, goals: str | Path | None = None,
        repetitions: int | None = None, seed: int | None = None, concurrency: int | None = None,
        user: str | None = None, reports: str | Path | None = None, runtime: object | None = None,
        runtime_settings: Mapping[str, Any] | None = None, labels: str | Sequence[str] | None = None,
        replay: str | None = None, replay_only: bool = False, shard: tuple[int, int] | None = None,
        fresh: bool = False, sequential: bool = False, executor: str | None = None,
        ray_address: str | None = None, ray_workers: int | None = None, demo_if_no_project: bool = False,
        events: RunEvents | None = None, verdict_json: str | Path | None = None) -> Outcome:
    """`run_async` on an event loop of its own (uvloop where it is installed): for code that is
    not async already. The arguments are `prepare`'s; bad input raises `simrun.ConfigError`
    before anything is spent."""
    prepared = prepare(config, budget=budget, budgets=budgets, db=db, personas=personas, goals=goals,
                       repetitions=repetitions, seed=seed, concurrency=concurrency, user=user, reports=reports,
                       runtime=runtime, runtime_settings=runtime_settings, labels=labels, replay=replay,
                       replay_only=replay_only, shard=shard, fresh=fresh, sequential=sequential, executor=executor,
                       ray_address=ray_address, ray_workers=ray_workers, demo_if_no_project=demo_if_no_project)
    return _on_a_loop_of_its_own("run", prepared.execute(events=events, verdict_json=verdict_json))


def demo(*, repetitions: int | None = None, db: str | Path | None = None, reports: str | Path | None = None,
         events: RunEvents | None = None, verdict_json: str | Path | None = None) -> Outcome:
    """What `simrun demo` runs: the bundled demo with a dead end, a loop and a broken guarantee
    planted in its runtime, in its own database (default simrun-demo.duckdb, so that a team's
    `latest` run stays theirs), wherever it is called from. Its outcome fails: a broken guarantee
    fails a run."""
    prepared = prepare_demo(repetitions=repetitions, db=db, reports=reports)
    return _on_a_loop_of_its_own("demo", prepared.execute(events=events, verdict_json=verdict_json))


def prepare_demo(*, repetitions: int | None = None, db: str | Path | None = None,
                 reports: str | Path | None = None) -> PreparedRun:
    """`simrun demo`'s run, checked and ready (`demo` runs it)."""
    return prepare(**faulty_run(db or "simrun-demo.duckdb", reports or "reports"), repetitions=repetitions)


def resume(run: str = "latest", *, config: str | Path | None = None, budgets: str | Path | None = None,
           db: str | Path | None = None, budget: Money | None = None, executor: str | None = None,
           ray_address: str | None = None, ray_workers: int | None = None, events: RunEvents | None = None,
           verdict_json: str | Path | None = None) -> Outcome:
    """Finish a run that was killed, interrupted or stopped by its budget (`prepare_resume`)."""
    prepared = prepare_resume(run, config=config, budgets=budgets, db=db, budget=budget, executor=executor,
                              ray_address=ray_address, ray_workers=ray_workers)
    return _on_a_loop_of_its_own("resume", prepared.execute(events=events, verdict_json=verdict_json))


def _on_a_loop_of_its_own(call: str, running: Coroutine[Any, Any, Outcome]) -> Outcome:
    """A run on an event loop of its own (uvloop where it is installed), for `run`, `demo`,
    `resume` and `PreparedRun.run`. Inside a running loop it cannot start one, and says what to
    do instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return eventloop.run(running)
    running.close()     # never awaited: closed, so that Python does not warn of it
    raise SimrunError(f"simrun.{call}() runs its own event loop, and this code already runs in one: "
                      f"use `await simrun.run_async(...)` (or `await simrun.prepare(...).execute()`)")


def _replayed(run: str, db: str | Path | None, config: str | Path | None) -> dict[str, Any]:
    with Store(project_db(db, config), create=False) as store:
        recorded = store.run(run)
        recorded["answers"] = replay_answers(store, recorded["run_id"])
    if not recorded["answers"]:
        raise ConfigError(f"run {recorded['run_id']} recorded no model answers to replay "
                          f"(its user was {recorded['user_backend']})", field="replay")
    return recorded


async def _execute(prepared: PreparedRun, events: RunEvents, verdict_json: str | Path | None) -> Outcome:
    plan, executor, shard = prepared.plan, prepared.executor, prepared.shard
    check_folder(verdict_json, parameter="verdict_json")
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
