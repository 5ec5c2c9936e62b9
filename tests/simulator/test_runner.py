"""The runner: every cell once, each with its own stable seed, whatever the concurrency."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import time
from decimal import Decimal

import pytest

from simrun.examples.tripdesk import TripDesk
from simrun.scoring.store._database import Store
from simrun.simulator import _runner as runner
from simrun.simulator._runner import cell_seed, matrix, run_matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser


def test_cells_cover_the_matrix_each_with_its_own_stable_seed(demo):
    cells = list(matrix(demo, 3, seed=9))
    assert len(cells) == len(demo.personas) * len(demo.goals) * 3
    assert len({c.id for c in cells}) == len(cells)
    assert len({c.seed for c in cells}) == len(cells)
    assert cells[0].seed == cell_seed(9, cells[0].persona.id, cells[0].goal.id, 0)
    assert [c.seed for c in matrix(demo, 3, seed=9)] == [c.seed for c in cells]
    assert cell_seed(10, "a", "b", 0) != cell_seed(9, "a", "b", 0)


def test_concurrency_does_not_change_what_is_recorded(tmp_path, demo):
    def run(concurrency):
        with Store(tmp_path / f"c{concurrency}.duckdb") as store:
            run_id = asyncio.run(run_matrix(demo, PythonRuntime(TripDesk(faults="loop=0.3", fault_seed=2)),
                                            ScriptedUser(), store, repetitions=2, seed=4,
                                            budget=Decimal(0), concurrency=concurrency)).run_id
            rows = store.con.execute(
                "SELECT conversation_id, turn, user_turn, result FROM turns WHERE run_id = ? ORDER BY 1, 2",
                [run_id]).fetchall()
            found = store.con.execute(
                "SELECT conversation_id, class, turn FROM findings WHERE run_id = ? ORDER BY 1, 2, 3",
                [run_id]).fetchall()
            return rows, found

    serial, parallel = run(1), run(8)
    assert serial == parallel
    assert serial[1], "the planted loops were found"


class FailingStore(Store):
    """A store whose disk fills up after its first batch."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches = 0

    def record_many(self, run_id, finished, calls=()):
        self.batches += 1
        if self.batches > 1:
            raise OSError("No space left on device")
        super().record_many(run_id, finished, calls)


def test_a_failed_write_is_raised_and_the_run_is_not_marked_finished(tmp_path, demo):
    with FailingStore(tmp_path / "f.duckdb") as store:
        with pytest.raises(OSError, match="No space left"):
            asyncio.run(run_matrix(demo, PythonRuntime(TripDesk()), ScriptedUser(), store, repetitions=3, seed=1,
                                   budget=Decimal(0), concurrency=4))
        status, = store.con.execute("SELECT status FROM runs").fetchone()
        stored, = store.con.execute("SELECT count(*) FROM conversations").fetchone()
    assert status == "interrupted"          # resumable, not reported as a finished run
    assert 0 < stored < len(demo.personas) * len(demo.goals) * 3


class SlowStore(Store):
    """A store whose disk is slow: the writer thread falls behind the conversations."""

    def record_many(self, run_id, finished, calls=()):
        time.sleep(0.05)
        super().record_many(run_id, finished, calls)


def test_an_interrupted_run_keeps_every_conversation_that_finished_even_with_writes_queued(
        tmp_path, demo, monkeypatch):
    monkeypatch.setattr(runner, "BATCH", 2)
    finished = []

    async def interrupted(store):
        task = asyncio.create_task(run_matrix(demo, PythonRuntime(TripDesk()), ScriptedUser(), store,
                                              repetitions=5, seed=1, budget=Decimal(0), concurrency=16,
                                              on_conversation=lambda c: finished.append(c.conversation_id)))
        while len(finished) < 60:
            await asyncio.sleep(0.01)
        task.cancel()      # what Ctrl-C does to the run
        with pytest.raises(asyncio.CancelledError):
            await task

    with SlowStore(tmp_path / "i.duckdb") as store:
        asyncio.run(interrupted(store))
        stored = [cid for (cid,) in store.con.execute("SELECT conversation_id FROM conversations").fetchall()]
        status, = store.con.execute("SELECT status FROM runs").fetchone()
    assert len(finished) < len(demo.personas) * len(demo.goals) * 5, "the run was cut short"
    assert sorted(stored) == sorted(finished) and status == "interrupted"


def test_the_heap_is_frozen_during_a_run_and_a_callers_freeze_is_kept(demo):
    during = []
    few = dataclasses.replace(demo, goals=demo.goals[:2])     # what is frozen needs no whole matrix

    def run_once():
        with Store(":memory:") as store:
            asyncio.run(run_matrix(few, PythonRuntime(TripDesk()), ScriptedUser(), store, repetitions=1, seed=1,
                                   budget=Decimal(0), on_conversation=lambda c: during.append(gc.get_freeze_count())))

    assert gc.get_freeze_count() == 0
    run_once()
    assert min(during) > 0 and gc.get_freeze_count() == 0
    gc.freeze()            # a caller that froze its own heap keeps it frozen
    try:
        frozen = gc.get_freeze_count()
        run_once()
        # Still frozen (an unfreeze would leave 0); a few frozen objects the run let go of (an
        # earlier run's cached answers) may have been freed since, so the count is not exact.
        assert gc.get_freeze_count() > frozen // 2 > 0
    finally:
        gc.unfreeze()


def test_a_named_run_is_finished_only_by_its_own_configuration(demo):
    from simrun._errors import ConfigError

    with Store(":memory:") as store:
        first = asyncio.run(run_matrix(demo, PythonRuntime(TripDesk()), ScriptedUser(), store, repetitions=1, seed=1,
                                       budget=Decimal(0)))
        store.finish_run(first.run_id, status="interrupted", spent_usd=Decimal(0))
        with pytest.raises(ConfigError, match=f"run {first.run_id} was made with another configuration"):
            asyncio.run(run_matrix(demo, PythonRuntime(TripDesk()), ScriptedUser(), store, repetitions=1, seed=2,
                                   budget=Decimal(0), resume=first.run_id))
        same = asyncio.run(run_matrix(demo, PythonRuntime(TripDesk()), ScriptedUser(), store, repetitions=1, seed=1,
                                      budget=Decimal(0), resume=first.run_id))
        assert same.run_id == first.run_id and same.resumed == first.conversations
