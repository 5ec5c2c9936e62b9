"""Shared fixtures: the bundled demo dataset and LibDesk's, in-process runs of them against the
reference runtimes (TripDesk by default), a copy of the demo project, and the `simrun` command
run in it (`cli`, `run_cli`, `run_cli_in`). Fixtures live here and in the conftest.py of a folder,
never in a test module; none is named like a package a test imports. The slow tests of
tests/lanes.py are marked `slow` here (`pytest -m "not slow"`, the fast lane)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simrun.cli._main import app
from simrun.examples.libdesk import LibDesk
from simrun.examples.tripdesk import TripDesk
from simrun.examples.tripdesk.faults import FAULTS
from simrun.scoring.dataset._files import Dataset, load_dataset
from simrun.simulator._conversation import Conversation, converse
from simrun.simulator._runner import matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser
from tests.fixtures.processes import TAG
from tests.lanes import is_slow

ROOT = Path(__file__).resolve().parent.parent

# The modules whose tests take longest (real processes, a Ray cluster, a browser, calibration
# runs: tens of seconds each) run first, longest first, so that pytest-xdist's workers finish
# together rather than one of them running a long test alone at the end: `--dist loadgroup` hands
# out work in the order of the collection (after putting the xdist groups with the most tests
# first), and a module collected last (tests/test_same_after_the_move.py, say) would otherwise
# start last. Within each module the order is kept. By their durations in a full run.
LONGEST_FIRST = ("tests/simulator/cli/test_real_frameworks.py", "tests/simulator/cli/test_sequential_cli.py",
                 "tests/test_same_after_the_move.py", "tests/test_stamina.py", "tests/test_benchmarks.py",
                 "tests/test_gate_calibration.py", "tests/simulator/cluster/test_ray_executor.py",
                 "tests/test_ledger_paths.py", "tests/scoring/gate/test_sequential.py",
                 "tests/simulator/cli/test_verdict_cli.py", "tests/security/test_stored_settings.py",
                 "tests/simulator/test_check_user.py", "tests/scoring/pages/test_dashboard_browser.py",
                 "tests/security/test_hostile_runtime.py", "tests/scoring/pages/test_report_browser.py",
                 "tests/test_faults.py", "tests/test_install.py")
# More repetitions make the fault and manner tests look harder (SIMRUN_TEST_REPETITIONS=10
# before a release); three keep the suite fast.
DEMO_REPETITIONS = int(os.environ.get("SIMRUN_TEST_REPETITIONS", "3"))


@dataclass
class DemoRun:
    conversations: list[Conversation]
    runtime: TripDesk | LibDesk
    user: ScriptedUser

    def key(self, c: Conversation) -> tuple[str, str, int]:
        return (c.cell.persona.id, c.cell.goal.id, c.cell.seed)

    def fired(self, cls: str) -> set[tuple[str, str, int]]:
        if cls == "runtime_error":
            return {self.key(c) for c in self.conversations if c.transcript.end == "runtime_error"}
        return {self.key(c) for c in self.conversations if c.scorecard.checks[cls].findings}


def run_demo(dataset: Dataset, *, faults=None, user_faults=None, repetitions=DEMO_REPETITIONS,
             seed: int = 1, fault_seed: int = 11, runtime_class=TripDesk) -> DemoRun:
    runtime = runtime_class(faults=faults, fault_seed=fault_seed)
    user = ScriptedUser(faults=user_faults, fault_seed=fault_seed)
    adapter = PythonRuntime(runtime)

    async def go():
        return [await converse(cell, user, adapter) for cell in matrix(dataset, repetitions, seed)]

    return DemoRun(asyncio.run(go()), runtime, user)


@pytest.fixture(scope="session")
def demo() -> Dataset:
    return load_dataset(ROOT / "personas", ROOT / "goals")


@pytest.fixture(scope="session")
def library() -> Dataset:
    """LibDesk's own personas and goals."""
    libdesk = ROOT / "simrun" / "examples" / "libdesk"
    return load_dataset(libdesk / "personas", libdesk / "goals")


@pytest.fixture(scope="session")
def clean_run(demo) -> DemoRun:
    """The demo matrix with every fault at rate 0: nothing changes, but eligibility is logged."""
    return run_demo(demo, faults={name: 0.0 for name in FAULTS})


