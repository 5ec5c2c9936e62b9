"""simrun's simulator: runs persona x goal conversations against a runtime and records them.

The public surface, for Python users (the CLI is a thin shell over these):

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

import importlib

from simrun._version import __version__

_EXPORTS = {
    "PythonRuntime": "simrun.simulator.adapters.python",
    "Cell": "simrun.simulator.conversation", "Conversation": "simrun.simulator.conversation",
    "converse": "simrun.simulator.conversation",
    "Dataset": "simrun.scoring.dataset.files", "Goal": "simrun.scoring.dataset.files",
    "Persona": "simrun.scoring.dataset.files",
    "load_dataset": "simrun.scoring.dataset.files",
    "RunResult": "simrun.simulator.runner", "matrix": "simrun.simulator.runner",
    "run_matrix": "simrun.simulator.runner",
    "ScriptedUser": "simrun.simulator.users.scripted",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'simrun.simulator' has no attribute {name!r}")
