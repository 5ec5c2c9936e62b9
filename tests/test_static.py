"""ruff and mypy, as pyproject.toml configures them, find nothing: the suite is the one check a
change needs (README's test command), and a lint or type error fails it like any test."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from tests.conftest import ROOT

# mypy takes a minute cold: on the worker of its own group, beside the other slow checks.
pytestmark = pytest.mark.xdist_group("static")


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_ruff_finds_nothing_in_the_package_the_tests_and_the_benchmarks():
    done = run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_mypy_finds_nothing_in_the_package():
    done = run("mypy", "--no-incremental")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_mypy_is_strict_on_the_whole_package():
    """Plain `mypy` is `mypy --strict -p simrun`: strict for every module, and no override lets
    one off (an override may only say that a library has no type information)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True and config["packages"] == ["simrun"]
    for override in config.get("overrides", []):
        assert set(override) == {"module", "ignore_missing_imports"}, override
        assert not [m for m in override["module"] if m.split(".")[0] == "simrun"], override


@pytest.mark.parametrize("package", ["scoring/checks", "simulator/cluster"])
def test_a_type_error_planted_in_the_package_fails_mypy(tmp_path, package):
    """The check can fail: a module of the judge, or of the simulator (strict only since the whole
    package is), by its name in a copy of the package's folders, with an untyped function and a
    wrong return type, is refused under the same configuration."""
    folder = tmp_path / "simrun"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for part in package.split("/"):
        folder = folder / part
        folder.mkdir()
        (folder / "__init__.py").write_text("")
    planted = folder / "planted.py"
    planted.write_text('def untyped(x):\n    return x\n\n\ndef wrong() -> int:\n    return "text"\n')
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(planted)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "no-untyped-def" in done.stdout and "return-value" in done.stdout, done.stdout
