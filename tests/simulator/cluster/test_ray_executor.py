"""`--executor ray`: the conversations on a Ray cluster's workers, one budget, one rate limit and
one store for all of them.

Every test here runs on one local cluster (`ray_cluster` in tests/conftest.py: two workers of
one CPU each) and talks to nothing but 127.0.0.1. The driver runs in this
process; the workers are Ray's processes, which get the project from the driver.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from simrun.cli._main import app
from simrun.scoring.store import _rates as R
from simrun.scoring.store._database import Store
from simrun.scoring.store._model_calls import spend
from simrun.simulator import _eventloop as eventloop
from simrun.simulator import execute, load_plan
from simrun.simulator.adapters._process import free_port
from tests.conftest import ROOT
from tests.fixtures.model_api import FakeModelAPI, serve

ray = pytest.importorskip("ray")
# Every test here on one xdist worker, with the Ray benchmark's test: one cluster at a time.
pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]

USER = "openai:gpt-4.1-mini"
KEY = "sk-ray-planted-5c1e9a77d2"


@pytest.fixture()
def cluster(ray_cluster):
    return ray_cluster


@pytest.fixture()
def fake_api(monkeypatch):
    api = FakeModelAPI(record=False)
    port = free_port()
    server = serve(api, port, latency_s=0.2)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    yield api
    server.should_exit = True


def keep(project: Path, personas: tuple[str, ...], goals: tuple[str, ...]) -> Path:
    for folder, names in (("personas", personas), ("goals", goals)):
        for path in (project / folder).glob("*.yaml"):
            if path.stem not in names:
                path.unlink()
    return project


SMALL = (("plain-paula", "terse-tom", "wordy-wendy"), ("single-add-bag", "cancel-trip", "new-trip-full", "rename-trip"))


def outcome(db: Path, run_id: str | None = None) -> dict:
    """What a run stored, conversation by conversation: how it ended, its turns and its findings."""
    with Store(db, create=False) as store:
        run_id = run_id or store.run("latest")["run_id"]
        q = lambda sql: store.con.execute(sql, [run_id]).fetchall()  # noqa: E731
        return {
            "ends": q("SELECT conversation_id, end_reason, goal_reached, turns FROM conversations WHERE run_id = ? "
                      "ORDER BY 1"),
            "turns": q("SELECT conversation_id, turn, user_turn, result FROM turns WHERE run_id = ? ORDER BY 1, 2"),
            "findings": q("SELECT conversation_id, turn, class, detail FROM findings WHERE run_id = ? "
                          "ORDER BY 1, 2, 3, 4"),
        }


def differences(a: dict, b: dict) -> str:
    """Where two outcomes part, row by row (pytest's diff of two long dicts shows their ends, not
    where they differ): the rows only one of them has, by part, the first few of each."""
    said = []
    for part in a:
        only_a, only_b = sorted(set(a[part]) - set(b[part])), sorted(set(b[part]) - set(a[part]))
        if only_a or only_b or len(a[part]) != len(b[part]):
            said.append(f"{part}: {len(a[part])} rows against {len(b[part])}; only in the first: {only_a[:4]}; "
                        f"only in the second: {only_b[:4]}")
    return "\n".join(said)


def ledger_of(db: Path) -> dict:
    with Store(db, create=False) as store:
        run = store.run("latest")
        spent, calls = spend(store, run["run_id"])
        lost = store.con.execute("SELECT count(*) FROM model_calls WHERE cache_status = 'lost'").fetchone()[0]
        aside = R.set_aside(store, run["run_id"])
    return {"run": run, "sum": spent, "calls": calls, "lost": lost, "set_aside": aside}


class FakeWorker:
    """A worker handle as the driver's feeder sees one (`run.remote(cells)`, whose result comes as
    a future): `slots` conversations at once, each taking `seconds`; a chunk comes back when its
    last one ends. It counts the cells the driver has out with it, and the chunks' sizes."""

    def __init__(self, slots: int, seconds: float) -> None:
        self.slots, self.seconds = asyncio.Semaphore(slots), seconds
        self.out = self.most_out = 0
        self.sizes: list[int] = []
        self.run = self

    def remote(self, cells: list) -> Any:
        import concurrent.futures

        from simrun.simulator.cluster._worker import Chunk

        self.out += len(cells)
        self.most_out = max(self.most_out, self.out)
        self.sizes.append(len(cells))
        future = concurrent.futures.Future()

        async def one(cell):
            async with self.slots:
                await asyncio.sleep(self.seconds)
            return "/".join(map(str, cell[:3]))

        async def chunk():
            done = await asyncio.gather(*(one(cell) for cell in cells))
            self.out -= len(cells)
            future.set_result(Chunk(done, None, (0, 0)))

        asyncio.ensure_future(chunk())
        return SimpleNamespace(future=lambda: future)


