"""Runtime adapters: how simrun reaches a runtime. Each speaks PROTOCOL.md version 1.

    base        the role (start, turn, state, audit, close) and the checks every reply passes
    python      a runtime object in this process (`module:Class` or `file.py:Class`)
    http        protocol 1 over HTTP (aiohttp)
    stdio       protocol 1 as one JSON object per line over a child process
    process     a runtime's child process: started without a shell, watched, never left behind
    supervisor  the watcher that stops a runtime's process if simrun dies

Imports: `scoring` (the protocol's wire models, errors, secrets) and nothing else of `simulator`.
"""

from simulator.adapters.base import RuntimeAdapter, check_turn_result
from simulator.adapters.python import PythonRuntime

__all__ = ["RuntimeAdapter", "PythonRuntime", "check_turn_result"]
