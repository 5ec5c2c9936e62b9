"""simrun's simulator: runs persona x goal conversations against a runtime and records them.

The public surface, for Python users (the CLI is a thin shell over these):

    load_dataset(personas_dir, goals_dir) -> Dataset
    run_matrix(dataset, runtime, user, store, ...) -> RunResult
    converse(cell, user, runtime) -> Conversation
    PythonRuntime, ScriptedUser

Names are imported on first use, so that `import simulator` stays cheap.

    adapters/   how simrun reaches a runtime: python, http, stdio
    users/      the simulated users: scripted, or played by a model
    cli/        the `simrun` command
    cluster/    the Ray executor and its workers
    conversation, runner, project, ledger, ...: the run itself, one concept a module

Imports: `scoring` (the judge, the store, the gate and the pages, with the persona and goal
models and the error hierarchy), never the reverse. Inside, the command line is on top and
nothing imports it; only `simulator.executors` imports the Ray executor, and only when asked.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "PythonRuntime": "simulator.adapters.python",
    "Cell": "simulator.conversation", "Conversation": "simulator.conversation",
    "converse": "simulator.conversation",
    "Dataset": "scoring.dataset.files", "Goal": "scoring.dataset.files", "Persona": "scoring.dataset.files",
    "load_dataset": "scoring.dataset.files",
    "RunResult": "simulator.runner", "matrix": "simulator.runner", "run_matrix": "simulator.runner",
    "ScriptedUser": "simulator.users.scripted",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'simulator' has no attribute {name!r}")
