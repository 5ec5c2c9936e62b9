"""The runner: the persona x goal x repetition matrix, run with bounded concurrency.

An executor turns cells into conversations: by default on this event loop (`InProcess`), or on
the workers of a Ray cluster (`simulator/cluster/_executor.py`). Either pulls cells from one iterator
(memory does not grow with the matrix); the runner owns the rest, the same for both: the run row,
resume, and one writer thread that stores finished conversations a batch per transaction. The
run row is written only after every input has been validated: bad input never leaves a run behind.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import hashlib
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from simrun._errors import ConfigError
from simrun._storable import JsonObject
from simrun._version import __version__
from simrun.scoring.checks import SCORER_VERSION
from simrun.scoring.dataset import Dataset, canonical_json
from simrun.scoring.store import Finished, Store, identifying, new_run_id, spend
from simrun.simulator._conversation import Cell, converse
from simrun.simulator._identity import GitState, runtime_version
from simrun.simulator._ledger import Ledger
from simrun.simulator.adapters import RuntimeAdapter
from simrun.simulator.users import UserBackend

BATCH = 200         # conversations written per transaction (at 50, each cost a third more to write)
FLUSH_S = 1.0       # ...or at least this often, so that a killed run loses at most a second
MAX_PENDING_WRITES = 2   # batches handed to the writer thread before conversations wait for it


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """What lives before a run (modules, the dataset, clients) is never garbage; frozen, the
    collector stops scanning it, and its full collections no longer stall every conversation in
    flight for a tenth of a second or more at high concurrency (benchmarks/HISTORY.md). What the
    caller had frozen stays frozen."""
    thaw = gc.get_freeze_count() == 0
    gc.freeze()
    try:
        yield
    finally:
        if thaw:
            gc.unfreeze()


def cell_seed(run_seed: int, persona: str, goal: str, repetition: int) -> int:
    """Each cell's own seed: stable across runs, machines and matrix order."""
    digest = hashlib.sha256(f"{run_seed}:{persona}:{goal}:{repetition}".encode()).hexdigest()
    return int(digest[:8], 16)


def matrix(dataset: Dataset, repetitions: int, seed: int) -> Iterator[Cell]:
    # Repetition outermost, so that a run cut short holds a balanced sample of every cell.
    for repetition in range(repetitions):
        for persona in dataset.personas:
            for goal in dataset.goals:
                yield Cell(persona, goal, repetition, cell_seed(seed, persona.id, goal.id, repetition))


def in_shard(cell_id: str, shard: tuple[int, int] | None) -> bool:
    """Shard i of n holds the cells whose id hashes to i: stable whatever the matrix order."""
    if shard is None:
        return True
    index, count = shard
    return int(hashlib.sha256(cell_id.encode()).hexdigest()[:8], 16) % count == index


def run_key(dataset: Dataset, config: JsonObject | None, *, shard: tuple[int, int] | None,
            **identity: str | int) -> str:
    """What a run is, so that running it again finishes it: its settings as `identifying`
    keeps them (a run resumed with more budget, or more workers, is still the same run)."""
    body = identifying(config)
    return hashlib.sha256(canonical_json({"config": body, "dataset": dataset.hash, "scorer": SCORER_VERSION,
                                          "shard": list(shard) if shard else None, **identity}).encode()
                          ).hexdigest()[:16]


Finish = Callable[[Finished], Awaitable[None]]


class Executor(Protocol):
    """How a run's cells become conversations. `run` takes cells from `cells` until it is empty,
    or until the ledger is exhausted or the user model stopped, and awaits `finish` with each
    finished conversation (which stores it, and may wait for the writer: that is the
    back-pressure)."""

    async def run(self, cells: Iterator[Cell], finish: Finish, *, user: UserBackend, runtime: RuntimeAdapter,
                  ledger: Ledger, concurrency: int) -> None: ...


class ClusterExecutor(Executor, Protocol):
    """An executor whose conversations run on other processes or machines (the Ray executor,
    `simrun.simulator.executors`): reached before anything is spent, and watched as it runs."""

    alive: int          # its workers up now, for the progress line

    def connect(self) -> str:
        """Join or start the cluster, before anything is spent; says which one."""
        ...


