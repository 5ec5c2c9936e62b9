"""The DuckDB store: versioned schema, whole conversations or nothing, transcripts read back exactly."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from simrun._errors import StoreError
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.checks._scorer import score
from simrun.scoring.store import _rates as R
from simrun.scoring.store._database import Store
from simrun.scoring.store._migrations import MIGRATIONS
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser


def stored_run(db, demo, **faults):
    with Store(db) as store:
        return asyncio.run(run_matrix(
            demo, PythonRuntime(TripDesk(faults=faults or None, fault_seed=5)), ScriptedUser(), store,
            repetitions=1, seed=3, budget=Decimal("1"), config={"note": "test"})).run_id


def test_migrations_are_recorded_once(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).close()
    with Store(db) as store:
        rows = store.con.execute("SELECT version, name FROM schema_migrations").fetchall()
    assert rows == [(v, n) for v, n, _ in MIGRATIONS]


def test_a_newer_schema_is_refused(tmp_path):
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        store.con.execute("INSERT INTO schema_migrations VALUES (999, 'future', now())")
    with pytest.raises(StoreError, match="newer simrun"):
        Store(db)


def test_transcripts_read_back_exactly_and_rescore_the_same(tmp_path, demo, clean_run):
    db = tmp_path / "s.duckdb"
    run_id = stored_run(db, demo)
    with Store(db) as store:
        ids = store.conversation_ids(run_id)
        assert len(ids) == len(demo.personas) * len(demo.goals)
        for cid in ids:
            t = store.transcript(run_id, cid)
            card = score(t, demo.goal(t.goal), demo.persona(t.persona))
            row = store.con.execute("SELECT end_reason, goal_reached FROM conversations "
                                    "WHERE run_id = ? AND conversation_id = ?", [run_id, cid]).fetchone()
            assert row == (card.end, card.goal_reached)
        run = store.run("latest")
        assert run["run_id"] == run_id and run["status"] == "finished" and run["config"] == {"note": "test"}
        assert run["dataset_hash"] == demo.hash and run["spent_usd"] == 0


def test_a_conversation_is_written_whole_or_not_at_all(tmp_path, demo, clean_run, monkeypatch):
    conversation = clean_run.conversations[0]
    with Store(tmp_path / "s.duckdb") as store:
        store.create_run("r1", config={}, dataset_hash="h", dataset={}, scorer_version="1",
                         simrun_version="0", user_backend="scripted", runtime="x", seed=1,
                         repetitions=1, budget_usd=Decimal(0))

        import simrun.scoring.store._database as module

        real = module.insert_rows

        def explode(con, table, rows, **options):   # the disk fills up after the turns are written
            if table == "checks":
                raise RuntimeError("disk full")
            real(con, table, rows, **options)

        monkeypatch.setattr(module, "insert_rows", explode)
        with pytest.raises(RuntimeError):
            store.record("r1", "c1", conversation.transcript, conversation.scorecard,
                         started_at=0.0, duration_s=0.1)
        for table in ("conversations", "turns", "checks", "findings"):
            assert store.con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0


def test_rates_count_unverifiable_apart_and_leave_out_simulator_errors(tmp_path, demo):
    db = tmp_path / "s.duckdb"
    run_id = stored_run(db, demo, loop=1.0)
    with Store(db) as store:
        rates = {r.cls: r for r in R.class_rates(store, run_id)}
        loops = R.conversations_with(store, run_id, "loop")
        assert rates["loop"].occurrences == len(loops) > 0
        assert rates["loop"].scored == len(store.conversation_ids(run_id))
        # Mark one conversation as the simulator's fault: it leaves the progress denominators.
        store.con.execute("UPDATE conversations SET end_reason = 'simulator_error' "
                          "WHERE run_id = ? AND conversation_id = ?", [run_id, loops[0]])
        store.con.execute("UPDATE checks SET status = 'unverifiable' "
                          "WHERE run_id = ? AND class = 'audit_gap' AND conversation_id = ?", [run_id, loops[1]])
        after = {r.cls: r for r in R.class_rates(store, run_id)}
        assert after["loop"].occurrences == rates["loop"].occurrences - 1
        assert after["loop"].scored == rates["loop"].scored - 1
        assert after["audit_gap"].unverifiable == 1
        assert after["audit_gap"].scored == rates["audit_gap"].scored - 1
        low, high = after["loop"].interval
        assert low < after["loop"].rate < high


def test_unknown_run_lists_recent_ones(tmp_path, demo):
    db = tmp_path / "s.duckdb"
    run_id = stored_run(db, demo)
    with Store(db) as store, pytest.raises(StoreError) as info:
        store.run("nope")
    assert run_id in str(info.value)


def test_the_loops_own_end_is_kept_so_rescoring_starts_from_it(tmp_path, demo):
    from simrun.simulator.users._scripted import ScriptedUser as User

    with Store(tmp_path / "s.duckdb") as store:
        run_id = asyncio.run(run_matrix(demo, PythonRuntime(TripDesk()), User(faults={"contradict_facts": 0.5},
                                                                               fault_seed=3), store,
                                        repetitions=1, seed=3, budget=Decimal(0))).run_id
        relabelled = store.con.execute(
            "SELECT conversation_id, loop_end FROM conversations WHERE run_id = ? AND end_reason = 'simulator_error' "
            "AND loop_end <> 'simulator_error'", [run_id]).fetchall()
        assert relabelled, "the scorer turned some conversations into simulator_error"
        for cid, loop_end in relabelled:
            t = store.transcript(run_id, cid)
            assert t.end == loop_end
            assert score(t, demo.goal(t.goal), demo.persona(t.persona)).end == "simulator_error"
