"""No private attribute of an installed library (issue 43): simrun uses the libraries it depends on,
and the standard library, through what they document, so that a release that moves an internal
cannot break a run. The rule is held by a check over simrun's code (simrun/, simulator/, scoring/),
which fails when a module

- imports a private module or name of another package (`from ray._private.services import x`,
  `import opentelemetry.semconv._incubating`, `from httpx import _transports`,
  `importlib.import_module("ray._private.services")`);
- reads, sets or deletes an underscore attribute of another package's module or of anything
  reached from it (`ray._private`, `openai._base_client.x`, `json.decoder._x`, `client._transport = t`
  after `client = httpx.AsyncClient()`, as far as a name bound in the module leads);
- names an underscore attribute to getattr/setattr/delattr/hasattr on anything not its own
  (`getattr(response, "_protocol", None)`): an attribute no simrun module defines is another's;
- reads an underscore attribute, on any object, that no simrun module defines (`answer._headers`).

Dunder names (`__file__`, `__version__`) are Python's own protocol, not private. The few names the
standard library documents with an underscore are listed in DOCUMENTED. Tests and benchmarks may
read a private name where a check needs it (say where, in the test); product code may not.
"""

from __future__ import annotations

import ast
import builtins
import functools
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.fixtures.sources import product_sources

OWN = "simrun"
# Underscore names the standard library documents as its public interface.
DOCUMENTED = {
    "os._exit": "documented: exit without cleanup (a forked child, a worker that must not flush)",
    "sys._getframe": "documented (CPython): the caller's frame",
    "_thread": "documented: the low-level threading module",
}
CALLS_BY_NAME = ("getattr", "setattr", "delattr", "hasattr")


def _sources() -> list[Path]:
    return product_sources()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own(module: str | None, level: int = 0) -> bool:
    return level > 0 or module is None or module.split(".")[0] == OWN


def defined_names(trees: list[ast.Module]) -> set[str]:
    """Every underscore name simrun's own code defines: functions, classes, attributes it
    assigns (`self._x = ...`, `_x = ...`), parameters, and its own modules' names."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)     # a dataclass's or a model's field, given by name
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return {n for n in names if _private(n)}


def _root(node: ast.expr) -> ast.expr:
    """The expression an attribute chain starts from (`a` of `a.b().c[0].d`)."""
    while True:
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Await):
            node = node.value
        else:
            return node


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_dotted(node.func)}()"
    return node.id if isinstance(node, ast.Name) else "…"


def privates_used(source: str, where: str, own: set[str]) -> list[str]:
    """Every use in `source` of a private name of another package (see the module's docstring).
    `own`: the underscore names simrun's code defines (`defined_names`)."""
    tree = ast.parse(source)
    found: list[str] = []
    # Names bound to another package's module or object, and what they are (for the message).
    foreign: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _own(alias.name):
                    continue
                bad = [part for part in alias.name.split(".") if _private(part)]
                if bad and alias.name not in DOCUMENTED:
                    found.append(f"{where}:{node.lineno}: import {alias.name}")
                foreign[alias.asname or alias.name.split(".")[0]] = alias.asname and alias.name or alias.name.split(
                    ".")[0]
        elif isinstance(node, ast.ImportFrom):
            if _own(node.module, node.level) or node.module == "__future__":
                continue
            module = node.module or ""
            if any(_private(part) for part in module.split(".")) and module not in DOCUMENTED:
                found.append(f"{where}:{node.lineno}: from {module} import ...")
            for alias in node.names:
                full = f"{module}.{alias.name}"
                if _private(alias.name) and full not in DOCUMENTED:
                    found.append(f"{where}:{node.lineno}: from {module} import {alias.name}")
                foreign[alias.asname or alias.name] = full
    # Names assigned from an expression that starts at another package's name: `client = httpx.Client()`.
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            start = _root(node.value)
            if isinstance(start, ast.Name) and start.id in foreign:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id not in foreign:
                        foreign[target.id] = f"{foreign[start.id]} (as {target.id})"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            start = _root(node.value)
            name = start.id if isinstance(start, ast.Name) else None
            dotted = f"{_dotted(node.value)}.{node.attr}"
            if name in foreign:
                if dotted not in DOCUMENTED:
                    found.append(f"{where}:{node.lineno}: {dotted} ({_verb(node.ctx)} an attribute of "
                                 f"{foreign[name]})")
                continue
            if name in ("self", "cls", "super"):
                continue
            if node.attr not in own:
                found.append(f"{where}:{node.lineno}: {dotted} ({_verb(node.ctx)} an attribute no simrun "
                             "module defines)")
        elif (isinstance(node, ast.Call) and _dotted(node.func) in ("importlib.import_module", "import_module",
                                                                    "__import__")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and not _own(node.args[0].value) and any(_private(p) for p in node.args[0].value.split("."))
              and node.args[0].value not in DOCUMENTED):
            found.append(f"{where}:{node.lineno}: {_dotted(node.func)}({node.args[0].value!r})")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CALLS_BY_NAME
              and node.func.id not in foreign and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private(node.args[1].value)):
            target = _root(node.args[0])
            mine = isinstance(target, ast.Name) and target.id in ("self", "cls") and node.args[1].value in own
            if not mine:
                found.append(f"{where}:{node.lineno}: {node.func.id}({_dotted(node.args[0])}, "
                             f"{node.args[1].value!r})")
    return found