class InProcess:
    """`concurrency` conversations at once on this event loop: the default executor."""

    async def run(self, cells: Iterator[Cell], finish: Finish, *, user: UserBackend, runtime: RuntimeAdapter,
                  ledger: Ledger, concurrency: int) -> None:
        async def worker() -> None:
            for cell in cells:
                if ledger.exhausted or user.stopped:
                    return
                await finish((await converse(cell, user, runtime)).finished())

        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))


@dataclass(frozen=True)
class RunResult:
    run_id: str
    conversations: int
    spent_usd: Decimal
    budget_usd: Decimal
    planned: int = 0
    budget_stopped: bool = False     # the budget ran out before the matrix did
    resumed: int | None = None       # conversations an earlier, unfinished attempt had stored
    user_output: str | None = None   # the structured-output form the user model answered in
    stopped: str | None = None       # why the run stopped early (the user model failed the same way again and again)


async def run_matrix(dataset: Dataset, runtime: RuntimeAdapter, user: UserBackend, store: Store, *,
                     repetitions: int, seed: int, budget: Decimal, concurrency: int = 8,
                     config: JsonObject | None = None, run_id: str | None = None, ledger: Ledger | None = None,
                     shard: tuple[int, int] | None = None, resume: bool | str = True,
                     on_conversation: Callable[[Finished], None] | None = None,
                     on_user_ready: Callable[[str], None] | None = None,
                     labels: tuple[str, ...] = (), git: GitState | None = None,
                     executor: Executor | None = None, upto: int | None = None) -> RunResult:
    """Run every cell once (or until the budget is spent), store it, and return the run's spend.

    `resume`: True finishes the unfinished run of this configuration, if there is one; a run id
    finishes that run (an error if it was made with another configuration); False starts anew.

    `ledger` is the one a paid user backend reserves against (by default, the backend's own);
    once it refuses a call, no new conversation starts, and those in flight end as budget_cut.
    Every call it settles is stored with the next batch, or within FLUSH_S, whether or not its
    conversation finishes: the run's spend is always the sum of its stored calls.

    A model backend settles its output form first (`on_user_ready` hears which); when it fails
    the same way conversation after conversation, no new conversation starts and the result
    says why (`stopped`).

    A new run records what it tests: `labels`, the runtime's health `version` and the `git`
    commit and branch. A resumed run keeps what it recorded; one whose runtime now reports
    another version is not resumed but started anew (a run measures one version), or refused
    when it was named.

    `executor` runs the conversations (default: `InProcess`, on this event loop); whichever runs
    them, this process stores them.

    `upto`: run only the repetitions below it (a round of the sequential gate); the run stays the
    run of all its `repetitions`, and the next round resumes it.
    """
    key = run_key(dataset, config, seed=seed, repetitions=repetitions, user=user.name,
                  runtime=runtime.identity, shard=shard)
    earlier: dict[str, Any] | None
    if isinstance(resume, str):
        earlier = store.run(resume)
        if earlier.get("run_key") != key:
            raise ConfigError(f"run {earlier['run_id']} was made with another configuration (runtime, user, "
                              "matrix, seed or scorer); it cannot be finished as the same run", field="RUN")
    else:
        earlier = store.resumable(key) if resume and run_id is None else None
    # The one the backend holds its calls against, when that is a run's ledger (a cluster
    # worker's float never reaches a runner): the run's spend is then the backend's.
    ledger = ledger or (user.ledger if isinstance(user.ledger, Ledger) else None) or Ledger(budget)
    output: str | None = None
    try:
        version = runtime_version(await runtime.health())
        if earlier is not None and earlier.get("runtime_version") not in (None, version):
            if isinstance(resume, str):
                raise ConfigError(f"run {earlier['run_id']} tested runtime version {earlier['runtime_version']}; the "
                                  f"runtime now reports {version}: a run measures one version, so it cannot be "
                                  "finished as the same run; run `simrun` to start a new run of this version",
                                  field="RUN")
            earlier = None
        # Before the run is recorded: a server that answers no form is bad input, one line.
        output = await user.start(earlier.get("user_output") if earlier is not None else None)
        if output is not None and on_user_ready is not None:
            on_user_ready(user.describe_output())
    except BaseException:
        await runtime.aclose()   # a runtime that never answered still has a session, or a process, to stop
        await user.aclose()
        raise
    if earlier is not None:
        # The same run, cut short (killed, interrupted, out of budget): finish it. What it
        # stored is kept once, and what it spent still counts against the budget.
        run_id = earlier["run_id"]
        stored = set(store.conversation_ids(run_id))
        ledger.spent += spend(store, run_id)[0]
        store.reopen_run(run_id)
    else:
        run_id = run_id or new_run_id()
        stored = set()
        store.create_run(run_id, config=config or {}, dataset_hash=dataset.hash, dataset=dataset.item_hashes,
                         scorer_version=SCORER_VERSION, simrun_version=__version__, user_backend=user.name,
                         runtime=runtime.description, seed=seed, repetitions=repetitions, budget_usd=budget,
                         labels=labels, runtime_version=version, git_commit=git.commit if git else None,
                         git_branch=git.branch if git else None)
    planned = [c for c in matrix(dataset, repetitions, seed)
               if in_shard(c.id, shard) and (upto is None or c.repetition < upto)]
    if earlier is None:
        # What the run means to do is known from its start, so that a killed run says it too.
        store.set_identity(run_id, key, f"{shard[0]}/{shard[1]}" if shard else None, planned=len(planned))
    if output is not None:
        store.set_user_output(run_id, output)
    cells = iter([c for c in planned if c.id not in stored])
    done = 0
    status = "interrupted"

    batch: list[Finished] = []
    flushed = time.monotonic()
    # One writer thread, on a connection of its own, so that the event loop is not held while
    # DuckDB writes a batch (at hundreds of conversations in flight, every millisecond the loop
    # is held is latency added to each of them). A single thread keeps the writes in order; a
    # failed write is raised at the next flush or at the end, never lost.
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simrun-writer")
    writes_to = store.for_another_thread()
    pending: collections.deque[Future[None]] = collections.deque()

    def settle_written() -> None:
        while pending and pending[0].done():
            pending.popleft().result()

    async def flush() -> None:
        # A writer slower than the conversations slows them down: room first, then the batch.
        # A batch leaves `batch` only when it is handed to the writer, and a write leaves
        # `pending` only once it is done, so an interruption while waiting loses nothing.
        while len(pending) >= MAX_PENDING_WRITES:
            await asyncio.shield(asyncio.wrap_future(pending[0]))
            settle_written()
        submit()

    def submit() -> None:
        nonlocal flushed
        calls = ledger.take_records()
        if batch or calls:
            pending.append(writer.submit(writes_to.record_many, run_id, batch.copy(), calls))
            batch.clear()
        flushed = time.monotonic()

    def drain() -> None:
        submit()   # what finished before an interruption is kept, and every call paid for
        writer.shutdown(wait=True)
        settle_written()

    async def flush_calls() -> None:
        # A model user's conversation can take minutes: its calls are stored as they are paid
        # for, not when it ends, so that a killed run loses at most FLUSH_S of them.
        while True:
            await asyncio.sleep(FLUSH_S)
            if time.monotonic() - flushed >= FLUSH_S:
                await flush()

    async def finish(finished: Finished) -> None:
        nonlocal done
        batch.append(finished)
        done += 1
        if on_conversation is not None:
            on_conversation(finished)
        # A batch per transaction: a transaction per conversation would cost more than the
        # conversation.
        if len(batch) >= BATCH or time.monotonic() - flushed > FLUSH_S:
            await flush()

    # Each step of the way out runs even if one before it fails (the stack unwinds in reverse).
    async with contextlib.AsyncExitStack() as leaving:
        leaving.enter_context(frozen_heap())
        leaving.push_async_callback(user.aclose)
        leaving.push_async_callback(runtime.aclose)
        leaving.callback(lambda: store.finish_run(run_id, status=status, spent_usd=ledger.spent,
                                                  planned=len(planned)))
        leaving.callback(writes_to.close)
        leaving.callback(drain)
        flusher = asyncio.ensure_future(flush_calls())
        leaving.callback(flusher.cancel)
        await (executor or InProcess()).run(cells, finish, user=user, runtime=runtime, ledger=ledger,
                                             concurrency=concurrency)
        flusher.cancel()
        drain()   # before the status: a failed write leaves the run unfinished
        # A run the budget stopped is unfinished: run it again with more budget to finish it.
        # So is one stopped by its user model: fix the model's settings, and resume it.
        stopped = user.stopped
        status = "budget_spent" if ledger.exhausted else "stopped" if stopped else "finished"
    return RunResult(run_id, done + len(stored), ledger.spent, budget, planned=len(planned),
                     budget_stopped=ledger.exhausted, resumed=len(stored) if earlier is not None else None,
                     user_output=output, stopped=stopped)
