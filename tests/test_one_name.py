"""One module name per file: each package of simrun imports as `simrun.<...>` and under no other name.

The repository's top-level `scoring/` and `simulator/` are links into `simrun/`, where the card's
folders are read; from a checkout's root, `import scoring` would otherwise load every file of the
judge a second time, as a second module whose error classes never catch simrun's own.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

PACKAGES = sorted(".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "simrun").rglob("__init__.py")
                  if "__pycache__" not in init.parts)


def _import(name: str, cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", f"import {name}"], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("name", ["scoring", "simulator", "scoring.store", "simulator.users"])
def test_the_card_s_folders_do_not_import_from_a_checkout_s_root(name):
    done = _import(name, str(ROOT))
    right = f"simrun.{name.split('.')[0]}"
    assert done.returncode != 0 and f"import it as `{right}`" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("package", [p for p in PACKAGES if p != "simrun"])
def test_every_package_refuses_a_second_name(package):
    """Each package, imported by its own last name from the folder that holds it, says its one name."""
    parent, _, short = package.rpartition(".")
    done = _import(short, str(ROOT.joinpath(*parent.split("."))))
    assert done.returncode != 0 and f"import it as `{package}`" in done.stderr, done.stderr[-2000:]


def test_each_package_imports_under_its_one_name():
    done = subprocess.run([sys.executable, "-c", "import importlib, sys\n"
                           f"for name in {PACKAGES!r}: importlib.import_module(name)\n"
                           "print(sys.modules['simrun._errors'].ConfigError.__module__)"],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "simrun._errors", done.stderr[-2000:]
