"""What the gate benchmarks share (gate_calibration.py, gate_sequential.py, gate_runs.py): the demo
matrix run in process against TripDesk with faults planted, summarised as the store summarises a
run, and the Wilson interval their rates are given with.

Each of those scripts imports this module and none imports another's, so that they form no import
circle (tests/test_benchmarks.py); the planted rates and the rises are the figures
benchmarks/README.md reports against.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from scipy import stats as st

from simrun.scoring.dataset._files import Dataset, load_dataset
from simrun.scoring.gate._summary import Counts, RunSummary, scorecard_counts, summary_from_counts

ROOT = Path(__file__).resolve().parent.parent

# Moderate rates: each class fires in roughly 2-10% of the demo's conversations.
RUNTIME_FAULTS = {"dead_end": 0.10, "not_understood": 0.10, "loop": 0.30, "refused_offer": 0.20,
                  "unanswered": 0.30, "crash": 0.02}
USER_FAULTS = {"early_stop": 0.02, "role_leak": 0.02}
PLANTED = ("dead_end", "dead_end")      # (fault, the class it raises)
LOCAL_RISE, BROAD_RISE = 0.60, 0.05

_dataset: Dataset | None = None


def demo_dataset() -> Dataset:
    global _dataset
    if _dataset is None:
        _dataset = load_dataset(ROOT / "personas", ROOT / "goals")
    return _dataset


class ByGoal:
    """TripDesk with other faults in one goal's sessions: a runtime change that breaks one goal."""

    def __init__(self, faults: dict[str, float], goal: str, goal_faults: dict[str, float], fault_seed: int):
        from simrun.examples.tripdesk import TripDesk

        self.goal = goal
        self.desks = {"a": TripDesk(faults=faults, fault_seed=fault_seed),
                      "b": TripDesk(faults=goal_faults, fault_seed=fault_seed)}

    def health(self) -> dict:
        return self.desks["a"].health()

    def start(self, request: dict) -> dict:
        side = "b" if request.get("goal") == self.goal else "a"
        return {"session": f"{side}:{self.desks[side].start(request)['session']}"}

    def _call(self, method: str, session: str, *args):
        side, _, sid = session.partition(":")
        return getattr(self.desks[side], method)(sid, *args)

    def turn(self, session: str, request: dict) -> dict:
        return self._call("turn", session, request)

    def state(self, session: str) -> dict:
        return self._call("state", session)

    def audit(self, session: str) -> dict:
        return self._call("audit", session)

    def close(self, session: str) -> dict:
        return self._call("close", session)


@dataclass(frozen=True)
class DemoRun:
    seed: int
    conversations: tuple[tuple[str, str, int, dict[str, Counts]], ...]   # persona, goal, repetition, counts

    def summary(self, repetitions: int) -> RunSummary:
        return summary_from_counts(f"seed-{self.seed}", demo_dataset().hash, repetitions,
                                   [c for c in self.conversations if c[2] < repetitions])


def demo_run(seed: int, repetitions: int, faults: dict[str, float] | None = None,
             goal_faults: tuple[str, dict[str, float]] | None = None, *, runtime_seed: int | None = None) -> DemoRun:
    """One run of the demo matrix in process, summarised as the store would summarise it. `seed` is
    the run's (the scripted user's and every conversation's); TripDesk's faults are seeded by
    `runtime_seed`, the run's own seed unless given (a runtime whose randomness the run does not pin)."""
    from simrun.examples.tripdesk import TripDesk
    from simrun.simulator import PythonRuntime, ScriptedUser, converse, matrix

    faults = RUNTIME_FAULTS if faults is None else faults
    runtime_seed = seed if runtime_seed is None else runtime_seed
    runtime = (ByGoal(faults, *goal_faults, runtime_seed) if goal_faults
               else TripDesk(faults=faults, fault_seed=runtime_seed))
    user = ScriptedUser(faults=USER_FAULTS, fault_seed=seed)
    adapter = PythonRuntime(runtime)

    async def go():
        return [await converse(cell, user, adapter) for cell in matrix(demo_dataset(), repetitions, seed)]

    return DemoRun(seed, tuple((c.cell.persona.id, c.cell.goal.id, c.cell.repetition, scorecard_counts(c.scorecard))
                               for c in asyncio.run(go())))


def wilson(k: int, n: int) -> str:
    """The 95% Wilson interval of k in n, as the benchmarks print it: "3.1%–7.4%"."""
    ci = st.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return f"{100 * ci.low:.1f}%–{100 * ci.high:.1f}%"
