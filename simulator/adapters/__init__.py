"""Runtime adapters: how simrun reaches a runtime. Each speaks PROTOCOL.md version 1."""

from simulator.adapters.base import RuntimeAdapter, check_turn_result
from simulator.adapters.python import PythonRuntime

__all__ = ["RuntimeAdapter", "PythonRuntime", "check_turn_result"]
