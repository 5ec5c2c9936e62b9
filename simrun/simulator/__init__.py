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
    project     simrun.toml, budgets.toml, personas and goals, resolved and checked into a Plan
    execute     a Plan's runtime and user made from its settings, and the matrix run
    conversation, runner, ledger, ...: the run itself, one concept a module

Imports: `scoring` (the judge, the store, the gate and the pages, with the persona and goal
models and the error hierarchy), never the reverse. Inside, only `simrun.simulator.executors`
imports the Ray executor, and only when asked.
"""

from __future__ import annotations

from simrun._version import __version__
from simrun.scoring.dataset import Dataset, Goal, Persona, load_dataset
from simrun.simulator import _demo as demo
from simrun.simulator import _eventloop as eventloop
from simrun.simulator._check_user import CheckUser, checks_db, kept, measured_pace, reference_dataset
from simrun.simulator._conformance import Conformance, Violation, check_runtime
from simrun.simulator._conversation import Cell, Conversation, converse
from simrun.simulator._demo import faulty_run
from simrun.simulator._execute import execute, runtime_for, user_backend
from simrun.simulator._goal_check import GoalCheck, check_goals
from simrun.simulator._ledger import Ledger
from simrun.simulator._plan import Estimate, estimate
from simrun.simulator._pricing import Usage, price_for
from simrun.simulator._progress import RunProgress, duration
from simrun.simulator._project import (
    Plan,
    checked_shard,
    given_file,
    load_plan,
    load_project_file,
    project_baseline,
    project_budgets,
    project_dataset,
    project_db,
    project_file,
    project_history,
    project_reports,
)
from simrun.simulator._rounds import run_in_rounds
from simrun.simulator._runner import ClusterExecutor, RunResult, in_shard, matrix, run_matrix
from simrun.simulator._scaffold import Install, Seen, new_project
from simrun.simulator.adapters import PythonRuntime
from simrun.simulator.users import ScriptedUser

__all__ = [
    "faulty_run",
    "Cell",
    "CheckUser",
    "ClusterExecutor",
    "Conformance",
    "Conversation",
    "Dataset",
    "Estimate",
    "Goal",
    "Install",
    "GoalCheck",
    "Ledger",
    "Persona",
    "Plan",
    "PythonRuntime",
    "RunProgress",
    "RunResult",
    "ScriptedUser",
    "Usage",
    "Violation",
    "Seen",
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
    "checked_shard",
    "price_for",
    "project_baseline",
    "project_budgets",
    "project_dataset",
    "project_db",
    "project_file",
    "project_history",
    "project_reports",
    "reference_dataset",
    "run_in_rounds",
    "run_matrix",
    "runtime_for",
    "user_backend",
]

if __name__ != "simrun.simulator":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.simulator; import it as `simrun.simulator`, not `{__name__}`")