def demo_project(folder: Path) -> Path:
    """`folder` filled with a copy of the bundled demo project."""
    for kind in ("personas", "goals"):
        shutil.copytree(ROOT / kind, folder / kind)
    shutil.copy(ROOT / "budgets.toml", folder / "budgets.toml")
    # Two repetitions, not the demo's five: a test of the command line needs its matrix, not its
    # power. A test that needs more says so (`-n`, or its own simrun.toml).
    toml = (ROOT / "simrun.toml").read_text()
    assert "\nrepetitions = 5\n" in toml
    (folder / "simrun.toml").write_text(toml.replace("\nrepetitions = 5\n", "\nrepetitions = 2\n"))
    return folder


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the tests of the xdist group "ray" (the executor's tests and the
    Ray benchmark's, on one worker): started once, since starting one takes seconds. Its workers
    start from this process's environment, so a test's variables reach them only through the
    driver (as on other machines). Returns the address a process of its own joins it at."""
    import logging

    import ray

    # "local": a cluster of its own, never one running on the machine.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """A copy of the bundled demo project in a temporary folder."""
    return demo_project(tmp_path)


@pytest.fixture(scope="session")
def _projects_after() -> dict:
    return {}


@pytest.fixture()
def after(project, _projects_after, tmp_path_factory):
    """`after(*commands)`: the project as the simrun commands (each a tuple of arguments) left
    it, and their results. The commands run once per worker, in a project of their own; each
    test gets a copy of every file they left (the database, the reports, a blessed baseline),
    to change as it likes. For tests that only need some finished runs to work on: their runs
    are the same for every such test, and cost the time of one."""
    def make(*commands: tuple[str, ...]) -> list:
        if commands not in _projects_after:
            folder = demo_project(tmp_path_factory.mktemp("after"))
            runner = CliRunner()
            with contextlib.chdir(folder):
                results = [runner.invoke(app, list(args), env={"GITHUB_STEP_SUMMARY": None}) for args in commands]
            _projects_after[commands] = folder, results
        folder, results = _projects_after[commands]
        shutil.copytree(folder, project, dirs_exist_ok=True)
        return results

    return make


@pytest.fixture()
def cli(project, monkeypatch):
    """`simrun ARGS` in the project folder: typer's result (exit code, output, exception).
    GITHUB_STEP_SUMMARY is unset, so that the suite on GitHub Actions writes nothing there."""
    monkeypatch.chdir(project)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


@pytest.fixture()
def run_cli(cli):
    """`simrun ARGS` in the project folder: (exit code, output as one string)."""
    def invoke(*args: str) -> tuple[int, str]:
        result = cli(*args)
        return result.exit_code, result.output

    return invoke


def run_cli_in(folder: Path, *args: str) -> tuple[int, str]:
    """`simrun ARGS` in `folder`, in this process: (exit code, output as one string). For a module's
    own folders (a fixture made once per module, a checkout of its own), where `run_cli`'s project
    is not the one; GITHUB_STEP_SUMMARY unset, as there."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.delenv("GITHUB_STEP_SUMMARY", raising=False)
        result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


# The model API keys the model-user tests set: planted, so that a test can look for them
# anywhere simrun writes (they must never land).
PLANTED_KEY = "sk-planted-4d1c0ffee9"


@pytest.fixture()
def api_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)


@pytest.fixture()
def tagged(monkeypatch):
    """Every process the test starts inherits this test's own tag, so that looking for
    leftovers (`tests.fixtures.processes.leftovers`) finds only its own, not those of a
    benchmark or another test running beside it."""
    monkeypatch.setenv(TAG, uuid.uuid4().hex)


def pytest_itemcollected(item):
    """The slow tests (tests/lanes.py) carry the `slow` marker, so that `-m "not slow"` leaves them out."""
    if is_slow(item.nodeid):
        item.add_marker(pytest.mark.slow)


def pytest_collection_modifyitems(items):
    rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def pytest_runtest_setup(item):
    """On an xdist worker with --dist loadgroup, a test of an xdist_group must carry its group
    in its id, or the group's tests are spread over the workers: two Ray clusters at once,
    module fixtures (a cluster, a browser, pilot runs) made on every worker. A pytest release
    once broke this silently (pytest-dev/pytest-xdist#1386); fail saying so instead."""
    if (getattr(item.config.option, "loadgroup", False) and item.get_closest_marker("xdist_group")
            and "@" not in item.nodeid.rpartition("]")[2]):
        pytest.fail("pytest-xdist did not keep this test's xdist_group on one worker; install the "
                    "pytest that pyproject.toml's test extra names", pytrace=False)


@pytest.fixture(scope="module")
def desk_model_url():
    """An OpenAI-compatible server whose model calls the foreign agent's tools (the fake API of
    tests/fixtures/model_api.py, playing tests/fixtures/foreign_agent.py's model)."""
    from simrun.simulator.adapters._process import free_port
    from tests.fixtures.foreign_agent import desk_model
    from tests.fixtures.model_api import FakeModelAPI, serve

    port = free_port()
    server = serve(FakeModelAPI(policy=desk_model, record=False), port)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True


@pytest.fixture()
def desk_env(monkeypatch, desk_model_url, tmp_path):
    """The foreign agent's settings: its model, a wrong record planted in a fifth of its write
    calls, and the file it lists them in (returned)."""
    monkeypatch.setenv("FOREIGN_MODEL_URL", desk_model_url)
    monkeypatch.setenv("FOREIGN_WRONG_RECORD", "0.2")
    monkeypatch.setenv("FOREIGN_PLANTED_LOG", str(tmp_path / "planted.txt"))
    return tmp_path / "planted.txt"


@pytest.fixture()
def slow_api():
    """A fake model API on 127.0.0.1 whose answers take 50 ms, so that calls are in flight when a
    process is stopped: (the fake, the environment that points simrun's OpenAI client at it)."""
    from simrun.simulator.adapters._process import free_port
    from tests.fixtures.model_api import FakeModelAPI, serve

    api = FakeModelAPI(record=False)
    port = free_port()
    server = serve(api, port, latency_s=0.05)
    yield api, {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "sk-slow-api-1"}
    server.should_exit = True
