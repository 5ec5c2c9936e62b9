"""A benchmark of this tree against a stated earlier commit, in one sitting: so that a wave's steps
add up in view.

Each step of a wave can measure itself as no worse than the one before and the wave still cost a
fifth (issue 48: `call_cpu.py` at 0.99 ms of harness CPU per model call two waves before, 1.19 ms
after). This script checks `--commit` out into a temporary git worktree (removed after), then runs
the same benchmark script, with the same arguments, alternately in that tree and in this one (the
commit's, this tree's, the commit's, ...: `--pairs` of each), each from its own folder with its
own sources first on the path (the reference runtime's server is started as a module of the
working folder). It prints every run's figures with the load average when it ended, then each
figure's median in both trees and their ratio (this tree / the commit's). This tree is the working
folder as it is, uncommitted changes included.

The figures are read from the script's output by regular expressions: `call_cpu.py`'s by default
(harness, event loop, writer thread: CPU ms per model call), any other's given with `--figure
NAME=REGEX` (one group, the number). A script the commit does not have, or whose arguments it does
not take, fails in the commit's tree, and the run stops there with its error.

    .venv/bin/python benchmarks/against.py --commit 289c8df [--pairs 5] -- call_cpu.py --waves 5
    .venv/bin/python benchmarks/against.py --commit HEAD~3 --figure 'NAME=REGEX' -- SCRIPT [ARGS]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FIGURES = {
    "call_cpu.py": {"harness": r"CPU ms per model call: harness ([\d.]+)", "event loop": r"\(event loop ([\d.]+)",
                    "writer thread": r"writer thread ([\d.]+)\)"},
}


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def one_run(tree: Path, script: list[str], figures: dict[str, str]) -> tuple[dict[str, float], str]:
    """The figures of one run of the script in `tree`, and the load average when it ended."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(tree / "benchmarks" / script[0]), *script[1:]], cwd=tree, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{script[0]} failed in {tree} (exit {done.returncode}):\n{done.stderr[-3000:]}")
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    found = {}
    for name, pattern in figures.items():
        match = re.search(pattern, done.stdout)
        if match is None:
            raise SystemExit(f"{script[0]} in {tree} printed no {name} ({pattern!r}):\n{done.stdout[-2000:]}")
        found[name] = float(match.group(1))
    return found, load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", required=True, help="the earlier commit (any name git knows)")
    parser.add_argument("--pairs", type=int, default=5, help="runs in each tree, alternately")
    parser.add_argument("--figure", action="append", default=[], metavar="NAME=REGEX",
                        help="a figure to read from the output (one group, the number); call_cpu.py's by default")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS]: a script of benchmarks/")
    args = parser.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        parser.error("name the benchmark after --, e.g. -- call_cpu.py --waves 5")
    figures = dict(f.split("=", 1) for f in args.figure) or FIGURES.get(script[0])
    if not figures:
        parser.error(f"say which figures of {script[0]} to compare: --figure NAME=REGEX")
    if shutil.which("git") is None or subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT,
                                                     capture_output=True).returncode != 0:
        print(f"skipped: {ROOT} is not a git work tree, so no earlier commit can be checked out")
        return
    commit = git("rev-parse", "--short", f"{args.commit}^{{commit}}")
    head = git("rev-parse", "--short", "HEAD")
    dirty = " with uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else ""
    with tempfile.TemporaryDirectory(prefix="simrun-against-") as folder:
        old = Path(folder) / commit
        git("worktree", "add", "--detach", str(old), commit)
        try:
            runs: dict[str, list[dict[str, float]]] = {commit: [], "this tree": []}
            for pair in range(args.pairs):
                for name, tree in ((commit, old), ("this tree", ROOT)):
                    found, load = one_run(tree, script, figures)
                    runs[name].append(found)
                    shown = ", ".join(f"{figure} {value:g}" for figure, value in found.items())
                    print(f"pair {pair + 1} {name:<10} {shown}; load average {load}", flush=True)
        finally:
            git("worktree", "remove", "--force", str(old))
    print(f"\n{' '.join(script)}: {args.pairs} alternate runs each, commit {commit} against this tree "
          f"(HEAD {head}{dirty})")
    for figure in figures:
        before = statistics.median(run[figure] for run in runs[commit])
        after = statistics.median(run[figure] for run in runs["this tree"])
        print(f"  {figure:<14} median {commit} {before:.3f}, this tree {after:.3f}; ratio {after / before:.3f}")


if __name__ == "__main__":
    main()
