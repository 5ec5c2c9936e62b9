"""Instructions per turn of the demo's in-process loop, counted by valgrind: a figure the machine's
phase does not move.

CPU time on this shared machine moves by a fifth from one run to the next (the reference
runtime's own figure in `harness.py` reads 0.10 to 0.16 ms a turn for the same code), which hides
a change of a few percent. Instructions do not move: this script runs the loop of
`benchmarks/harness.py` (scripted user, in-process reference runtime, no store) under valgrind's
cachegrind twice, with one warm repetition only and with `--repetitions` more, and prints the
difference per turn: the harness's instructions and the runtime's together (compare two trees'
figures; the runtime's part is the same in both).

    .venv/bin/python benchmarks/turn_instructions.py [--repetitions 4]     # needs valgrind (Debian's)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def loop(repetitions: int) -> int:
    """One warm repetition, then `repetitions` more; the turns of the latter."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.harness import in_memory
    from simrun.examples.tripdesk import TripDesk
    from simrun.simulator import PythonRuntime, load_dataset
    from simrun.simulator import _eventloop as eventloop

    dataset = load_dataset(ROOT / "personas", ROOT / "goals")
    eventloop.run(in_memory(dataset, 1, PythonRuntime(TripDesk())))
    return eventloop.run(in_memory(dataset, repetitions, PythonRuntime(TripDesk()))) if repetitions else 0


def counted(repetitions: int) -> tuple[int, int]:
    """(instructions, turns) of `loop(repetitions)` in a process of its own, under cachegrind."""
    # A fixed hash seed: the same sets iterate in the same order, so the count is the same each time.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           sys.executable, __file__, "--inner", str(repetitions)],
                          capture_output=True, text=True, env=env, check=True)
    instructions = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    turns = re.search(r"^turns (\d+)$", done.stdout, re.M)
    if instructions is None or turns is None:
        raise SystemExit(f"valgrind said nothing countable:\n{done.stderr[-2000:]}")
    return int(instructions.group(1).replace(",", "")), int(turns.group(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=4)
    parser.add_argument("--inner", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner is not None:
        print(f"turns {loop(args.inner)}")
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    base, _ = counted(0)
    total, turns = counted(args.repetitions)
    print(f"{turns} turns ({args.repetitions} repetitions of the demo after a warm one): "
          f"{(total - base) / turns:,.0f} instructions a turn, harness and runtime")


if __name__ == "__main__":
    main()
