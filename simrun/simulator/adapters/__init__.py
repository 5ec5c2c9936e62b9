"""Runtime adapters: how simrun reaches a runtime. Each speaks PROTOCOL.md version 1 to the runner.

    base        the contract (`RuntimeAdapter`: start, turn, state, audit, close and the optional
                members), the base every transport inherits (`Transport`: the optional members'
                defaults), and the checks every reply passes
    python      a runtime object in this process (`module:Class` or `file.py:Class`)
    http        protocol 1 over HTTP (simrun's one HTTP client, simulator/_http1.py, as chat and template)
    stdio       protocol 1 as one JSON object per line over a child process
    foreign     the protocol played by simrun for an assistant with no protocol code
    callable    such an assistant as a Python function (`module:function`)
    template    such an assistant behind any JSON endpoint (a body template), or an OpenAI-compatible one (chat)
    otlp        the OTLP/HTTP receiver of such an assistant's traces
    spans       its tool spans, attributed to their turns, as store events
    process     a runtime's child process: started without a shell, watched, never left behind
    supervisor  the watcher that stops a runtime's process if simrun dies

Imports: `scoring` (the protocol's wire models, errors, secrets) and nothing else of `simulator`.
"""

from __future__ import annotations

from simrun.simulator.adapters._base import RuntimeAdapter, Transport, check_health, check_turn_result
from simrun.simulator.adapters._callable import CallableRuntime
from simrun.simulator.adapters._http import HttpRuntime
from simrun.simulator.adapters._python import PythonRuntime, instantiated, load_attribute
from simrun.simulator.adapters._spans import Tool
from simrun.simulator.adapters._stdio import StdioRuntime
from simrun.simulator.adapters._template import ChatRuntime, TemplateRuntime

__all__ = [
    "CallableRuntime",
    "ChatRuntime",
    "HttpRuntime",
    "PythonRuntime",
    "RuntimeAdapter",
    "StdioRuntime",
    "TemplateRuntime",
    "Tool",
    "Transport",
    "check_health",
    "check_turn_result",
    "instantiated",
    "load_attribute",
]

if __name__ != "simrun.simulator.adapters":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.simulator.adapters; import it as `simrun.simulator.adapters`, not `{__name__}`")
