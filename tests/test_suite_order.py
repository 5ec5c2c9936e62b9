"""The suite's own scheduling and lanes (tests/conftest.py, tests/lanes.py): the modules it starts
first still exist, so that renaming one cannot quietly send its long tests back to the end of a
pytest-xdist run; and the fast lane (`pytest -m "not slow"`) is real: its marker registered, every
slow test it leaves out still a test, and tests of every folder of the suite kept in it."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import LONGEST_FIRST, ROOT
from tests.lanes import SLOW_MODULES, SLOW_TESTS, is_slow


def test_every_module_started_first_exists_once():
    missing = [module for module in LONGEST_FIRST if not (ROOT / module).is_file()]
    assert not missing, f"tests/conftest.py's LONGEST_FIRST names modules that are gone: {missing}"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def functions_of_tests(root: Path = ROOT) -> dict[str, list[str]]:
    """Every test module of the suite (as pytest ids its files) -> the test functions it defines."""
    found = {}
    for path in sorted((root / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found[str(path.relative_to(root))] = [node.name for node in tree.body if isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")]
    return found



def lane_problems(tests: dict[str, list[str]], slow_modules=SLOW_MODULES, slow_tests=SLOW_TESTS) -> list[str]:
    """What is wrong with the fast lane: a slow entry that names no module or test, a folder of the
    suite with no test left in the lane, or a lane that keeps under two thirds of the tests."""
    problems = [f"{m}: no such test module" for m in (*slow_modules, *slow_tests) if m not in tests]
    problems += [f"{m}::{t}: no such test" for m, names in slow_tests.items() if m in tests
                 for t in names if t not in tests[m]]
    fast = {m: [t for t in names if m not in slow_modules and t not in slow_tests.get(m, ())]
            for m, names in tests.items()}
    for folder in sorted({str(Path(m).parent) for m in tests}):
        if not any(fast[m] for m in tests if str(Path(m).parent) == folder):
            problems.append(f"{folder}: no test left in the fast lane")
    kept, every = sum(map(len, fast.values())), sum(map(len, tests.values()))
    if kept * 3 < every * 2:
        problems.append(f"the fast lane keeps {kept} of {every} test functions, under two thirds")
    return problems


def test_the_fast_lane_keeps_every_folder_and_names_only_real_tests():
    tests = functions_of_tests()
    assert len(tests) > 100 and lane_problems(tests) == []


def test_a_lane_that_leaves_a_folder_empty_or_names_a_gone_test_is_refused():
    """Control: the check above fails on an empty lane, an emptied folder and a renamed test."""
    tests = functions_of_tests()
    everything = {m: tuple(names) for m, names in tests.items()}
    assert "the fast lane keeps 0 of" in lane_problems(tests, (), everything)[-1]
    cluster = tuple(m for m in tests if m.startswith("tests/simulator/cluster/"))
    assert lane_problems(tests, (*SLOW_MODULES, *cluster)) == ["tests/simulator/cluster: no test left in the fast lane"]
    renamed = {**SLOW_TESTS, "tests/test_docs.py": ("test_the_site_builds_strictly",)}
    assert lane_problems(tests, SLOW_MODULES, renamed) == [
        "tests/test_docs.py::test_the_site_builds_strictly: no such test"]


def test_the_slow_marker_is_registered_and_an_unregistered_marker_is_an_error():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert any(marker.startswith("slow:") for marker in options["markers"])
    assert "--strict-markers" in options["addopts"].split()


def test_the_fast_lane_leaves_out_the_slow_tests_and_runs_the_rest():
    """Collected as `pytest -m "not slow"` collects: the slow docs builds left out, the rest kept."""
    module = "tests/test_docs.py"
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider",
                           "-m", "not slow", module], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    collected = {line.split("::")[1].split("[")[0] for line in done.stdout.splitlines() if line.startswith(module)}
    tests = functions_of_tests()[module]
    slow = {t for t in tests if is_slow(f"{module}::{t}")}
    assert slow and collected == set(tests) - slow and "deselected" in done.stdout
