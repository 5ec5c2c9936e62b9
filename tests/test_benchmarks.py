"""The benchmark scripts still run and print their figures, at a tiny size (their figures are
claims in benchmarks/README.md; a script broken by a schema change would leave them unbacked).
What the figures are is measured by running the scripts, not here: tests assert no timings."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_layering import circles, imports

ROOT = Path(__file__).resolve().parent.parent

SMALL = {
    "harness.py": (["--repetitions", "1"], r"turns/s, with DuckDB writes:\s+\d+"),
    "memory.py": (["--conversations", "140"], r"peak RSS of the simrun process: \d+ MB"),
    "report_scale.py": (["--turns", "3000"], r"report built in [\d.]+ s; [\d.]+ MB"),
    "dashboard_scale.py": (["--runs", "8"], r"page: [\d.]+ MB\nbuilt in [\d.]+ s"),
    "throughput.py": (["--latency", "0.05", "--concurrency", "4", "--waves", "1"],
                      r"\n\s+4\s+\d+\s+[\d,]+\s+[\d,]+\s+[\d.]+%"),
    "prompt_caching.py": (["--repetitions", "1"], r"\d+%"),
    "http_clients.py": (["--in-flight", "4", "--pairs", "5", "--rounds", "1"],
                        r"http1\s+\d+\s+[\d.]+ (.|\n)+aiohttp\s+\d+\s+[\d.]+ (.|\n)+httpx\s+\d+\s+[\d.]+ "),
    "call_cpu.py": (["--latency", "0.005", "--in-flight", "4", "--waves", "1"],
                    r"CPU ms per model call: harness [\d.]+ (.|\n)+model client\s+[\d.]+%"),
    # The openai SDK's own client, kept in benchmarks/sdk_client.py for the comparison.
    "call_cpu.py --client sdk": (["--latency", "0.005", "--in-flight", "4", "--waves", "1", "--client", "sdk"],
                                 r"CPU ms per model call: harness [\d.]+ (.|\n)+model client\s+[\d.]+%"),
    # This tree against HEAD, checked out into a temporary git worktree (a copy that is no git
    # work tree says it skipped, and why).
    "against.py": (["--commit", "HEAD", "--pairs", "1", "--", "call_cpu.py", "--latency", "0.005", "--in-flight", "4",
                    "--waves", "1"],
                   r"harness\s+median \w+ [\d.]+, this tree [\d.]+; ratio [\d.]+|skipped: .+ is not a git work tree"),
    "gate_runs.py": (["--pairs", "2", "--rho", "0.02", "--modes", "runs", "--synthetic", "--workers", "1",
                      "--permutations", "200"], r"baseline 3 runs: A/A failed \d+/2 (.|\n)+\+5 pts dead_end caught"),
    "trace_receiver.py": (["--turns", "20", "--flood", "20000"],
                          r"ratio, with / without: [\d.]+x(.|\n)+after: HTTP 413; longest stall of the loop [\d.]+ s"),
    "gate_sequential.py": (["--parts", "aa,local,broad", "--pairs", "2", "--power-pairs", "2", "--pool-normal", "4",
                            "--pool-changed", "2", "--baseline-reps", "2", "--max-rounds", "2", "--secant-steps", "1",
                            "--workers", "1", "--permutations", "1000", "--pools", ""],
                           r"aa: 2 pairs; failed \d+ (.|\n)+broad: 2 pairs; failed \d+"),
    # The loop valgrind counts, without valgrind (which CI's machine has not): the count is two
    # runs of it, subtracted.
    "turn_instructions.py": (["--inner", "1"], r"^turns \d+$"),
    "real_model.py": (["--fake"], r"ledger: runs.spent \$[\d.]+; sum of \d+ stored calls \$[\d.]+; equal"),
    # The Ray tests' cluster (`ray_cluster`), never one another worker (or the machine) runs.
    "ray_scaling.py": (["--rounds", "1", "--repetitions", "1", "--in-flight", "4", "--waves", "1", "--latency", "0.005",
                        "--ray-address", "{ray_cluster}"],
                       r"harness ratio, Ray / in-process \(medians\): [\d.]+x(.|\n)+in-process [\d.]+%, Ray [\d.]+%"),
}


# The Ray benchmark runs on the xdist worker of the Ray tests, in their cluster: one cluster, and
# started once.
@pytest.mark.parametrize("script", [pytest.param(s, marks=pytest.mark.xdist_group("ray")) if "ray" in s else s
                                    for s in SMALL])
def test_each_benchmark_runs_and_prints_its_figures(script, request):
    args, figure = SMALL[script]
    if "{ray_cluster}" in args:
        args = [request.getfixturevalue("ray_cluster") if a == "{ray_cluster}" else a for a in args]
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script.split()[0]), *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(figure, done.stdout), done.stdout


def scripts() -> set[str]:
    """The benchmark scripts; the other modules of benchmarks/ are what scripts import (sdk_client.py,
    the comparison client call_cpu.py loads; gate_demo.py, what the gate benchmarks share)."""
    return {p.name for p in (ROOT / "benchmarks").glob("*.py") if "__main__" in p.read_text()}


def test_every_benchmark_script_is_covered():
    # gate_calibration.py has its own test (tests/test_gate_calibration.py).
    assert scripts() - {"gate_calibration.py"} == {name.split()[0] for name in SMALL}
    assert "call_cpu.py --client sdk" in SMALL
    assert {"gate_demo.py", "sdk_client.py"} <= {p.name for p in (ROOT / "benchmarks").glob("*.py")} - scripts()


def other_names(folder: Path) -> list[str]:
    """Every import of a benchmark module by a name other than `benchmarks.<name>` (a bare name found
    through a sys.path entry, or `__import__` / `import_module` of a string), as 'file:line name':
    such an import gives a file a second module name, and hides an edge from the circle finder."""
    own = {p.stem for p in folder.glob("*.py")}
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                  and ast.unparse(node.func).split(".")[-1] in ("__import__", "import_module")):
                names = [str(node.args[0].value)]
            else:
                continue
            found += [f"{path.name}:{node.lineno} {name}" for name in names if name.split(".")[0] in own]
    return found


def test_the_benchmarks_import_one_another_by_one_name_and_in_no_circle():
    """A benchmark reaches another's code as `benchmarks.<name>`, and they import in no circle: what
    several share lives in one module they all import (gate_demo.py, for the gate's three). The
    circle finder is the layering test's, reading benchmarks/ instead of simrun/."""
    edges = imports(ROOT, top="benchmarks")
    assert {"benchmarks.gate_demo"} <= edges["benchmarks.gate_runs"].keys() & edges["benchmarks.gate_sequential"].keys()
    assert circles(edges) == []
    assert other_names(ROOT / "benchmarks") == []


def test_a_circle_or_a_second_name_among_benchmarks_is_found(tmp_path):
    """Control, on the shape the gate benchmarks had: calibration dispatching to the other two by
    __import__, which each imported calibration back (one of them by its bare name)."""
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "gate_calibration.py").write_text("def main():\n    from benchmarks import gate_runs\n"
                                                "    return __import__('gate_sequential').main()\n")
    (folder / "gate_runs.py").write_text("def rates():\n    from benchmarks.gate_calibration import demo_run\n")
    (folder / "gate_sequential.py").write_text("from gate_calibration import demo_run\n")
    assert circles(imports(tmp_path, top="benchmarks")) == [["benchmarks.gate_calibration", "benchmarks.gate_runs"]]
    assert other_names(folder) == ["gate_calibration.py:3 gate_sequential", "gate_sequential.py:1 gate_calibration"]


