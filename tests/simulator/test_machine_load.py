"""The machine's speed never changes a verdict (issue 38, rule 6).

The same run, quiet and with a busy process on every core, gives the same verdict: each
conversation's end, goal and every class's status and findings. The run includes a goal whose
success query does real work in its sandbox (a query the load slows several times over, while its
limit holds), and each pass starts cold: new sandbox processes (whose start the load slows most),
no answer remembered from the other pass.

And a query that does run past its limit costs that conversation only: its goal is UNVERIFIABLE
with the reason, the next conversation's goal is checked as usual, and the goal still loads (no
process-wide memory that failed every later check and the next `load` with exit 2).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from simrun.examples.tripdesk import TripDesk
from simrun.scoring.dataset import _goal_sql as goal_sql
from simrun.scoring.dataset._files import load_dataset
from simrun.scoring.dataset._goal_sql import check_goal_sql
from simrun.simulator._conversation import Cell, converse
from simrun.simulator._runner import matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser
from tests.conftest import ROOT

DEMO = load_dataset(ROOT / "personas", ROOT / "goals")
# About 0.1 s of one core on a quiet machine (10 million rows scanned), whatever the store: work
# the load stretches, well inside the 2 s limit.
HEAVY = "SELECT count(*) > 0 FROM records r, range(10000000) t(i) WHERE r.type = 'trip' AND i % 1000003 = 5"


@contextmanager
def cpu_hog() -> Iterator[list[subprocess.Popen]]:
    """A busy-looping process on every core, for as long as the block runs; ended whatever happens."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _dataset():
    """The demo's goals, cancel-trip's success needing the heavy query too."""
    goals = []
    for goal in DEMO.goals:
        if goal.id == "cancel-trip":
            goal = goal.model_copy(update={"success": goal.success.model_copy(
                update={"sql": (*goal.success.sql, HEAVY)})})
        goals.append(goal)
    return goals


def _verdict() -> list[tuple]:
    """One pass of the run, cold: every conversation's end, goal, and each class's status and
    findings (their turns and details)."""
    goal_sql._end_all()              # the sandbox processes start again, within this pass's load
    goal_sql.forget_answers()        # and no answer is carried over from the other pass
    goals = {g.id: g for g in _dataset()}
    adapter = PythonRuntime(TripDesk(faults={"wrong_record": 0.3, "phantom_receipt": 0.3}, fault_seed=3))

    async def run():
        cells = [Cell(c.persona, goals[c.goal.id], c.repetition, c.seed) for c in matrix(DEMO, 1, 7)]
        return [await converse(cell, ScriptedUser(), adapter) for cell in cells]

    return [(c.cell.id, c.transcript.end, c.scorecard.goal_reached, c.scorecard.goal_detail,
             tuple((name, check.status, tuple((f.turn, f.detail) for f in check.findings))
                   for name, check in sorted(c.scorecard.checks.items())))
            for c in asyncio.run(run())]


def test_the_same_run_quiet_and_under_a_cpu_hog_gives_the_same_verdict():
    quiet = _verdict()
    assert any("cancel-trip" in row[0] and row[2] is True for row in quiet)   # the heavy query was run and held
    with cpu_hog():
        loaded = _verdict()
    assert loaded == quiet


class SlowFirstStore(TripDesk):
    """The demo's runtime, whose first session's store holds 400 more records: there, and only
    there, the goal's query runs past its limit."""

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None

    def start(self, request):
        started = super().start(request)
        self.first = self.first or started["session"]
        return started

    def state(self, session):
        state = super().state(session)
        if session == self.first:
            state["records"].update({f"pad:{i}": {"type": "pad"} for i in range(400)})
        return state


def test_a_query_past_its_limit_costs_its_conversation_and_the_next_one_is_checked():
    query = "SELECT count(*) >= 0 FROM records a, records b, records c, records d, records e"
    base = DEMO.goal("cancel-trip")
    goal = base.model_copy(update={"max_turns": 1, "success": base.success.model_copy(
        update={"sql": (query,), "records": ()})})
    goal_sql.forget_answers()
    adapter = PythonRuntime(SlowFirstStore())

    async def run():
        return [await converse(Cell(DEMO.personas[0], goal, repetition, 5), ScriptedUser(), adapter)
                for repetition in (0, 1)]

    slow, next_one = asyncio.run(run())
    assert slow.scorecard.goal_reached is None
    assert slow.scorecard.goal_detail == (f"UNVERIFIABLE: goal {goal.id}: success.sql[0] ran past its "
                                          f"{goal_sql.QUERY_TIMEOUT_S:g} s limit (stopped)")
    assert next_one.scorecard.goal_reached is True and next_one.transcript.end == "goal_reached"
    assert check_goal_sql(query) is None         # the goal still loads: the machine's speed is no bad input
