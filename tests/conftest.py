"""Shared fixtures: the bundled demo dataset and LibDesk's, and in-process runs of them against
the reference runtimes (TripDesk by default)."""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from simulator.adapters.python import PythonRuntime
from simulator.conversation import Conversation, converse
from scoring.dataset import Dataset, load_dataset
from simulator.runner import matrix
from simulator.users.scripted import ScriptedUser
from libdesk import LibDesk
from tripdesk import TripDesk
from tripdesk.faults import FAULTS

ROOT = Path(__file__).resolve().parent.parent
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
    return load_dataset(ROOT / "libdesk" / "personas", ROOT / "libdesk" / "goals")


@pytest.fixture(scope="session")
def clean_run(demo) -> DemoRun:
    """The demo matrix with every fault at rate 0: nothing changes, but eligibility is logged."""
    return run_demo(demo, faults={name: 0.0 for name in FAULTS})


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """A copy of the bundled demo project in a temporary folder."""
    for folder in ("personas", "goals"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    for name in ("simrun.toml", "budgets.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path
