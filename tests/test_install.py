"""simrun installs anywhere as one package, `simrun`, from a wheel built from its sdist, with its
demo inside it.

The sdist and the wheel are built offline (`python -m build --no-isolation`, the wheel from the
sdist, as an index builds it) from a copy of the sources, checked as an index would check them
(`twine check`), and the wheel is installed into a fresh virtual environment that borrows this
one's dependencies (a .pth line, so simrun itself comes only from the wheel). There: installing
adds `simrun` and its console script and nothing else; plain `simrun --budget 5usd` runs the
bundled demo in an empty folder; `simrun demo` shows its planted findings; check-user finds
TripDesk's goals; and a team's own `scoring.py` and `simulator/` on the path break nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.processes import cli_command
from tests.fixtures.venvs import borrow, copy_sources, fresh_venv, pip_only, purelib

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.xdist_group("install")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """(sdist, wheel): the sources copied as a clone has them (tests/fixtures/venvs.py), then built
    as `python -m build` builds them."""
    src = copy_sources(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-o", str(out), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return next(out.glob("simrun-*.tar.gz")), next(out.glob("simrun-*.whl"))


@pytest.fixture(scope="module")
def wheel(built) -> Path:
    return built[1]


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> tuple[Path, set[str], set[str]]:
    """(environment, what the wheel added to its site-packages, what it added to its bin/)."""
    env = tmp_path_factory.mktemp("venv")
    # No pip of its own: this environment's pip, and nothing else of it, on PYTHONPATH for the one
    # install (with this environment's site-packages borrowed, pip would take the editable simrun
    # installed here for the one to replace).
    fresh_venv(env, borrow_packages=False)
    before = set(os.listdir(purelib(env))), set(os.listdir(env / "bin"))
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}   # nothing else that looks installed
    subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, capture_output=True, timeout=300,
                   env={**clean, "PYTHONPATH": pip_only(env)})
    added = set(os.listdir(purelib(env))) - before[0], set(os.listdir(env / "bin")) - before[1]
    borrow(env)
    return env, *added


def test_the_sdist_and_the_wheel_pass_an_index_s_checks_and_carry_the_license(built):
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, built)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "LICENSE" in " ".join(tarfile.open(built[0]).getnames())
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in zipfile.ZipFile(built[1]).namelist())


def test_the_wheel_carries_the_demo_from_the_repository_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("personas", "goals"):
        for f in (ROOT / folder).glob("*.yaml"):
            assert f"simrun/simulator/bundled/{folder}/{f.name}" in names
    assert {"simrun/simulator/bundled/budgets.toml", "simrun/simulator/bundled/simrun.toml"} <= names


def test_installing_adds_the_simrun_package_and_its_console_script_and_nothing_else(installed, wheel):
    _, packages, scripts = installed
    assert packages == {"simrun", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    assert scripts == {"simrun"}
    names = zipfile.ZipFile(wheel).namelist()
    assert "simrun/py.typed" in names       # a team's type checker reads simrun's annotations
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"simrun"}


def run_installed(env: Path, folder: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    # The wheel's console script, through the new environment's python, so that the installed
    # simrun (not this checkout's) is the one imported. `path`: PYTHONPATH, as a team sets it so
    # that simrun imports its callable (-I would ignore it, so -E -s is not used either way).
    env_vars = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITHUB_STEP_SUMMARY")}
    if path is not None:
        env_vars["PYTHONPATH"] = path
    return subprocess.run([*cli_command(env / "bin" / "python"), *args], cwd=folder, env=env_vars,
                          capture_output=True, text=True, timeout=300)


def test_the_installed_simrun_runs_the_demo_in_an_empty_folder(installed, tmp_path):
    env = installed[0]
    where = subprocess.run([str(env / "bin" / "python"), "-I", "-c",
                            "import simrun.simulator; print(simrun.simulator.__file__)"],
                           capture_output=True, text=True, check=True).stdout
    assert str(env) in where and str(ROOT) not in where
    done = run_installed(env, tmp_path, "--budget", "5usd", "-n", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "7 personas x 10 goals x 1 repetition = 70 conversations" in done.stdout
    assert (tmp_path / "simrun.duckdb").is_file()
    assert (tmp_path / re.search(r"report: (\S+)", done.stdout).group(1)).is_file()


def test_simrun_demo_shows_a_dead_end_a_loop_and_a_broken_guarantee(installed, tmp_path):
    done = run_installed(installed[0], tmp_path, "demo", "-n", "1")
    assert done.returncode == 1, done.stdout + done.stderr      # a broken guarantee fails the run
    assert "FAILED: guarantees broken: phantom_receipt" in done.stdout
    rates = {m.group(1): int(m.group(2)) for m in re.finditer(r"│ (\w+) +│ \w+ +│.*│ +(\d+)/\d+ │", done.stdout)}
    assert rates["dead_end"] > 0 and rates["loop"] > 0 and rates["phantom_receipt"] > 0, rates
    assert (tmp_path / "simrun-demo.duckdb").is_file() and not (tmp_path / "simrun.duckdb").exists()
    report = (tmp_path / re.search(r"report: (\S+)", done.stdout).group(1)).read_text()
    assert all(f'id="class-{cls}"' in report for cls in ("dead_end", "loop", "phantom_receipt"))


def test_init_writes_a_project_from_the_installed_package(installed, tmp_path):
    done = run_installed(installed[0], tmp_path, "init", "--no-check", "--transport", "http", "--url",
                  "http://127.0.0.1:9")
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("simrun.toml", ".github/workflows/simrun.yml"):
        assert (tmp_path / name).is_file(), name
    assert list((tmp_path / "personas").glob("*.yaml")) and list((tmp_path / "goals").glob("*.yaml"))


def test_check_user_finds_tripdesk_s_goals_in_the_installed_package(installed):
    code = ("from simrun.simulator._check_user import reference_dataset; d = reference_dataset(); "
            "print(len(d.personas), len(d.goals))")
    done = subprocess.run([str(installed[0] / "bin" / "python"), "-I", "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", str(len(list((ROOT / "goals").glob("*.yaml"))))]


def test_check_user_runs_from_the_installed_package_against_a_fake_model(installed, tmp_path, monkeypatch):
    """`simrun check-user` from a wheel, in an empty folder: the bundled goals wherever `simrun demo`
    finds them, never "check-user needs simrun's source tree" (issue 41)."""
    from simrun.simulator.adapters._process import free_port
    from tests.fixtures.model_api import FakeModelAPI, serve

    shutil.copy(ROOT / "budgets.toml", tmp_path / "budgets.toml")     # the team's prices, as a project has them
    port = free_port()
    server = serve(FakeModelAPI(), port)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-install-000")
    try:
        done = run_installed(installed[0], tmp_path, "check-user", "--user", "openai:gpt-4.1-mini", "--budget", "1usd")
    finally:
        server.should_exit = True
    assert done.returncode == 0, done.stdout + done.stderr
    assert "source tree" not in done.stdout + done.stderr
    assert done.stdout.startswith("check-user openai:gpt-4.1-mini: 20 conversations against the reference runtime")
    assert "user output form: json_schema" in done.stdout


def test_a_team_s_own_scoring_and_simulator_on_the_path_break_nothing(installed, tmp_path):
    """A team's repository with modules named as simrun's layers once were, put on the path so
    that simrun imports its callable: simrun runs against it, and the team's import gets the
    team's module, never simrun's."""
    (tmp_path / "scoring.py").write_text("WHOSE = 'the team'\n")
    (tmp_path / "simulator").mkdir()
    (tmp_path / "simulator" / "__init__.py").write_text("raise ImportError('the team simulator is not simrun')\n")
    (tmp_path / "assistant.py").write_text(
        "import scoring\n\n\ndef reply(message, history):\n"
        "    return f'{scoring.WHOSE} says hello: what would you like next?'\n")
    for kind in ("personas", "goals"):
        shutil.copytree(ROOT / kind, tmp_path / kind)
    (tmp_path / "simrun.toml").write_text('[runtime]\ntransport = "callable"\ntarget = "assistant:reply"\n')
    done = run_installed(installed[0], tmp_path, "-n", "1", path=str(tmp_path))
    assert "Traceback" not in done.stderr and "verdict: " in done.stdout, done.stdout + done.stderr
    report = (tmp_path / re.search(r"report: (\S+)", done.stdout).group(1)).read_text()
    assert "the team says hello" in report
    mine = subprocess.run([str(installed[0] / "bin" / "python"), "-c",
                           "import scoring, simrun.scoring; print(scoring.WHOSE, simrun.scoring.__name__)"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True,
                          text=True, timeout=60)
    assert mine.stdout.split() == ["the", "team", "simrun.scoring"], mine.stderr


def test_a_team_s_code_is_type_checked_against_the_installed_simrun(installed, tmp_path):
    """The wheel is typed (py.typed): mypy --strict reads simrun's own annotations, so a wrong use
    of the API is an error in the team's code, not an Any that lets it through."""
    script = tmp_path / "release_check.py"
    script.write_text("import simrun\n\n\ndef check() -> bool:\n"
                      "    outcome = simrun.run('simrun.toml', repetitions=1)\n"
                      "    status: simrun.Status = outcome.verdict.status\n"
                      "    return outcome.passed and status is simrun.Status.PASSED\n\n\n"
                      "def wrong() -> str:\n    return simrun.run().exit_code\n")
    # The model SDKs simrun's user modules import are four fifths of what mypy would read (6,500
    # files): skipped (Any), as a team may skip them, they change nothing a team's use of simrun's
    # API is checked against. Without py.typed the import is untyped and the check still fails.
    (tmp_path / "mypy.ini").write_text("[mypy]\n\n[mypy-openai.*,anthropic.*]\nfollow_imports = skip\n")
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"), "--strict",
                           "--no-incremental", "--cache-dir", str(tmp_path / "cache"), "--python-executable",
                           str(installed[0] / "bin" / "python"), str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")})
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "release_check.py:11:" in errors[0] and 'return value type (got "int"' in errors[0], \
        done.stdout
