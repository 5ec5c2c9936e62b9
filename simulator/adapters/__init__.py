"""Runtime adapters: how simrun reaches a runtime. Each speaks PROTOCOL.md version 1 to the runner.

    base        the contract (`RuntimeAdapter`: start, turn, state, audit, close and the optional
                members), the base every transport inherits (`Transport`: the optional members'
                defaults), and the checks every reply passes
    python      a runtime object in this process (`module:Class` or `file.py:Class`)
    http        protocol 1 over HTTP (aiohttp)
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

from simrun.simulator.adapters.base import RuntimeAdapter, Transport, check_turn_result
from simrun.simulator.adapters.python import PythonRuntime

__all__ = ["RuntimeAdapter", "Transport", "PythonRuntime", "check_turn_result"]