def test_the_readme_is_a_reference_to_every_script():
    """benchmarks/README.md says, for every script, what it measures, how to run it and its latest
    figures: a section whose heading names the script, a command in it, and a **Latest** line; the
    history of passes lives beside it, in benchmarks/HISTORY.md."""
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    sections = re.split(r"\n(?=#{2,3} )", readme)
    for script in sorted(scripts()):
        own = [s for s in sections if s.startswith("#") and f"`{script}`" in s.splitlines()[0]]
        assert own, f"benchmarks/README.md has no section headed by {script}"
        body = own[0]
        assert re.search(rf"benchmarks/{re.escape(script)}\b", body), f"no command for {script}"
        assert "**Latest**" in body and "FIGURES-" not in body, f"no latest figures for {script}"
        assert "**Measures**" in body or "measures" in body, f"{script}: what it measures is not said"
    # A pass log reads "before ... after" pass by pass; the reference keeps one latest sitting.
    assert not re.search(r"^#+ .*\bpass\b", readme, re.M), "a pass's history belongs in benchmarks/HISTORY.md"
    assert "](HISTORY.md)" in readme


def test_the_benchmark_history_lives_beside_the_scripts_and_the_changelog_keeps_releases():
    """The passes' record (before and after, pass by pass) is benchmarks/HISTORY.md; CHANGELOG.md
    holds what changed for users, release by release, and nothing else."""
    history = (ROOT / "benchmarks" / "HISTORY.md").read_text()
    assert history.startswith("# Benchmark history\n")
    assert len(re.findall(r"^### Issue 28, \w+ pass", history, re.M)) >= 4      # the passes, kept whole
    changelog = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## (.+)$", changelog, re.M)
    assert releases[0] == "Unreleased" and all(re.fullmatch(r"\d+\.\d+\.\d+", r) for r in releases[1:]), releases
    assert not re.search(r"^#+ (Benchmark history|.*\bpass\b)", changelog, re.M | re.I), "HISTORY.md keeps those"
