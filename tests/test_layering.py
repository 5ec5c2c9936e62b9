"""The layers of simrun, and the one way imports run between them (docs/architecture.md).

    simrun._errors, _settings, ...   the base layer: the modules of `simrun` itself that every
                                     layer shares (errors, settings, protocol, transcript, secrets,
                                     money, labels, untrusted text, input files, ...)
    simrun.scoring.dataset      personas and goals
    simrun.scoring.checks       the judge
    simrun.scoring.store        DuckDB
    simrun.scoring.gate         verdicts
    simrun.scoring.pages        the report and the dashboard
    simrun.simulator (its own modules, adapters, users)   runs conversations
    simrun.simulator.cluster    the Ray executor
    simrun.simulator.executors  the one way into it (Ray is optional)
    simrun._api                 the Python API's functions: a run, a gate, a report, ...
    simrun                      the public API (the package's `__init__`: its exports, and
                                `simrun.text`, the words its records are shown in)
    simrun.cli                  the command line, a thin shell over the public API: it imports
                                `simrun`'s exported names alone (`from simrun import X`, X in
                                `simrun.__all__`), and its own modules
    simrun.examples             the reference runtimes

A layer imports itself and the layers listed for it in MAY_IMPORT, and nothing else. Every
import counts, whether at the top of a module, inside a function or under TYPE_CHECKING: an
import moved into a function still makes a circle, it only hides it until run time. The
reference runtimes import nothing of simrun's: they speak the protocol as an outside runtime
would. A module holds one concept, whatever its length: no line limit splits one in two.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The base layer: the modules of `simrun` itself, beneath every other layer (they import each other).
BASE = tuple(f"simrun.{name}" for name in (
    "_version", "_errors", "_settings", "_protocol", "_transcript", "_secrets", "_money", "_labels",
    "_untrusted_text", "_storable", "_input_files", "_field_errors", "_classes", "_commits", "_writing"))
SCORING = ("simrun.scoring", "simrun.scoring.dataset", "simrun.scoring.checks", "simrun.scoring.store",
           "simrun.scoring.gate", "simrun.scoring.pages")
SIMULATOR = ("simrun.simulator", "simrun.simulator.cluster", "simrun.simulator.executors")
MAY_IMPORT = {
    **{module: BASE for module in BASE},
    "simrun.scoring": BASE,
    "simrun.scoring.dataset": (*BASE, *SCORING[:1]),
    "simrun.scoring.checks": (*BASE, *SCORING[:2]),
    "simrun.scoring.store": (*BASE, *SCORING[:3]),
    "simrun.scoring.gate": (*BASE, *SCORING[:4]),
    "simrun.scoring.pages": (*BASE, *SCORING[:5]),
    "simrun.simulator": (*BASE, *SCORING, "simrun.examples"),   # check-user measures a user on TripDesk
    "simrun.simulator.cluster": (*BASE, *SCORING, *SIMULATOR[:1]),
    "simrun.simulator.executors": (*BASE, *SCORING, *SIMULATOR[:2]),
    "simrun._api": (*BASE, *SCORING, *SIMULATOR),
    "simrun": (*BASE, *SCORING, *SIMULATOR, "simrun._api"),
    "simrun.cli": ("simrun",),
    "simrun.examples": (),
}


@functools.cache        # read for every edge (package_of): one walk of the tree per root, not thousands
def modules(root: Path, top: str = "simrun") -> dict[str, Path]:
    """Every module of the `simrun` package (or of another folder of the clone, `top`), by name."""
    found = {}
    for folder, _, files in sorted(os.walk(root / top)):
        for name in sorted(f for f in files if f.endswith(".py")):
            path = Path(folder) / name
            parts = list(path.relative_to(root).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(root: Path, top: str = "simrun") -> dict[str, dict[str, int]]:
    """module -> {project module it imports: line}, every import statement anywhere in it. A name
    imported from a package counts as an import of the package (its `__init__`, which imports the
    module that holds the name). `top`: the folder whose modules are read (`benchmarks`, say)."""
    known = modules(root, top)

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
                # `from simrun.scoring.gate import _stats` imports the module simrun.scoring.gate._stats.
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


def package_of(module: str, root: Path) -> str:
    return module if modules(root)[module].name == "__init__.py" else module.rpartition(".")[0]


def around_the_exports(edges: dict[str, dict[str, int]], root: Path) -> list[str]:
    """Every import of another package's private module (`_name`), as 'file:line module -> module':
    a package is reached through the names its `__init__` exports. A package's own subpackages
    reach its private modules: they are inside it (so every layer reaches the base layer, the
    private modules of `simrun` itself)."""
    found = []
    for module, targets in sorted(edges.items()):
        here = package_of(module, root)
        for target, line in sorted(targets.items()):
            there = package_of(target, root)
            if (not target.rpartition(".")[2].startswith("_") or here == there or here.startswith(there + ".")
                    or (target == there and there.rpartition(".")[0] == here)):   # its own subpackage
                continue
            path = modules(root)[module].relative_to(root)
            found.append(f"{path}:{line} {module} -> {target} (a private module of {there})")
    return found


def test_no_module_imports_in_a_circle():
    assert circles(imports(ROOT)) == []


def test_every_import_runs_the_allowed_way():
    assert wrong_way(imports(ROOT), ROOT) == []


def test_no_module_reaches_into_another_package_s_private_modules():
    assert around_the_exports(imports(ROOT), ROOT) == []


def test_a_planted_import_of_another_package_s_private_module_is_found(tmp_path):
    root = plant(tmp_path, {
        "simrun/__init__.py": "",
        "simrun/scoring/__init__.py": "",
        "simrun/scoring/store/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from simrun.scoring.store._database import Store\n",
        "simrun/scoring/store/_database.py": "from simrun.scoring.store._rows import Row\n",   # its own package's
        "simrun/scoring/store/_rows.py": "",
        "simrun/simulator/__init__.py": "",
        "simrun/simulator/_runner.py": "from simrun.scoring.store import Store\n"
                                       "from simrun.scoring.store._database import Store as Again\n",
    })
    assert around_the_exports(imports(root), root) == [
        "simrun/simulator/_runner.py:2 simrun.simulator._runner -> simrun.scoring.store._database "
        "(a private module of simrun.scoring.store)"]


def test_every_module_belongs_to_a_layer():
    assert all(layer(module) for module in modules(ROOT))


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_planted_circle_is_found_even_through_a_function_and_type_checking(tmp_path):
    root = plant(tmp_path, {
        "simrun/__init__.py": "",
        "simrun/scoring/__init__.py": "",
        "simrun/scoring/store/__init__.py": "",
        "simrun/scoring/store/a.py": "from simrun.scoring.store import b\n",
        "simrun/scoring/store/b.py": "def later():\n    from simrun.scoring.store.c import thing\n",
        "simrun/scoring/store/c.py": ("from typing import TYPE_CHECKING\n"
                                      "if TYPE_CHECKING:\n    import simrun.scoring.store.a\n"),
        "simrun/scoring/store/d.py": "import simrun.scoring.store.a\n",   # imports into the circle, not part of it
    })
    assert circles(imports(root)) == [["simrun.scoring.store.a", "simrun.scoring.store.b", "simrun.scoring.store.c"]]


def test_a_module_that_imports_its_own_package_is_a_circle(tmp_path):
    root = plant(tmp_path, {
        "simrun/examples/tripdesk/__init__.py": "from simrun.examples.tripdesk.runtime import TripDesk\nV = '1'\n",
        "simrun/examples/tripdesk/runtime.py": "from simrun.examples.tripdesk import V\n"})
    assert circles(imports(root)) == [["simrun.examples.tripdesk", "simrun.examples.tripdesk.runtime"]]


def test_a_planted_import_against_the_layers_is_found(tmp_path):
    root = plant(tmp_path, {
        "simrun/__init__.py": "",
        "simrun/scoring/__init__.py": "",
        "simrun/scoring/checks/__init__.py": "",
        "simrun/scoring/checks/judge.py": ("import simrun._errors\n"
                                           "from simrun.scoring.store._database import Store\n"),
        "simrun/_errors.py": "",
        "simrun/scoring/store/__init__.py": "",
        # the store may use the judge
        "simrun/scoring/store/_database.py": "from simrun.scoring.checks import judge\n",
        "simrun/simulator/__init__.py": "",
        "simrun/simulator/_runner.py": "def run():\n    from simrun.cli._main import app\n",
        "simrun/cli/__init__.py": "",
        "simrun/cli/_main.py": "import simrun.simulator._runner\n",
        "simrun/_api.py": "import simrun.cli._main\n",
    })
    assert wrong_way(imports(root), root) == [
        "simrun/_api.py:1 simrun._api -> simrun.cli._main (simrun._api may not import simrun.cli)",
        # the command line stands on `simrun`'s exports alone, never on a layer beneath them
        "simrun/cli/_main.py:1 simrun.cli._main -> simrun.simulator._runner (simrun.cli may not import "
        "simrun.simulator)",
        "simrun/scoring/checks/judge.py:2 simrun.scoring.checks.judge -> simrun.scoring.store._database "
        "(simrun.scoring.checks may not import simrun.scoring.store)",
        "simrun/simulator/_runner.py:2 simrun.simulator._runner -> simrun.cli._main "
        "(simrun.simulator may not import simrun.cli)"]


def test_the_card_folders_point_into_the_package():
    """simulator/ and scoring/ stay at the top of the clone, where the card puts them, as links to
    the package's own folders: one file, one module name (`simrun.scoring...`), one path for every
    tool."""
    for name in ("simulator", "scoring"):
        link = ROOT / name
        assert link.is_symlink() and link.resolve() == (ROOT / "simrun" / name).resolve()
        assert not (ROOT / "simrun" / name).is_symlink()
    assert "simrun.scoring.checks._scorer" in modules(ROOT) and "simrun.cli._main" in modules(ROOT)


def test_every_package_says_what_it_is_for_and_what_it_may_import():
    packages = [p for p in modules(ROOT) if modules(ROOT)[p].name == "__init__.py"]
    unsaid = [p for p in packages if not any(line.strip().startswith("Imports:") for line in (
        ast.get_docstring(ast.parse(modules(ROOT)[p].read_text())) or "").splitlines())]
    assert packages and unsaid == [], f"packages whose __init__ docstring does not say what they may import: {unsaid}"


def loaded_after(*names: str) -> set[str]:
    code = f"import sys, {', '.join(names)}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("entry", ["simrun.cli._main", "simrun.simulator.cluster._worker"])
def test_the_command_line_and_a_worker_start_without_the_model_sdks_or_scipy(entry):
    """Importing them costs seconds (openai and anthropic about 3 s, scipy.stats 1 s, measured
    with `python -X importtime`), which `simrun --help`, `simrun runs` and every Ray worker would
    pay: each is imported where it is first needed."""
    loaded = loaded_after(entry)
    assert sorted({m.split(".")[0] for m in loaded} & {"openai", "anthropic", "scipy"}) == []


def below_the_public_api(root: Path) -> list[str]:
    """Every import in simrun/cli of something of simrun other than a name `simrun` exports (or
    the command line's own modules), as 'file:line what': `from simrun import X` with X in
    `simrun.__all__`, and of a module so exported (`simrun.text`), only the names in its own
    `__all__`. What `simrun` exports is read from its source, as every other check here reads
    the files, not from the package imported."""
    exported = _all_of(root / "simrun" / "__init__.py")
    public_modules = {name: _all_of(root / "simrun" / f"{name}.py") for name in exported
                      if (root / "simrun" / f"{name}.py").is_file()}
    found = []
    for module, path in sorted(modules(root).items()):
        if not module.startswith("simrun.cli"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}
        where = path.relative_to(root)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == "simrun":
                    for a in node.names:
                        if a.name not in exported:
                            found.append(f"{where}:{node.lineno} from simrun import {a.name}")
                        elif a.name in public_modules:
                            aliases[a.asname or a.name] = a.name
                elif node.module.split(".")[0] == "simrun" and not node.module.startswith("simrun.cli"):
                    found.append(f"{where}:{node.lineno} from {node.module} import "
                                 f"{', '.join(a.name for a in node.names)}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "simrun" and not a.name.startswith("simrun.cli"):
                        found.append(f"{where}:{node.lineno} import {a.name}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr not in public_modules[aliases[node.value.id]]):
                found.append(f"{where}:{node.lineno} {aliases[node.value.id]}.{node.attr}")
    return found


def _all_of(path: Path) -> set[str]:
    """The names a module's `__all__` lists, read from its source."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def test_the_command_line_imports_nothing_of_simrun_but_its_public_names():
    assert below_the_public_api(ROOT) == []


def test_a_planted_import_below_the_public_api_is_found(tmp_path):
    root = plant(tmp_path, {
        "simrun/__init__.py": "from simrun import text\nfrom simrun._api import run\n__all__ = ['run', 'text']\n",
        "simrun/text.py": "__all__ = ['usd']\ndef usd(x): ...\ndef hidden(x): ...\n",
        "simrun/_api/__init__.py": "",
        "simrun/_errors.py": "",
        "simrun/cli/__init__.py": "from simrun.cli._main import app\n",
        "simrun/cli/_main.py": ("from simrun import run, text\n"
                                "from simrun import gate\n"
                                "from simrun._errors import ConfigError\n"
                                "def later():\n    import simrun.scoring.store\n"
                                "print(text.usd(1), text.hidden(2))\n"),
    })
    assert below_the_public_api(root) == [
        "simrun/cli/_main.py:2 from simrun import gate",
        "simrun/cli/_main.py:3 from simrun._errors import ConfigError",
        "simrun/cli/_main.py:5 import simrun.scoring.store",
        "simrun/cli/_main.py:6 text.hidden"]
