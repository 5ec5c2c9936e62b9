"""Harness overhead: turns per second with the scripted user and the in-process runtime.

Prints, for the bundled demo matrix: turns per second without the store and with it (DuckDB
writes included), and the share of wall time spent outside the runtime's own calls. Figures
are ratios within one run where possible, since the machine's speed varies.

    .venv/bin/python benchmarks/harness.py [--repetitions N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scoring.store.database import Store  # noqa: E402
from scoring.dataset.goal_sql import forget_answers  # noqa: E402
from simulator import PythonRuntime, ScriptedUser, converse, eventloop, load_dataset, matrix, run_matrix  # noqa: E402
from tripdesk import TripDesk  # noqa: E402


async def in_memory(dataset, repetitions):
    runtime, user = PythonRuntime(TripDesk()), ScriptedUser()
    turns = runtime_ms = 0.0
    for cell in matrix(dataset, repetitions, seed=1):
        conv = await converse(cell, user, runtime)
        turns += len(conv.transcript.turns)
        runtime_ms += sum(t.latency_ms for t in conv.transcript.turns)
    return turns, runtime_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=30)   # 2,100 conversations: seconds, not noise
    args = parser.parse_args()
    dataset = load_dataset(ROOT / "personas", ROOT / "goals")

    t0 = time.perf_counter()
    turns, runtime_ms = eventloop.run(in_memory(dataset, args.repetitions))
    wall = time.perf_counter() - t0

    forget_answers()   # the same seeds give the same stores: start the second run cold
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "b.duckdb") as store:
        t1 = time.perf_counter()
        eventloop.run(run_matrix(dataset, PythonRuntime(TripDesk()), ScriptedUser(), store,
                               repetitions=args.repetitions, seed=1, budget=Decimal(0)))
        stored_wall = time.perf_counter() - t1

    conversations = len(dataset.personas) * len(dataset.goals) * args.repetitions
    print(f"conversations: {conversations}, turns: {int(turns)}")
    print(f"turns/s, loop + scoring, no store:  {turns / wall:8.0f}")
    print(f"turns/s, with DuckDB writes:        {turns / stored_wall:8.0f}")
    print(f"share of wall time outside the runtime's calls (no store): {1 - runtime_ms / 1000 / wall:.1%}")
    print(f"store overhead: writes take {stored_wall / wall:.2f}x the time of the loop alone")


if __name__ == "__main__":
    main()
