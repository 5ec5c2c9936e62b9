"""The Ray executor (`simrun --executor ray`): a run's conversations on the workers of a Ray
cluster, with one budget, one rate limit and one store for all of them.

This process is the driver. It plans the matrix and stores every conversation, as in-process
(`simulator/_runner.py`); only the conversations run elsewhere. It hands cells to the workers
(`simulator/cluster/_worker.py`) in chunks, and a worker gets its next chunk when it returns one, so
a fast worker takes more. A worker has out its slots' worth of cells and a chunk or two more, so
its slots never wait for the driver, and the conversations in flight and in transit are bounded
(by `concurrency + 2 * MAX_CHUNK` per worker) whatever the matrix's size. A chunk holds about
`CHUNK_S` of the worker's conversations, at the pace measured on it: many of the scripted
user's, which take milliseconds (a call per chunk costs the driver and the worker a millisecond
or more of CPU), few of a model's, which take seconds. A worker sends what it finished with the
transcripts encoded as the store writes them, so the driver decodes nothing. The budget and the
rate limits live in two actors on this node (`simulator/cluster/_shared.py`); the runner's ledger
follows the budget's, so the progress line, the records stored and the run's spend are the
cluster's.

Faults. A worker that dies (killed, out of memory, its node gone) loses nothing: the driver
counts its float of the budget as spent (calls under way there may have been billed), gives its
cells back to be run again, and Ray restarts the worker (up to `MAX_RESTARTS` times), which
starts its runtime again. Nothing a dead worker ran is stored, so each conversation is stored
once. When no worker is left, or the cluster's budget actor is gone, the run ends as
interrupted, and running the same command again finishes it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import uuid
from collections.abc import Iterator
from typing import Any, TypeVar

import ray
from ray.exceptions import ActorUnavailableError, ObjectLostError, OwnerDiedError, RayActorError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from simrun._errors import ClusterLost, SimrunError
from simrun.simulator._conversation import Cell
from simrun.simulator._ledger import Ledger
from simrun.simulator._project import Plan
from simrun.simulator._runner import Finish
from simrun.simulator.adapters import RuntimeAdapter
from simrun.simulator.cluster._connect import connect, cpus, first_line
from simrun.simulator.cluster._shared import Budget, Rates
from simrun.simulator.cluster._worker import Chunk, Worker, WorkerSpec, float_prefix
from simrun.simulator.users import UserBackend

CHUNK_S = 0.5          # a chunk's length in its worker's time (what a dead worker's chunk costs to run again)
MAX_CHUNK = 64         # cells per chunk at most
MAX_RESTARTS = 3       # Ray restarts a dead worker this many times before it is given up
START_S = 120.0        # a worker that cannot start (or start again) in this long is given up
SYNC_S = 0.25          # how often the runner's ledger follows the cluster's
STOP_S = 10.0          # on the way out: how long workers get to stop their runtimes
RETRY_S = 0.5          # how often a restarting worker is asked whether it is back

DIED = (RayActorError, ActorUnavailableError, ObjectLostError, OwnerDiedError)

T = TypeVar("T")
# A Ray actor's handle (a worker's, the budget's): its methods are found at run time, each
# called through `.remote`, which Ray's types do not describe.
Handle = Any


class RayExecutor:
    """Runs a plan's conversations on a Ray cluster's workers; `workers` (default: one per CPU
    of the cluster) each keep `concurrency` conversations in flight."""

    def __init__(self, plan: Plan, *, address: str = "auto", workers: int | None = None) -> None:
        self.plan, self.address, self.workers = plan, address, workers
        self.alive = 0            # workers up, for the progress line
        self.pids: list[int] = []  # each worker's process id, as of its last start
        self.connected_here = False   # this executor called ray.init, and lets go of it after the run
        self.draws = 0            # the workers' calls to the budget actor (their floats), so far

    def connect(self) -> str:
        """Join or start the cluster now, before anything is spent."""
        self.connected_here = self.connected_here or not ray.is_initialized()
        return connect(self.address)

    async def run(self, cells: Iterator[Cell], finish: Finish, *, user: UserBackend, runtime: RuntimeAdapter,
                  ledger: Ledger, concurrency: int) -> None:
        if not ray.is_initialized():
            self.connect()
        try:
            await _Dispatch(self, cells, finish, user, ledger, concurrency).run(runtime)
        finally:
            self.alive = 0
            if self.connected_here:
                ray.shutdown()
                self.connected_here = False


class _Dispatch:
    """One run on the cluster: the shared actors, the workers, and the cells between them."""

    def __init__(self, executor: RayExecutor, cells: Iterator[Cell], finish: Finish, user: UserBackend,
                 ledger: Ledger, concurrency: int) -> None:
        self.executor, self.cells, self.finish, self.user, self.ledger = executor, cells, finish, user, ledger
        self.concurrency = max(1, concurrency)    # each worker's slots
        self.given_back: collections.deque[Cell] = collections.deque()
        self.out: dict[asyncio.Future[Chunk], tuple[Any, list[Cell]]] = {}    # chunks out: (ref, cells)
        self.changed = asyncio.Event()        # cells were given back, or a chunk came home
        # The cluster's actors (handles to a `Budget` and a `Rates`), and the replay cache in
        # Ray's object store; None until `run` makes them.
        self.budget: Any = None
        self.rates: Any = None
        self.replay: Any = None
        self.handles: list[Handle] = []
        self.syncing: asyncio.Future[None] | None = None    # the latest take of the cluster's records

    def stopping(self) -> bool:
        return self.ledger.exhausted or bool(self.user.stopped)

    def take(self, size: int) -> list[Cell]:
        chunk: list[Cell] = []
        while len(chunk) < size and self.given_back:
            chunk.append(self.given_back.popleft())
        while len(chunk) < size and (cell := next(self.cells, None)) is not None:
            chunk.append(cell)
        return chunk

    def chunk_size(self, returned: int, since: float | None) -> int:
        """Cells for a worker's next chunk: what it returns in CHUNK_S at the pace it has kept
        since its first chunk went out; its slots' worth before it has returned any."""
        if not returned or since is None:
            return min(MAX_CHUNK, self.concurrency)
        pace = returned / max(1e-3, asyncio.get_running_loop().time() - since)
        return max(1, min(MAX_CHUNK, round(pace * CHUNK_S)))

    async def run(self, runtime: RuntimeAdapter) -> None:
        plan = self.executor.plan
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        run = uuid.uuid4().hex[:12]
        budget_name = f"simrun-budget-{run}"
        rates_name: str | None = None       # a rate-limit actor only when budgets.toml limits the user backend
        shared = {"num_cpus": 0, "scheduling_strategy": here, "max_restarts": 0}
        self.budget = ray.remote(Budget).options(name=budget_name, **shared).remote(
            self.ledger.budget, self.ledger.figures(), plan.user)
        limit = plan.budgets.limits.get(plan.user)
        if limit is not None:
            rates_name = f"simrun-rates-{run}"
            local = self.user.limiter.window if self.user.limiter is not None else None
            self.rates = ray.remote(Rates).options(name=rates_name, **shared).remote(
                {plan.user: (limit.requests_per_minute, limit.tokens_per_minute, limit.window_s)},
                {plan.user: list(local.booked)} if local is not None else None)
        available = cpus()
        count = self.executor.workers or max(1, available)
        spec = WorkerSpec.for_plan(self.executor.plan, self.user, count, budget=budget_name, rates=rates_name)
        replay = self.user.replay
        self.replay = ray.put(replay) if replay is not None else None
        worker = ray.remote(Worker).options(num_cpus=min(1.0, available / count) if available else 0,
                                            max_restarts=MAX_RESTARTS, max_task_retries=0)
        self.handles = [worker.remote(spec) for _ in range(count)]
        try:
            await self._start_all()
            # The driver's own runtime served the health check; the workers run their own.
            await runtime.aclose()
            follow = _quiet(asyncio.ensure_future(self._follow()))
            feeders = _quiet(asyncio.gather(*(self._feed(h) for h in self.handles)))
            racing: set[asyncio.Future[Any]] = {feeders, follow}
            try:
                await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
                if follow.done():
                    follow.result()          # it only ends by failing
                feeders.result()
            finally:
                follow.cancel()
                feeders.cancel()
            if not self.stopping() and (self.given_back or _peek(self)):
                raise ClusterLost("every Ray worker died and could not be started again")
            failed = False
        except BaseException:
            failed = True
            await self._cancel()
            raise
        finally:
            # In this order: each worker sends what its ledger owes the budget; whatever is still
            # held then belongs to a worker that is gone, and counts as spent; the runner's
            # ledger takes the last records. A run that went well is over only once it has them
            # all: a budget actor gone by then lost some, and the run is not finished.
            await self._stop_workers()
            await self._forfeit_the_rest()
            try:
                await self._sync(strict=not failed)
            finally:
                for actor in (self.budget, self.rates):
                    if actor is not None:
                        with contextlib.suppress(Exception):
                            ray.kill(actor, no_restart=True)

    async def _start_all(self) -> None:
        try:
            started = await asyncio.wait_for(asyncio.gather(*(_get(h.start.remote(self.replay, i))
                                                              for i, h in enumerate(self.handles))), START_S)
        except TimeoutError:
            raise ClusterLost(f"the Ray workers did not start within {START_S:.0f} s; does the cluster have "
                              "free CPUs? (`ray status`)") from None
        except RayTaskError as exc:
            raise _cause(exc) from None
        except DIED as exc:
            raise ClusterLost(f"a Ray worker could not start: {first_line(exc)}; is simrun installed on "
                              "every node of the cluster?") from None
        self.executor.alive = len(self.handles)
        self.executor.pids = [s["pid"] for s in started]

    async def _feed(self, handle: Handle) -> None:
        """Keep one worker busy: its slots' worth of cells and a chunk or two more out, until no
        cell is left."""
        running: set[asyncio.Future[Chunk]] = set()
        up = True
        out = returned = 0            # cells out with this worker; cells it returned finished
        since = None                  # when its first chunk went out (again, after a restart)
        while True:
            # Enough that its slots stay full when a chunk comes home, while the next one travels:
            # its slots' worth and a chunk more once that chunk is gone; two chunks more at most.
            while up and not self.stopping():
                size = self.chunk_size(returned, since)
                if out >= self.concurrency + size:
                    break
                chunk = self.take(size)
                if not chunk:
                    break
                since = since if since is not None else asyncio.get_running_loop().time()
                ref = handle.run.remote([(c.persona.id, c.goal.id, c.repetition, c.seed) for c in chunk])
                future = _quiet(asyncio.ensure_future(_get(ref)))
                self.out[future] = (ref, chunk)
                running.add(future)
                out += len(chunk)
            if not running:
                if not up:
                    return
                if not self.out or self.stopping():
                    return                        # nothing anywhere that could give cells back
                self.changed.clear()
                await self.changed.wait()         # another worker may die and give its cells back
                continue
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                # A chunk stays out until its cells are stored or given back: an idle feeder
                # waits while any is out, so no given-back cell is left without a worker.
                _, chunk = self.out[future]
                out -= len(chunk)
                try:
                    result: Chunk = future.result()
                except DIED:
                    if up:
                        up = False
                        self.executor.alive -= 1
                    await self._give_back(chunk, handle)
                except RayTaskError as exc:
                    raise _cause(exc) from None
                else:
                    returned += len(result.done)
                    await self._deliver(result)
                del self.out[future]
            self.changed.set()
            if not up and not running:
                up = await self._restart(handle)
                if up:
                    self.executor.alive += 1
                    returned, since = 0, None

    async def _give_back(self, chunk: list[Cell], handle: Handle) -> None:
        # The dead worker's float first, then its cells: forfeiting after a new attempt had begun
        # would count that attempt's calls too (a worker started again draws a float of its own).
        try:
            await _get(self.budget.forfeit.remote(float_prefix(self.handles.index(handle))))
        except DIED as exc:
            raise _budget_gone(exc) from None
        self.given_back.extend(chunk)

    async def _restart(self, handle: Handle) -> bool:
        """Whether the worker came back: Ray restarts it (its node permitting, up to MAX_RESTARTS
        times), and it starts its runtime again."""
        deadline = asyncio.get_running_loop().time() + START_S
        while True:
            try:
                started = await asyncio.wait_for(_get(handle.start.remote(self.replay, self.handles.index(handle))),
                                                 START_S)
                self.executor.pids[self.handles.index(handle)] = started["pid"]
                return True
            except ActorUnavailableError:
                # Still restarting: a call made now fails rather than waits.
                if asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(RETRY_S)
                    continue
            except (TimeoutError, *DIED):
                pass
            except RayTaskError as exc:
                raise _cause(exc) from None
            ray.kill(handle, no_restart=True)
            return False

    async def _deliver(self, result: Chunk) -> None:
        replay = self.user.replay
        if replay is not None:
            replay.hits += result.replay[0]
            replay.misses += result.replay[1]
        if result.stopped and not self.user.stopped:
            self.user.stopped = result.stopped
        for finished in result.done:
            await self.finish(finished)

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(SYNC_S)
            await self._sync(strict=True)

    async def _sync(self, strict: bool = False) -> None:
        """The runner's ledger follows the cluster's: its figures, and the records to store.

        A take the actor answered holds records it no longer has: if the take were cancelled on
        its way back (the run interrupted while `_follow` waits for it), those calls would count
        in the spend and never be stored. So each take runs to its end whatever becomes of the
        caller, and in order: the next waits for the one before (figures never go back)."""
        if self.budget is None:
            return
        self.syncing = asyncio.ensure_future(self._take(self.syncing, strict))
        await asyncio.shield(self.syncing)

    async def _take(self, before: asyncio.Future[None] | None, strict: bool) -> None:
        if before is not None:
            with contextlib.suppress(BaseException):   # its failure was its caller's to raise
                await before
        try:
            figures, records = await _get(self.budget.take.remote())
        except DIED as exc:
            if strict:
                raise _budget_gone(exc) from None
            return
        self.ledger.follow(figures, records)
        self.executor.draws = figures.get("draws", 0)

    async def _cancel(self) -> None:
        """Interrupted, or failed: cancel the chunks out. Their conversations stop, and release
        what their calls held (the cancelled calls were not answered)."""
        for ref, _ in self.out.values():
            with contextlib.suppress(Exception):
                ray.cancel(ref)
        if self.out:
            await asyncio.wait(list(self.out), timeout=STOP_S)

    async def _stop_workers(self) -> None:
        stops = [_get(h.stop.remote()) for h in self.handles]
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*stops, return_exceptions=True), STOP_S)
        for handle in self.handles:
            with contextlib.suppress(Exception):
                ray.kill(handle, no_restart=True)
        self.executor.alive = 0

    async def _forfeit_the_rest(self) -> None:
        """What no worker settled or released: its call may have been billed, so it is spent."""
        if self.budget is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(_get(self.budget.forfeit.remote(None)), STOP_S)


def _peek(dispatch: _Dispatch) -> bool:
    """Whether the matrix still has a cell (taking one off puts it back first in line)."""
    for cell in dispatch.cells:
        dispatch.given_back.appendleft(cell)
        return True
    return False


async def _get(ref: ray.ObjectRef[T]) -> T:
    return await asyncio.wrap_future(ref.future())


def _cause(exc: RayTaskError) -> BaseException:
    """What a worker raised: a simrun error (the budget actor gone, a runtime that would not
    start) as itself, anything else (a fault of simrun's) as Ray reports it, with its traceback."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, SimrunError) else exc


def _budget_gone(exc: BaseException) -> ClusterLost:
    return ClusterLost(f"the Ray cluster went away: its budget actor stopped answering ({type(exc).__name__})")


def _quiet(future: asyncio.Future[T]) -> asyncio.Future[T]:
    """A future whose failure may go unread (a chunk abandoned on the way out): never reported."""
    future.add_done_callback(lambda f: f.cancelled() or f.exception())
    return future
