"""Harness overhead: turns per second with the scripted user and the in-process runtime, and the
harness's own CPU per turn, the runtime's left out.

Prints, for the bundled demo matrix: turns per second without the store and with it (DuckDB
writes included); and the CPU per turn, split between the reference runtime (TripDesk's own
methods, timed as they run: they are plain functions on this thread) and the harness (all the
rest: the scripted user, the conversation loop, the adapter's checks on each answer, the
per-turn checks and the scoring, and with the store the writer thread's encoding and writes).
Figures are ratios within one run where possible, since the machine's speed varies.

    .venv/bin/python benchmarks/harness.py [--repetitions N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simrun.examples.tripdesk import TripDesk  # noqa: E402
from simrun.scoring.dataset._goal_sql import forget_answers  # noqa: E402
from simrun.scoring.store._database import Store  # noqa: E402
from simrun.simulator import PythonRuntime, ScriptedUser, converse, load_dataset, matrix, run_matrix  # noqa: E402
from simrun.simulator import _eventloop as eventloop  # noqa: E402


class Metered:
    """The reference runtime, with the CPU time its own methods take (this thread's clock)."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.cpu_s = 0.0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.runtime, name)
        if not callable(method):
            return method

        def timed(*args: Any) -> Any:
            started = time.thread_time()
            try:
                return method(*args)
            finally:
                self.cpu_s += time.thread_time() - started
        # Kept: the meter's own cost (a lookup that misses, a function built) would otherwise be
        # paid on every call, outside the runtime's clock, and counted as the harness's.
        self.__dict__[name] = timed
        return timed


async def in_memory(dataset, repetitions, runtime):
    user = ScriptedUser()
    turns = 0
    for cell in matrix(dataset, repetitions, seed=1):
        conv = await converse(cell, user, runtime)
        turns += len(conv.transcript.turns)
    return turns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=30)   # 2,100 conversations: seconds, not noise
    args = parser.parse_args()
    dataset = load_dataset(ROOT / "personas", ROOT / "goals")
    import pandas  # noqa: F401  (the store's first write imports it: once per run, not per turn)

    tripdesk = Metered(TripDesk())
    t0, cpu0 = time.perf_counter(), time.thread_time()
    turns = eventloop.run(in_memory(dataset, args.repetitions, PythonRuntime(tripdesk)))
    wall, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
    runtime_cpu = tripdesk.cpu_s

    forget_answers()   # the same seeds give the same stores: start the second run cold
    stored_tripdesk = Metered(TripDesk())
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "b.duckdb") as store:
        t1, process1 = time.perf_counter(), time.process_time()
        eventloop.run(run_matrix(dataset, PythonRuntime(stored_tripdesk), ScriptedUser(), store,
                                 repetitions=args.repetitions, seed=1, budget=Decimal(0)))
        stored_wall, stored_cpu = time.perf_counter() - t1, time.process_time() - process1

    per_turn = lambda seconds: 1000 * seconds / turns   # noqa: E731
    conversations = len(dataset.personas) * len(dataset.goals) * args.repetitions
    print(f"conversations: {conversations}, turns: {int(turns)}")
    print(f"turns/s, loop + scoring, no store:  {turns / wall:8.0f}")
    print(f"turns/s, with DuckDB writes:        {turns / stored_wall:8.0f}")
    print(f"store overhead: writes take {stored_wall / wall:.2f}x the time of the loop alone")
    print(f"CPU ms per turn, no store:   runtime {per_turn(runtime_cpu):.3f}, "
          f"harness {per_turn(cpu - runtime_cpu):.3f}")
    print(f"CPU ms per turn, with store: runtime {per_turn(stored_tripdesk.cpu_s):.3f}, harness "
          f"{per_turn(stored_cpu - stored_tripdesk.cpu_s):.3f} (the writer thread's included)")


if __name__ == "__main__":
    main()
