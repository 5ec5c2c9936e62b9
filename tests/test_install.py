"""simrun installs anywhere from a built wheel, with its demo inside it.

One wheel is built offline (`pip wheel --no-deps --no-build-isolation`) from a copy of the
sources, installed into a fresh virtual environment that borrows this one's dependencies (a .pth
line, so simrun itself comes only from the wheel), and run in an empty folder: plain
`simrun --budget 5usd` runs the bundled demo, and `simrun demo` shows its planted findings.
"""

from __future__ import annotations

import re
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from simrun.simulator.demo import FILES

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "setup.py", "README.md", "simrun", *FILES)

pytestmark = pytest.mark.xdist_group("install")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-q", "-w", str(out), str(src)], check=True, capture_output=True, timeout=300)
    return next(out.glob("simrun-*.whl"))


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    env = tmp_path_factory.mktemp("venv")
    venv.create(env, with_pip=False)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(env), "platbase": str(env)}))
    # The wheel unpacked by pip (this environment's, --target), the dependencies borrowed.
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                    str(purelib), str(wheel)], check=True, capture_output=True, timeout=300)
    (purelib / "borrowed.pth").write_text("\n".join(p for p in site.getsitepackages()) + "\n")
    return env


def test_the_wheel_carries_the_demo_from_the_repository_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("personas", "goals"):
        for f in (ROOT / folder).glob("*.yaml"):
            assert f"simrun/simulator/bundled/{folder}/{f.name}" in names
    assert {"simrun/simulator/bundled/budgets.toml", "simrun/simulator/bundled/simrun.toml"} <= names


def simrun(env: Path, folder: Path, *args: str) -> subprocess.CompletedProcess:
    # Run the wheel's console script through the new environment's python, so that the
    # installed `simulator` (not this checkout's) is the one imported.
    script = "import sys; from simrun.cli.main import main; sys.argv = ['simrun', *sys.argv[1:]]; main()"
    return subprocess.run([str(env / "bin" / "python"), "-I", "-c", script, *args], cwd=folder,
                          capture_output=True, text=True, timeout=300)


def test_the_installed_simrun_runs_the_demo_in_an_empty_folder(installed, tmp_path):
    where = subprocess.run([str(installed / "bin" / "python"), "-I", "-c", "import simrun.simulator; print(simrun.simulator.__file__)"],
                           capture_output=True, text=True, check=True).stdout
    assert str(installed) in where and str(ROOT) not in where
    done = simrun(installed, tmp_path, "--budget", "5usd", "-n", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "7 personas x 10 goals x 1 repetition = 70 conversations" in done.stdout
    assert (tmp_path / "simrun.duckdb").is_file()
    assert (tmp_path / re.search(r"report: (\S+)", done.stdout).group(1)).is_file()


def test_simrun_demo_shows_a_dead_end_a_loop_and_a_broken_guarantee(installed, tmp_path):
    done = simrun(installed, tmp_path, "demo", "-n", "1")
    assert done.returncode == 1, done.stdout + done.stderr      # a broken guarantee fails the run
    assert "FAILED: guarantees broken: phantom_receipt" in done.stdout
    rates = {m.group(1): int(m.group(2)) for m in re.finditer(r"│ (\w+) +│ \w+ +│.*│ +(\d+)/\d+ │", done.stdout)}
    assert rates["dead_end"] > 0 and rates["loop"] > 0 and rates["phantom_receipt"] > 0, rates
    assert (tmp_path / "simrun-demo.duckdb").is_file() and not (tmp_path / "simrun.duckdb").exists()
    report = (tmp_path / re.search(r"report: (\S+)", done.stdout).group(1)).read_text()
    assert all(f'id="class-{cls}"' in report for cls in ("dead_end", "loop", "phantom_receipt"))
