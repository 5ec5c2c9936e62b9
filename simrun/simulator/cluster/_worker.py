"""A Ray worker: one process of the cluster that runs conversations the way the in-process
executor does, on its own event loop, and sends them back to the driver to be stored.

A worker reads nothing of its own machine's project: the driver gives it the plan (personas
and goals as loaded there), the secrets the driver knows (so that anything it says is cut the
same way), the environment variables the runtime and the user model read (API keys, the
`${VAR}`s of headers), and handles to the cluster's budget and rate limits
(`simulator/cluster/_shared.py`). It builds its own runtime from the plan: a python target is imported
here; an HTTP `url` is shared by every worker; an HTTP `command` or a stdio child is started here
and stopped when the worker ends (its supervisor stops it even if the worker is killed).

`simulator/cluster/_executor.py` makes `Worker` an actor; Ray runs its coroutines on one event loop,
several chunks at a time, with at most `plan.concurrency` conversations in flight among them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from simrun import _secrets as secrets
from simrun._errors import SimrunError
from simrun.scoring.dataset import Goal, Persona
from simrun.scoring.store import Finished, encoded_or_stand_in
from simrun.simulator._conversation import Cell, converse
from simrun.simulator._execute import environment_of, runtime_for, user_backend
from simrun.simulator._project import Plan
from simrun.simulator.adapters import RuntimeAdapter
from simrun.simulator.cluster._floats import FloatLedger
from simrun.simulator.cluster._shared import LedgerLost, RemoteLimiter
from simrun.simulator.users import UserBackend

if TYPE_CHECKING:
    from simrun.simulator.users import ReplayCache

CellKey = tuple[str, str, int, int]          # persona id, goal id, repetition, seed: what travels


@dataclass(frozen=True)
class WorkerSpec:
    plan: Plan                    # with the output form the driver settled, and this worker's user concurrency
    environment: dict[str, str]   # the variables the runtime and the user model read here, from the driver
    secrets: tuple[str, ...]      # every secret the driver knows
    # The cluster's actors, by name (Ray keeps an argument that holds a handle in its object
    # store, from which a restarted worker cannot always be rebuilt): the budget, and the rate
    # limits when budgets.toml limits the user backend.
    budget: str
    rates: str | None

    @classmethod
    def for_plan(cls, plan: Plan, user: UserBackend, workers: int, budget: str, rates: str | None) -> WorkerSpec:
        """What a worker needs to run `plan` as the driver would, given the driver's user backend."""
        project = plan.project
        if user.output is not None:
            # Settled here once (a probe costs money): every worker asks in the same form.
            project = project.model_copy(update={"run": project.run.model_copy(update={"user_output": user.output})})
        if project.user.concurrency is not None:
            # A server's slots are the cluster's, not each worker's.
            slots = max(1, project.user.concurrency // workers)
            project = project.model_copy(update={"user": project.user.model_copy(update={"concurrency": slots})})
        runtime = plan.runtime
        if runtime.transport == "python" and runtime.target.partition(":")[0].endswith(".py"):
            path, _, name = runtime.target.partition(":")
            runtime = runtime.model_copy(update={"target": f"{Path(path).resolve()}:{name}"})
        if runtime.transport != "python" and runtime.cwd is None:
            runtime = runtime.model_copy(update={"cwd": str(Path.cwd())})   # where a command runs in-process
        # The baseline is the driver's to judge with; a worker only runs conversations.
        return cls(dataclasses.replace(plan, project=project, runtime=runtime, baseline=None),
                   environment_of(plan), tuple(secrets.registered()), budget, rates)


@dataclass(frozen=True)
class Chunk:
    """What a worker sends back for a chunk of cells: the conversations it finished, their
    transcripts encoded as the store writes them (a cell it did not start, because the budget ran
    out or the user model stopped, is not among them), why the user model stopped if it did, and
    the replay cache's hits and misses since its last chunk."""

    done: list[Finished]
    stopped: str | None
    replay: tuple[int, int]


@dataclass(frozen=True)
class _Started:
    """What a worker makes when it starts: its float of the budget, its share of the rate limit,
    its user backend and runtime, the plan's personas and goals by id, and its slots."""

    ledger: FloatLedger
    limiter: RemoteLimiter | None
    user: UserBackend
    runtime: RuntimeAdapter
    personas: dict[str, Persona]
    goals: dict[str, Goal]
    slots: asyncio.Semaphore


def float_prefix(index: int) -> str:
    """How the floats of the driver's worker `index` are named: what forfeiting them names."""
    return f"worker {index}/"


class Worker:
    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.replay: ReplayCache | None = None
        self.ready: asyncio.Future[None] | None = None
        self.started: _Started | None = None     # what `_start` made, once it has

    async def start(self, replay: ReplayCache | None = None, index: int = 0) -> dict[str, Any]:
        """Start the runtime and the user backend, once (again after Ray restarted this worker).
        `replay`: the recorded answers of a `--replay` run, sent once to each worker; `index`:
        which of the driver's workers this is, which names its float of the budget."""
        if self.ready is None:
            self.replay = replay
            self.ready = asyncio.ensure_future(self._start(index))
        try:
            await self.ready
        except SimrunError as exc:
            # Ray writes what a worker raises to the cluster's logs: cut the secrets out first.
            raise type(exc)(secrets.redact(str(exc))) from None
        return {"pid": os.getpid()}

    async def _start(self, index: int) -> None:
        spec = self.spec
        os.environ.update(spec.environment)
        for value in spec.secrets:
            secrets.register(value)
        plan = spec.plan
        # A float of its own each time it starts: one of a process that died is forfeited whole.
        ledger = FloatLedger(ray.get_actor(spec.budget), f"{float_prefix(index)}{uuid.uuid4().hex[:8]}")
        limit = plan.budgets.limits.get(plan.user)
        limiter = (RemoteLimiter(ray.get_actor(spec.rates), plan.user, limit.requests_per_minute,
                                 limit.tokens_per_minute, limit.window_s)
                   if limit is not None and spec.rates else None)
        user = user_backend(plan, ledger, self.replay, limiter=limiter)
        try:
            runtime = runtime_for(plan)
        except BaseException:
            await user.aclose()     # its connections, as `stop` closes them once both are made
            raise
        self.started = started = _Started(
            ledger, limiter, user, runtime, {p.id: p for p in plan.dataset.personas},
            {g.id: g for g in plan.dataset.goals}, asyncio.Semaphore(max(1, plan.concurrency)))
        try:
            await started.runtime.health()
            await user.start(plan.project.run.user_output)
        except BaseException:
            await self.stop()
            raise
        # What lives now (Ray, the plan, the clients) is never garbage: frozen, the collector
        # stops scanning it, as the runner does in-process (simrun.simulator._runner.frozen_heap).
        gc.freeze()

    async def run(self, cells: list[CellKey]) -> Chunk:
        if self.ready is None:
            raise RuntimeError("a chunk was sent to a worker that was not started")
        await self.start()
        started = self.started
        if started is None:       # (`start` raised if `_start` did not get as far)
            raise RuntimeError("the worker's start made no runtime or user")
        ledger, limiter, user = started.ledger, started.limiter, started.user

        async def one(key: CellKey) -> Finished | None:
            persona, goal, repetition, seed = key
            cell = Cell(started.personas[persona], started.goals[goal], repetition, seed)
            async with started.slots:
                if ledger.exhausted or user.stopped:
                    return None
                conversation = await converse(cell, user, started.runtime)
            if ledger.lost or (limiter is not None and limiter.lost):
                # Its calls could not be held or booked: it ended on that, which is no finding.
                raise LedgerLost("the cluster's budget or rate-limit actor is gone")
            return encoded_or_stand_in(conversation.finished())

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(key)) for key in cells]
        return Chunk([done for t in tasks if (done := t.result()) is not None], user.stopped,
                     self._replay_counts())

    def _replay_counts(self) -> tuple[int, int]:
        if self.replay is None:
            return 0, 0
        counts = self.replay.hits, self.replay.misses
        self.replay.hits = self.replay.misses = 0
        return counts

    async def stop(self) -> None:
        """Send the budget what this worker owes it, stop the runtime it started, and close the
        user model's connections."""
        started = self.started
        if started is None:
            return
        if not started.ledger.lost:
            try:
                await started.ledger.flush()
            except LedgerLost:
                pass   # what it held is then counted as spent, at its worst case
        for close in (started.runtime, started.user):
            try:
                await close.aclose()
            except Exception:
                pass   # stopping is best effort; the supervisor stops a runtime whatever happens here
