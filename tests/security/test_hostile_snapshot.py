"""A store sent with a turn (protocol 1's optional `state` field) is untrusted like any answer:
one that is malformed, too large or holds what the store cannot costs its conversation (a
`runtime_error` with evidence), and every other conversation of the run is stored and scored."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

from simrun.examples.tripdesk import TripDesk
from simrun.scoring.store._database import Store
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser

LIMIT = 64 * 1024          # runtime.max_result_bytes, small so that the oversized snapshot stays cheap
SNAPSHOTS = {              # goal -> the store its runtime sends with every turn, and the fault's kind
    "cancel-trip": ({"records": [], "events": []}, "malformed"),             # records: a list, not an object
    "rename-trip": ({"records": {}, "events": [{"id": 7}]}, "malformed"),    # an event without its fields
    "remove-bag": ({"records": {"trip:T-1": {"name": "x" * LIMIT}}, "events": []}, "too_large"),
    "ask-bags": ({"records": {"trip:T-1": {"name": "nul \x00 here"}}, "events": []}, "malformed"),
    "single-add-bag": ("the store", "malformed"),                           # not an object at all
}


class HostileSnapshots(TripDesk):
    def start(self, request):
        started = super().start(request)
        self.goals = {**getattr(self, "goals", {}), started["session"]: request.get("goal")}
        return started

    def turn(self, session, request):
        result = super().turn(session, request)
        hostile = SNAPSHOTS.get(self.goals[session])
        return {**result, "state": hostile[0]} if hostile else result


def test_each_hostile_snapshot_costs_its_conversation_only(tmp_path, demo):
    with Store(tmp_path / "h.duckdb") as store:
        result = asyncio.run(run_matrix(demo, PythonRuntime(HostileSnapshots(), max_result_bytes=LIMIT),
                                        ScriptedUser(), store, repetitions=1, seed=2, budget=Decimal(0),
                                        concurrency=4))
        rows = store.con.execute("SELECT goal, end_reason, error, turns FROM conversations WHERE run_id = ?",
                                 [result.run_id]).fetchall()
        status = store.run(result.run_id)["status"]
    assert status == "finished" and len(rows) == result.planned == len(demo.personas) * len(demo.goals)
    for goal, end, error, turns in rows:
        if goal in SNAPSHOTS:
            evidence = json.loads(error)
            assert end == "runtime_error" and evidence["kind"] == SNAPSHOTS[goal][1], (goal, evidence)
            assert evidence["turn"] == 1 and turns == 1 and evidence["body"], (goal, evidence)
        else:
            assert end != "runtime_error", (goal, error)