@pytest.mark.parametrize("slots, seconds, cells", [(200, 0.0005, 2000), (2, 0.1, 24)])
def test_a_worker_s_slots_are_kept_full_with_chunks_of_about_half_a_second_and_no_more_cells_out(
        demo, slots, seconds, cells):
    from simrun.simulator._runner import matrix
    from simrun.simulator.cluster._executor import CHUNK_S, MAX_CHUNK, _Dispatch
    from simrun.simulator.users._scripted import ScriptedUser

    stored: list[str] = []

    async def finish(conversation_id: str) -> None:
        stored.append(conversation_id)

    async def feed(worker: FakeWorker) -> None:
        plan = SimpleNamespace(alive=1)
        ledger = SimpleNamespace(exhausted=False)
        # A user that never stops: the feeder reads `stopped`, as of any backend (UserBackend).
        dispatch = _Dispatch(plan, iter(list(matrix(demo, 1 + cells // 70, 1))[:cells]), finish, ScriptedUser(),
                             ledger, concurrency=slots)
        await dispatch._feed(worker)

    worker = FakeWorker(slots, seconds)
    asyncio.run(feed(worker))
    assert len(stored) == len(set(stored)) == cells, "each cell ran once"
    # Its slots never waited for the driver (a bound of 3 chunks of 32 once held 200 slots to 96),
    # and no more than two chunks beyond them were out: memory does not grow with the matrix.
    assert slots <= worker.most_out < slots + 2 * MAX_CHUNK
    assert worker.sizes[0] == min(slots, MAX_CHUNK)
    pace = slots / seconds                      # conversations a second, at best
    assert max(worker.sizes) <= max(1, min(MAX_CHUNK, round(pace * CHUNK_S)))
    if pace * CHUNK_S > MAX_CHUNK:
        assert max(worker.sizes) == MAX_CHUNK, "fast conversations travel many to a chunk"


def test_the_demo_matrix_on_ray_gives_the_findings_of_an_in_process_run(cluster, project, monkeypatch):
    with open(project / "simrun.toml", "a") as toml:
        toml.write('faults = "loop=0.2,dead_end=0.1,phantom_receipt=0.05,not_understood=0.1"\nfault_seed = 7\n')
    monkeypatch.chdir(project)
    here = CliRunner().invoke(app, ["-n", "2", "--db", "here.duckdb", "--seed", "3"])
    there = CliRunner().invoke(app, ["-n", "2", "--db", "there.duckdb", "--seed", "3", "--executor", "ray",
                                     "--ray-address", cluster])
    assert here.exit_code == there.exit_code == 1, there.output       # phantom receipts break a guarantee
    assert "executor: Ray already running" in there.output and "2 workers alive" in there.output
    local, remote = outcome(project / "here.duckdb"), outcome(project / "there.duckdb")
    assert len(remote["ends"]) == 140 and remote["findings"], "the planted faults were found"
    assert remote == local, differences(remote, local)


def test_the_budget_holds_for_the_whole_cluster_and_the_spend_is_the_sum_of_its_calls(cluster, project,
                                                                                     fake_api, monkeypatch):
    monkeypatch.chdir(keep(project, *SMALL))
    # The budget is what is tested: the few conversations it pays for are too few for the default
    # floor on goal reached to mean anything, so it is switched off.
    budgets = project / "budgets.toml"
    budgets.write_text(budgets.read_text().replace("[release]\n", "[release]\nmin_goal_reached = 0\n", 1))
    result = CliRunner().invoke(app, ["--user", USER, "-n", "2", "--budget", "0.02usd", "--concurrency", "4",
                                      "--executor", "ray"])
    assert result.exit_code == 4, result.output      # cut short, nothing failed: incomplete, never a pass
    ledger = ledger_of(project / "simrun.duckdb")
    run = ledger["run"]
    assert run["status"] == "budget_spent"
    assert Decimal(run["spent_usd"]) == ledger["sum"] <= Decimal("0.02")
    assert ledger["calls"] > 8 and ledger["sum"] > 0
    cut = [c for c in ledger["set_aside"] if c["end_reason"] == "budget_cut"]
    assert cut, "conversations in flight when the money ran out end as budget_cut"
    report = (project / "reports" / f"{run['run_id']}.html").read_text()
    assert all(c["conversation_id"] in report for c in cut)
    assert "the budget ran out" in result.output
    # Its verdict says what it never ran and what it left out, on the command line and first on the report.
    for said in ("conversations planned were never run (the budget ran out)",
                 "ended for reasons that are not the runtime's (budget_cut"):
        assert said in result.output and said in html.unescape(report.split("</section>", 1)[0]), said


def test_a_worker_killed_mid_run_loses_nothing_and_its_held_calls_count_as_spent(cluster, project, fake_api,
                                                                                 monkeypatch):
    monkeypatch.chdir(keep(project, *SMALL))
    plan = load_plan(user=USER, repetitions=2, concurrency=4, budget="1usd")
    with Store(project / "whole.duckdb") as store:
        eventloop.run(execute(plan, store))
    from simrun.simulator.cluster._executor import RayExecutor

    executor = RayExecutor(plan, workers=2)
    killed: list[int] = []

    def kill_one(conversation) -> None:
        if not killed and len(executor.pids) == 2:
            killed.append(executor.pids[0])
            os.kill(executor.pids[0], signal.SIGKILL)

    with Store(project / "killed.duckdb") as store:
        result = eventloop.run(execute(plan, store, executor=executor, on_conversation=kill_one))
    assert killed and executor.pids[0] != killed[0], "the worker was started again"
    assert result.conversations == result.planned == 24
    killed_run, whole_run = outcome(project / "killed.duckdb"), outcome(project / "whole.duckdb")
    assert killed_run == whole_run, differences(killed_run, whole_run)
    ledger = ledger_of(project / "killed.duckdb")
    assert Decimal(ledger["run"]["spent_usd"]) == ledger["sum"] == result.spent_usd
    # Each model call takes 200 ms: the killed worker held calls under way, which may have been billed.
    assert ledger["lost"] >= 1


def test_a_cluster_that_breaks_ends_the_run_interrupted_and_the_same_command_finishes_it(cluster, project):
    plan = load_plan(config=project / "simrun.toml", repetitions=5)
    from simrun._errors import ClusterLost
    from simrun.simulator.cluster._executor import RayExecutor

    def break_the_budget(conversation) -> None:
        for name in ray.util.list_named_actors():
            if name.startswith("simrun-budget-"):
                ray.kill(ray.get_actor(name))

    with Store(project / "broken.duckdb") as store:
        with pytest.raises(ClusterLost, match="budget actor stopped answering"):
            eventloop.run(execute(plan, store, executor=RayExecutor(plan), on_conversation=break_the_budget))
        first = store.run("latest")
        assert first["status"] == "interrupted"
        stored = len(store.conversation_ids(first["run_id"]))
        assert 0 < stored < 350
        again = eventloop.run(execute(plan, store))
        assert again.run_id == first["run_id"] and again.resumed == stored and again.conversations == 350
        assert len(set(store.conversation_ids(first["run_id"]))) == 350


def test_the_runtime_is_started_by_each_worker_with_the_driver_s_secrets_and_stopped_after(cluster, project,
                                                                                          monkeypatch):
    """An HTTP runtime that simrun starts, given a token through ${VAR}, that echoes it wherever it
    can: each worker starts its own (the variable comes from the driver), and the token is cut out
    of everything stored."""
    fixture = ROOT / "tests" / "fixtures" / "hostile_runtime.py"
    secret = "sk-ray-hostile-0b3d9e61c2"
    tag = f"ray-{uuid.uuid4().hex}"         # what the processes this test started are found by
    command = [sys.executable, str(fixture), "http", "--port", "{port}", "--tag", tag]
    (project / "simrun.toml").write_text("\n".join([
        "[run]", "repetitions = 1", "", "[runtime]", 'transport = "http"', f"command = {json.dumps(command)}",
        'env = { TOKEN = "${HOSTILE_TOKEN}", HOSTILE = "${HOSTILE}" }',
        'headers = { Authorization = "Bearer ${HOSTILE_TOKEN}" }']) + "\n")
    monkeypatch.setenv("HOSTILE_TOKEN", secret)
    monkeypatch.setenv("HOSTILE", "terse-tom/cancel-trip=echo")
    monkeypatch.chdir(keep(project, ("plain-paula", "terse-tom"), ("cancel-trip", "rename-trip")))
    result = CliRunner().invoke(app, ["--executor", "ray"])
    assert result.exit_code in (0, 1), result.output
    with Store(project / "simrun.duckdb", create=False) as store:
        run_id = store.run("latest")["run_id"]
        ends = dict(store.con.execute("SELECT conversation_id, end_reason FROM conversations").fetchall())
        error = store.con.execute("SELECT error FROM conversations WHERE conversation_id = "
                                  "'terse-tom/cancel-trip/0'").fetchone()[0]
        everything = str([store.con.execute(f"SELECT * FROM {t}").fetchall()
                          for t in ("runs", "conversations", "turns", "findings", "checks")])
    assert ends["terse-tom/cancel-trip/0"] == "runtime_error" and len(ends) == 4
    assert "[redacted]" in error and secret not in everything and secret not in result.output
    assert run_id in result.output
    left = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()
    assert left == [], "every worker stopped the runtime it started"


class Timed(FakeModelAPI):
    """The fake API, noting when each request reached it."""

    def __init__(self) -> None:
        super().__init__(record=False)
        self.times: list[float] = []

    def handle(self, request, http=httpx):
        self.times.append(time.monotonic())
        return super().handle(request, http)


def test_the_rate_limit_holds_for_the_whole_cluster_measured_at_the_server(cluster, project, monkeypatch):
    """Two workers, sixteen conversations in flight, one limit of 1,080 requests a minute held
    over windows of ten seconds (180 each): over a window of traffic the server sees at most 180
    (give or take 10%) in any ten seconds, and the cluster reaches it. (The window is a sixth of
    the default so that the test takes seconds, not a minute: the rule, booking in one window
    for the whole cluster, is the same, and the share of a window, 180 calls, is what bounds
    how far late deliveries can push a window over.)"""
    limit, window = 1080, 10
    share = limit * window // 60
    with open(project / "budgets.toml", "a") as toml:
        toml.write(f'\n[limits."openai:bench"]\nrequests_per_minute = {limit}\nwindow_s = {window}\n'
                   '[prices."openai:bench"]\ninput_per_mtok = 0.40\noutput_per_mtok = 1.60\n')
    api = Timed()
    port = free_port()
    server = serve(api, port, latency_s=0.02)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.chdir(project)
    plan = load_plan(user="openai:bench", repetitions=3, concurrency=8, budget="5usd")
    from simrun.simulator.cluster._executor import RayExecutor

    async def a_window() -> None:
        store = Store(project / "rate.duckdb")
        try:
            run = asyncio.ensure_future(execute(plan, store, executor=RayExecutor(plan, workers=2)))
            # A window after the workers' first call (the driver's output probe comes before).
            while not run.done() and not (len(api.times) > 1 and time.monotonic() - api.times[1] > window + 1):
                await asyncio.sleep(0.25)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
        finally:
            store.close()

    try:
        eventloop.run(a_window())
    finally:
        server.should_exit = True
    # However long the workers take to start: once they run, the cluster reaches its share of
    # the limit in some window, and no window ever holds more than the share allows.
    times = sorted(api.times)
    busiest = max(sum(1 for u in times if t <= u < t + window) for t in times)
    assert share * 0.9 <= busiest <= share * 1.1, busiest
    ledger = ledger_of(project / "rate.duckdb")
    assert ledger["run"]["status"] == "interrupted"
    assert Decimal(ledger["run"]["spent_usd"]) == ledger["sum"] and ledger["calls"] >= busiest


def test_a_run_cancelled_while_the_driver_takes_the_cluster_s_records_stores_every_call_it_counts(
        cluster, project, fake_api, monkeypatch):
    """The driver takes the settled calls' records from the budget actor every SYNC_S: a run
    cancelled just after the actor handed a take over (the answer on its way, the records no
    longer the actor's) still stores every call its spend counts. Made to happen, not waited
    for: the run is cancelled exactly when the first take that brings records is answered."""
    from simrun.simulator.cluster import _executor as ray_executor

    monkeypatch.chdir(keep(project, *SMALL))
    plan = load_plan(user=USER, repetitions=2, concurrency=4, budget="1usd")
    real_get, cut, runs = ray_executor._get, [], []

    async def get(ref):
        value = await real_get(ref)
        taken = isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], dict) and "draws" in value[0]
        if taken and value[1] and not cut:
            cut.append(len(value[1]))
            runs[0].cancel()
            await asyncio.sleep(0)      # the run's cancellation reaches everything under way now
        return value

    monkeypatch.setattr(ray_executor, "_get", get)

    async def cancelled() -> None:
        with Store(project / "cut.duckdb") as store:
            runs.append(asyncio.ensure_future(execute(plan, store, executor=ray_executor.RayExecutor(plan, workers=2))))
            with pytest.raises(asyncio.CancelledError):
                await runs[0]

    eventloop.run(cancelled())
    assert cut, "the run was cancelled while a take with records was under way"
    ledger = ledger_of(project / "cut.duckdb")
    assert ledger["run"]["status"] == "interrupted"
    assert Decimal(ledger["run"]["spent_usd"]) == ledger["sum"] > 0 and ledger["calls"] >= cut[0]
