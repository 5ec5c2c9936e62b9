"""The layers of simrun, and the one way imports run between them (docs/architecture.md).

    scoring (its own modules)   the shared vocabulary: errors, transcript, protocol, secrets, input_files
    scoring.dataset             personas and goals
    scoring.checks              the judge
    scoring.store               DuckDB
    scoring.gate                verdicts
    scoring.pages               the report and the dashboard
    simulator (its own modules, adapters, users)   runs conversations
    simulator.cluster           the Ray executor
    simulator.executors         the one way into it (Ray is optional)
    simulator.cli               the command line

A layer imports itself and the layers listed for it in MAY_IMPORT, and nothing else. Every
import counts, whether at the top of a module, inside a function or under TYPE_CHECKING: an
import moved into a function still makes a circle, it only hides it until run time. The
reference runtimes import nothing of simrun's: they speak the protocol as an outside runtime
would.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("scoring", "simulator", "tripdesk", "libdesk")
SCORING = ("scoring", "scoring.dataset", "scoring.checks", "scoring.store", "scoring.gate", "scoring.pages")
MAY_IMPORT = {
    "scoring": (),
    "scoring.dataset": SCORING[:1],
    "scoring.checks": SCORING[:2],
    "scoring.store": SCORING[:3],
    "scoring.gate": SCORING[:4],
    "scoring.pages": SCORING[:5],
    "simulator": (*SCORING, "tripdesk"),          # check-user measures a user on TripDesk
    "simulator.cluster": (*SCORING, "simulator"),
    "simulator.executors": (*SCORING, "simulator", "simulator.cluster"),
    "simulator.cli": (*SCORING, "simulator", "simulator.executors"),
    "tripdesk": (),
    "libdesk": (),
}
MAX_LINES = 400


def modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(root: Path, packages=PACKAGES) -> dict[str, dict[str, int]]:
    """module -> {project module it imports: line}, every import statement anywhere in it."""
    known = modules(root, packages)

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, dict[str, int]] = {}
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [owner(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from scoring.gate import stats` imports the module scoring.gate.stats.
                targets = [owner(f"{node.module}.{a.name}") for a in node.names]
            else:
                continue
            for target in targets:
                if target is not None and target != module:
                    edges.setdefault(module, {}).setdefault(target, node.lineno)
    return edges


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import circles: each strongly connected set of modules (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def layer(module: str) -> str:
    return max((name for name in MAY_IMPORT if module == name or module.startswith(name + ".")), key=len)


def wrong_way(edges: dict[str, dict[str, int]], root: Path) -> list[str]:
    """Every import against the allowed direction, as 'file:line module -> module'."""
    found = []
    for module, targets in sorted(edges.items()):
        for target, line in sorted(targets.items()):
            here, there = layer(module), layer(target)
            if there != here and there not in MAY_IMPORT[here]:
                path = modules(root)[module].relative_to(root)
                found.append(f"{path}:{line} {module} -> {target} ({here} may not import {there})")
    return found


def test_no_module_imports_in_a_circle():
    assert circles(imports(ROOT)) == []


def test_every_import_runs_the_allowed_way():
    assert wrong_way(imports(ROOT), ROOT) == []


def test_every_module_belongs_to_a_layer():
    assert all(layer(module) for module in modules(ROOT))


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in PACKAGES:
        (root / package).mkdir(exist_ok=True)
    return root


def test_a_planted_circle_is_found_even_through_a_function_and_type_checking(tmp_path):
    root = plant(tmp_path, {
        "scoring/__init__.py": "",
        "scoring/store/__init__.py": "",
        "scoring/store/a.py": "from scoring.store import b\n",
        "scoring/store/b.py": "def later():\n    from scoring.store.c import thing\n",
        "scoring/store/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import scoring.store.a\n",
        "scoring/store/d.py": "import scoring.store.a\n",        # imports into the circle, not part of it
    })
    assert circles(imports(root)) == [["scoring.store.a", "scoring.store.b", "scoring.store.c"]]


def test_a_module_that_imports_its_own_package_is_a_circle(tmp_path):
    root = plant(tmp_path, {"tripdesk/__init__.py": "from tripdesk.runtime import TripDesk\n__version__ = '1'\n",
                            "tripdesk/runtime.py": "from tripdesk import __version__\n"})
    assert circles(imports(root)) == [["tripdesk", "tripdesk.runtime"]]


def test_a_planted_import_against_the_layers_is_found(tmp_path):
    root = plant(tmp_path, {
        "scoring/__init__.py": "",
        "scoring/checks/__init__.py": "",
        "scoring/checks/judge.py": "import scoring.errors\nfrom scoring.store.database import Store\n",
        "scoring/errors.py": "",
        "scoring/store/__init__.py": "",
        "scoring/store/database.py": "from scoring.checks import judge\n",   # allowed: the store may use the judge
        "simulator/__init__.py": "",
        "simulator/runner.py": "def run():\n    from simulator.cli.main import app\n",
        "simulator/cli/__init__.py": "",
        "simulator/cli/main.py": "import simulator.runner\n",
    })
    assert wrong_way(imports(root), root) == [
        "scoring/checks/judge.py:2 scoring.checks.judge -> scoring.store.database "
        "(scoring.checks may not import scoring.store)",
        "simulator/runner.py:2 simulator.runner -> simulator.cli.main (simulator may not import simulator.cli)"]


def test_every_package_says_what_it_is_for_and_what_it_may_import():
    packages = [p for p in modules(ROOT) if modules(ROOT)[p].name == "__init__.py"]
    unsaid = [p for p in packages if not any(line.strip().startswith("Imports:") for line in (
        ast.get_docstring(ast.parse(modules(ROOT)[p].read_text())) or "").splitlines())]
    assert packages and unsaid == [], f"packages whose __init__ docstring does not say what they may import: {unsaid}"


def test_no_module_is_over_400_lines():
    """A module past 400 lines is usually two concepts (docs/architecture.md)."""
    sources = [*modules(ROOT).values(), *(ROOT / "benchmarks").glob("*.py")]
    long = {str(p.relative_to(ROOT)): n for p in sources if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def loaded_after(*names: str) -> set[str]:
    code = f"import sys, {', '.join(names)}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_the_judge_imports_without_the_simulator_the_store_the_gate_or_the_pages():
    """So that rescore, import and the workers of a cluster can score without the rest, and a
    transcript scores the same wherever it is scored."""
    loaded = loaded_after("scoring.checks.scorer", "scoring.dataset.files")
    assert sorted(m for m in loaded if m.split(".")[0] == "simulator"
                  or m.startswith(("scoring.store", "scoring.gate", "scoring.pages"))) == []


def test_the_store_gate_and_pages_import_without_the_simulator():
    loaded = loaded_after("scoring.store.rescore", "scoring.store.bundle", "scoring.store.merge",
                          "scoring.gate.compare", "scoring.gate.baseline", "scoring.pages.report")
    assert sorted(m for m in loaded if m.split(".")[0] == "simulator") == []


@pytest.mark.parametrize("entry", ["simulator.cli.main", "simulator.cluster.worker"])
def test_the_command_line_and_a_worker_start_without_the_model_sdks_or_scipy(entry):
    """Importing them costs seconds (openai and anthropic about 3 s, scipy.stats 1 s, measured
    with `python -X importtime`), which `simrun --help`, `simrun runs` and every Ray worker would
    pay: each is imported where it is first needed."""
    loaded = loaded_after(entry)
    assert sorted({m.split(".")[0] for m in loaded} & {"openai", "anthropic", "scipy"}) == []
