"""Memory: the peak RSS of a 20,000-conversation run (scripted user, in-process runtime, DuckDB).

It runs `simrun` as a user would, in a temporary copy of the demo project, and reads the child's
peak resident set size from the kernel (getrusage). Conversations are streamed to the store as
they finish; nothing about them stays in memory.

    .venv/bin/python benchmarks/memory.py [--conversations 20000]
"""

from __future__ import annotations

import argparse
import math
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CELLS = 7 * 10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=20_000)
    args = parser.parse_args()
    repetitions = math.ceil(args.conversations / CELLS)
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("personas", "goals"):
            shutil.copytree(ROOT / name, Path(tmp) / name)
        for name in ("simrun.toml", "budgets.toml"):
            shutil.copy(ROOT / name, Path(tmp) / name)
        started = time.perf_counter()
        proc = subprocess.run([str(Path(sys.executable).with_name("simrun")), "-n", str(repetitions)], cwd=tmp,
                              capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode not in (0, 1):
            sys.exit(proc.stderr)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"{CELLS * repetitions:,} conversations in {wall:.0f} s")
    print(f"peak RSS of the simrun process: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
