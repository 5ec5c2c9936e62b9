"""After a run, the goals that name what no store of the run held are found from the store, kept
with the run, and its verdict blames the goal file, not the runtime."""

from __future__ import annotations

import asyncio
import dataclasses
from decimal import Decimal

import pytest

from simrun.examples.libdesk import LibDesk
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.dataset._files import load_model
from simrun.scoring.dataset._models import Goal
from simrun.scoring.gate._run_verdict import verdict_of_run
from simrun.scoring.store._database import Store
from simrun.scoring.store._seen import record_goal_problems, seen_in_run, stored_goal_problems
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser
from tests.conftest import ROOT


def two_personas(dataset):
    return dataclasses.replace(dataset, personas=dataset.personas[:2])


def stored(db, dataset, runtime) -> tuple[Store, str]:
    store = Store(db)
    run_id = asyncio.run(run_matrix(dataset, PythonRuntime(runtime), ScriptedUser(), store, repetitions=1,
                                    seed=3, budget=Decimal("1"), config={"note": "test"})).run_id
    return store, run_id


def paths(value, prefix=""):
    """Every dotted path of nested dicts, computed here in Python to check the SQL's answer."""
    for key, inner in value.items():
        yield prefix + key
        if isinstance(inner, dict):
            yield from paths(inner, prefix + key + ".")


@pytest.fixture(scope="module")
def tripdesk_run(tmp_path_factory, demo):
    store, run_id = stored(tmp_path_factory.mktemp("seen") / "s.duckdb", two_personas(demo), TripDesk())
    yield store, run_id
    store.close()


def test_what_the_stores_held_is_read_from_the_database_exactly(tripdesk_run):
    store, run_id = tripdesk_run
    seen = seen_in_run(store, run_id)
    fields, types_of, operations = {}, {}, set()
    for (cid,) in store.con.execute("SELECT conversation_id FROM conversations WHERE run_id = ?", [run_id]).fetchall():
        t = store.transcript(run_id, cid)
        for state in [t.initial_state, t.final_state, *(turn.state for turn in t.turns)]:
            for rid, record in ((state or {}).get("records") or {}).items():
                fields.setdefault(record.get("type", ""), set()).update(paths(record))
                types_of[rid] = record.get("type", "")
            operations |= {e["operation"] for e in (state or {}).get("events") or []}
        for turn in t.turns:
            result = turn.result or {}
            operations |= {o.get("operation") for o in result.get("next_steps") or []}
            operations |= {(result.get(k) or {}).get("operation") for k in ("card", "ask")}
    assert {t: set(f) for t, f in seen.fields.items()} == fields
    assert dict(seen.types_of) == types_of
    assert seen.operations == operations - {None}
    assert "date" in seen.arguments["rebook"]


def test_a_misnamed_goal_is_kept_with_the_run_and_its_verdict_blames_the_goal_file(tripdesk_run, demo, tmp_path):
    store, run_id = tripdesk_run
    assert record_goal_problems(store, run_id, demo.goals) == []
    assert verdict_of_run(store, run_id).status == "passed"
    path = tmp_path / "rename-trip.yaml"
    path.write_text((ROOT / "goals" / "rename-trip.yaml").read_text().replace(
        "match: {name: Lisbon offsite}", "match: {name: Lisbon offsite, bag: 1}"))
    goals = [load_model(path, Goal) if g.id == "rename-trip" else g for g in demo.goals]
    line = ("goal rename-trip: no record of type trip ever had field `bag` (did you mean `bags`?); fields seen: "
            "bags, destination, name, segments, status, traveler, type")
    assert record_goal_problems(store, run_id, goals) == [line]
    assert stored_goal_problems(store, run_id) == [line]
    verdict = verdict_of_run(store, run_id)
    assert (verdict.status, verdict.exit_code) == ("not judged", 2)
    assert [r.text for r in verdict.reasons] == [f"a problem in the goal files, not the runtime's: {line}"]
    assert verdict.headline().startswith("NOT JUDGED: a problem in the goal files")
    assert record_goal_problems(store, run_id, demo.goals) == [] and verdict_of_run(store, run_id).passed


def test_a_faulty_runtime_is_never_taken_for_a_goal_file_problem(tmp_path, demo):
    # Every fault at once: the runtime's failures are findings, never a goal's naming problem.
    faults = {"wrong_record": 0.5, "phantom_receipt": 0.5, "refused_offer": 0.5, "dead_end": 0.3, "crash": 0.1}
    store, run_id = stored(tmp_path / "f.duckdb", two_personas(demo), TripDesk(faults=faults, fault_seed=2))
    with store:
        assert record_goal_problems(store, run_id, demo.goals) == []
        assert verdict_of_run(store, run_id).status == "failed"


def test_another_runtime_s_own_goals_name_nothing_unseen(tmp_path, library):
    store, run_id = stored(tmp_path / "l.duckdb", two_personas(library), LibDesk())
    with store:
        assert seen_in_run(store, run_id).operations
        assert record_goal_problems(store, run_id, library.goals) == []


def test_past_the_records_it_may_read_it_names_no_field_rather_than_guess(tripdesk_run, monkeypatch):
    # A store too big to read in full is not read in part: a field seen only in the unread part
    # would be named missing. Operations are still read.
    store, run_id = tripdesk_run
    monkeypatch.setattr("simrun.scoring.store._seen.MOST_RECORDS", 2)
    seen = seen_in_run(store, run_id)
    assert seen.fields == {} and seen.types_of == {} and "rebook" in seen.operations


def test_a_run_cut_short_or_a_goal_never_judged_names_nothing_it_could_not_have_seen(tmp_path, demo):
    # Only what the run could have shown is held against a goal.
    rename = tmp_path / "rename-trip.yaml"
    rename.write_text((ROOT / "goals" / "rename-trip.yaml").read_text().replace(
        "match: {name: Lisbon offsite}", "match: {name: Lisbon offsite, bag: 1}"))
    goals = [load_model(rename, Goal) if g.id == "rename-trip" else g for g in demo.goals]
    store, run_id = stored(tmp_path / "cut.duckdb", two_personas(demo), TripDesk())
    with store:
        assert len(record_goal_problems(store, run_id, goals)) == 1           # the whole run: named
        # Every rename-trip conversation ended by the simulator: that goal was never judged.
        store.con.execute("UPDATE conversations SET end_reason = 'simulator_error' WHERE run_id = ? AND "
                          "goal = 'rename-trip'", [run_id])
        assert record_goal_problems(store, run_id, goals) == []
        store.con.execute("UPDATE conversations SET end_reason = 'user_stopped' WHERE run_id = ? AND "
                          "goal = 'rename-trip'", [run_id])
        assert len(record_goal_problems(store, run_id, goals)) == 1
        # One conversation of another goal cut by the budget: the run may not have reached anything.
        store.con.execute("UPDATE conversations SET end_reason = 'budget_cut' WHERE run_id = ? AND "
                          "conversation_id = (SELECT min(conversation_id) FROM conversations WHERE run_id = ? "
                          "AND goal = 'cancel-trip')", [run_id, run_id])
        assert record_goal_problems(store, run_id, goals) == [] and stored_goal_problems(store, run_id) == []
