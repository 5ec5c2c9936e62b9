"""simrun's simulator: runs persona x goal conversations against a runtime and records them.

The public surface, for Python users (the CLI is a thin shell over these):

    load_dataset(personas_dir, goals_dir) -> Dataset
    run_matrix(dataset, runtime, user, store, ...) -> RunResult
    converse(cell, user, runtime) -> Conversation
    PythonRuntime, ScriptedUser

Names are imported on first use, so that `import simulator` stays cheap. The layers run one way:
`simulator` depends on `scoring` (the judge, with the persona and goal models and the error
hierarchy), and `scoring` never imports `simulator`.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "PythonRuntime": "simulator.adapters.python",
    "Cell": "simulator.conversation", "Conversation": "simulator.conversation",
    "converse": "simulator.conversation",
    "Dataset": "scoring.dataset", "Goal": "scoring.dataset", "Persona": "scoring.dataset",
    "load_dataset": "scoring.dataset",
    "RunResult": "simulator.runner", "matrix": "simulator.runner", "run_matrix": "simulator.runner",
    "ScriptedUser": "simulator.users.scripted",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'simulator' has no attribute {name!r}")
