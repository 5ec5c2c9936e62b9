"""simrun's simulator: runs persona x goal conversations against a runtime and records them.

Its exports, among them (each module is private, `_name.py`; the API above, `simrun.run()`,
stands on these):

    load_dataset(personas_dir, goals_dir) -> Dataset
    run_matrix(dataset, runtime, user, store, ...) -> RunResult
    converse(cell, user, runtime) -> Conversation
    PythonRuntime, ScriptedUser

Names are imported on first use, so that `import simrun.simulator` stays cheap. A run as a
whole (a verdict, a report) is `simrun.run()`, above this layer.

    adapters/   how simrun reaches a runtime: python, http, stdio, callable, chat, template
    users/      the simulated users: scripted, or played by a model
    cluster/    the Ray executor and its workers
    conversation, runner, project, ledger, ...: the run itself, one concept a module

Imports: `scoring` (the judge, the store, the gate and the pages, with the persona and goal
models and the error hierarchy), never the reverse. Inside, only `simrun.simulator.executors`
imports the Ray executor, and only when asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simrun._lazy import exported

if TYPE_CHECKING:
    from simrun._version import __version__
    from simrun.scoring.dataset import Dataset, Goal, Persona, load_dataset
    from simrun.simulator import _demo as demo
    from simrun.simulator import _eventloop as eventloop
    from simrun.simulator._check_user import CheckUser, checks_db, kept, measured_pace, reference_dataset
    from simrun.simulator._conformance import check_runtime
    from simrun.simulator._conversation import Cell, Conversation, converse
    from simrun.simulator._demo import faulty_run
    from simrun.simulator._goal_check import check_goals
    from simrun.simulator._ledger import Ledger
    from simrun.simulator._plan import Estimate, estimate
    from simrun.simulator._pricing import price_for
    from simrun.simulator._progress import RunProgress, duration
    from simrun.simulator._project import (
        Plan,
        execute,
        given_file,
        load_plan,
        load_project_file,
        parse_shard,
        project_baseline,
        project_db,
        project_reports,
        runtime_for,
    )
    from simrun.simulator._rounds import run_in_rounds
    from simrun.simulator._runner import ClusterExecutor, RunResult, in_shard, matrix, run_matrix
    from simrun.simulator._scaffold import new_project
    from simrun.simulator.adapters import PythonRuntime
    from simrun.simulator.users import ScriptedUser

__all__ = [
    "faulty_run",
    "Cell",
    "CheckUser",
    "ClusterExecutor",
    "Conversation",
    "Dataset",
    "Estimate",
    "Goal",
    "Ledger",
    "Persona",
    "Plan",
    "PythonRuntime",
    "RunProgress",
    "RunResult",
    "ScriptedUser",
    "__version__",
    "check_goals",
    "check_runtime",
    "checks_db",
    "converse",
    "demo",
    "duration",
    "estimate",
    "eventloop",
    "execute",
    "given_file",
    "in_shard",
    "kept",
    "load_dataset",
    "load_plan",
    "load_project_file",
    "matrix",
    "measured_pace",
    "new_project",
    "parse_shard",
    "price_for",
    "project_baseline",
    "project_db",
    "project_reports",
    "reference_dataset",
    "run_in_rounds",
    "run_matrix",
    "runtime_for",
]
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "faulty_run": ("simrun.simulator._demo", "faulty_run"),
    "Cell": ("simrun.simulator._conversation", "Cell"),
    "CheckUser": ("simrun.simulator._check_user", "CheckUser"),
    "ClusterExecutor": ("simrun.simulator._runner", "ClusterExecutor"),
    "Conversation": ("simrun.simulator._conversation", "Conversation"),
    "Dataset": ("simrun.scoring.dataset", "Dataset"),
    "Estimate": ("simrun.simulator._plan", "Estimate"),
    "Goal": ("simrun.scoring.dataset", "Goal"),
    "Ledger": ("simrun.simulator._ledger", "Ledger"),
    "Persona": ("simrun.scoring.dataset", "Persona"),
    "Plan": ("simrun.simulator._project", "Plan"),
    "PythonRuntime": ("simrun.simulator.adapters", "PythonRuntime"),
    "RunProgress": ("simrun.simulator._progress", "RunProgress"),
    "RunResult": ("simrun.simulator._runner", "RunResult"),
    "ScriptedUser": ("simrun.simulator.users", "ScriptedUser"),
    "__version__": ("simrun._version", "__version__"),
    "check_goals": ("simrun.simulator._goal_check", "check_goals"),
    "check_runtime": ("simrun.simulator._conformance", "check_runtime"),
    "checks_db": ("simrun.simulator._check_user", "checks_db"),
    "converse": ("simrun.simulator._conversation", "converse"),
    "demo": ("simrun.simulator._demo", None),
    "duration": ("simrun.simulator._progress", "duration"),
    "estimate": ("simrun.simulator._plan", "estimate"),
    "eventloop": ("simrun.simulator._eventloop", None),
    "execute": ("simrun.simulator._project", "execute"),
    "given_file": ("simrun.simulator._project", "given_file"),
    "in_shard": ("simrun.simulator._runner", "in_shard"),
    "kept": ("simrun.simulator._check_user", "kept"),
    "load_dataset": ("simrun.scoring.dataset", "load_dataset"),
    "load_plan": ("simrun.simulator._project", "load_plan"),
    "load_project_file": ("simrun.simulator._project", "load_project_file"),
    "matrix": ("simrun.simulator._runner", "matrix"),
    "measured_pace": ("simrun.simulator._check_user", "measured_pace"),
    "new_project": ("simrun.simulator._scaffold", "new_project"),
    "parse_shard": ("simrun.simulator._project", "parse_shard"),
    "price_for": ("simrun.simulator._pricing", "price_for"),
    "project_baseline": ("simrun.simulator._project", "project_baseline"),
    "project_db": ("simrun.simulator._project", "project_db"),
    "project_reports": ("simrun.simulator._project", "project_reports"),
    "reference_dataset": ("simrun.simulator._check_user", "reference_dataset"),
    "run_in_rounds": ("simrun.simulator._rounds", "run_in_rounds"),
    "run_matrix": ("simrun.simulator._runner", "run_matrix"),
    "runtime_for": ("simrun.simulator._project", "runtime_for"),
}


def __getattr__(name: str) -> object:
    return exported(__name__, _EXPORTS, name)


def __dir__() -> list[str]:
    # The exports are there before their first use: `dir()`, `help()` and completion list them.
    return sorted({*globals(), *__all__})
