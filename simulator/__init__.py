"""simrun's simulator: runs persona x goal conversations against a runtime and records them.

The public surface, for Python users (the CLI is a thin shell over these):

    load_dataset(personas_dir, goals_dir) -> Dataset
    run_matrix(dataset, runtime, user, store, ...) -> RunResult
    converse(cell, user, runtime) -> Conversation
    PythonRuntime, ScriptedUser, Store
"""

__version__ = "0.1.0"

from simulator.adapters.python import PythonRuntime  # noqa: E402
from simulator.conversation import Cell, Conversation, converse  # noqa: E402
from simulator.dataset import Dataset, Goal, Persona, load_dataset  # noqa: E402
from simulator.runner import RunResult, matrix, run_matrix  # noqa: E402
from simulator.users.scripted import ScriptedUser  # noqa: E402

__all__ = ["__version__", "Cell", "Conversation", "converse", "Dataset", "Goal", "Persona",
           "PythonRuntime", "RunResult", "ScriptedUser", "load_dataset", "matrix", "run_matrix"]