def _verb(ctx: ast.expr_context) -> str:
    return "sets" if isinstance(ctx, ast.Store) else "deletes" if isinstance(ctx, ast.Del) else "reads"


@functools.cache
def _own_names() -> set[str]:
    return defined_names([ast.parse(p.read_text(encoding="utf-8")) for p in _sources()])


def test_no_module_uses_a_private_name_of_another_package():
    sources = _sources()
    assert len(sources) > 100
    own = _own_names()
    found = [hit for path in sources
             for hit in privates_used(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)), own)]
    assert found == [], ("use the package's documented interface (or write the value as simrun's own, checked "
                         "against the package in a test):\n" + "\n".join(found))


@pytest.mark.parametrize("code", [
    "from ray._private.services import canonicalize_bootstrap_address_or_die\n",
    "import opentelemetry.semconv._incubating.attributes.gen_ai_attributes as gen_ai\n",
    "from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai\n",
    "from httpx import _transports\n",
    "import ray\naddress = ray._private.services.find_gcs_addresses()\n",
    "import json\nscan = json.decoder.JSONDecoder()._scan_once_of_simrun\n",
    "import httpx\nclient = httpx.AsyncClient()\nclient._transport = None\n",
    "import httpx\nclient = httpx.AsyncClient()\nclient._mounts.clear()\n",
    "from openai import AsyncOpenAI\nsdk = AsyncOpenAI()\nsdk._client = object()\n",
    "import re\npattern = re._compile('x', 0)\n",
    "async def read(response):\n    return getattr(response, '_protocol', None)\n",
    "def patch(client, transport):\n    setattr(client, '_transport', transport)\n",
    "def peek(answer):\n    return answer._headers_of_another_library\n",
    "import importlib\nservices = importlib.import_module('ray._private.services')\n",
])
def test_a_private_name_of_another_package_is_found(code):
    own = _own_names()
    assert privates_used(code, "planted.py", own), code


@pytest.mark.parametrize("code", [
    "from simrun.scoring.store import _seen\nfrom simrun._protocol import SNAPSHOT\n",
    "from .._lazy import exported\n",
    "import os\nos._exit(3)\n",
    "import sys\nframe = sys._getframe(1)\n",
    "class A:\n    def f(self):\n        return self._x + super()._y\n",
    "import ray\nprint(ray.__version__, ray.__file__)\n",
    "def f(backend):\n    return backend._record\n",        # simrun's own method, on its own object
])
def test_what_is_simruns_own_or_documented_is_not_found(code):
    assert privates_used(code, "planted.py", _own_names()) == []


def test_the_names_simrun_defines_are_found_in_its_code():
    own = _own_names()
    assert {"_record", "_ppf", "_offer", "_lazy"} & own == {"_record", "_ppf", "_offer"}
    assert not {"_transport", "_mounts", "_protocol_of_another"} & own
    assert "_exit" not in dir(builtins)


def shared_fixtures() -> list[Path]:
    """The suite's shared fixtures: every conftest.py, and the helpers of tests/fixtures/."""
    tests = ROOT / "tests"
    return sorted([*tests.rglob("conftest.py"), *(tests / "fixtures").rglob("*.py")])


def test_no_shared_fixture_uses_a_private_name_of_an_installed_library():
    """The suite's shared fixtures hold to the same rule as the product: what an installed library
    documents (typer's CliRunner, not its private `typer.testing._get_command`), so that a release of
    it cannot break every test at once. A test module may still read a private name where its check
    needs it, and say so."""
    sources = shared_fixtures()
    assert len(sources) > 20
    own = _own_names() | defined_names([ast.parse(p.read_text(encoding="utf-8")) for p in sources])
    found = [hit for path in sources
             for hit in privates_used(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)), own)]
    assert found == [], "use the library's documented interface:\n" + "\n".join(found)


def test_the_old_patch_of_typer_would_be_found():
    """Control: the patch tests/conftest.py once made, to build the command once per app."""
    code = ("import functools\nimport typer.main\nimport typer.testing\n"
            "typer.testing._get_command = functools.lru_cache(maxsize=None)(typer.main.get_command)\n")
    assert privates_used(code, "conftest.py", _own_names()) == [
        "conftest.py:4: typer.testing._get_command (sets an attribute of typer)"]
