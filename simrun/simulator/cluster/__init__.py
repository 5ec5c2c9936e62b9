"""The Ray executor (`simrun --executor ray`): a run's conversations on the workers of a cluster.

    executor    RayExecutor: the driver's side; hands cells to workers in chunks, stores what returns
    worker      Worker: a Ray actor that runs conversations as the in-process executor does
    shared      what the workers share: one budget and one rate limit (actors), and their couriers
    connect     joining a cluster at an address, or the one on this machine, or starting one

Imports: `scoring`, and the rest of `simulator` (a plan, its runtime and user, the conversation
loop, the ledger), never the command line. Nothing imports this package but
`simrun.simulator.executors`, when `--executor ray` asks for it: Ray is an optional extra.
"""

from __future__ import annotations

from simrun.simulator.cluster._executor import RayExecutor

__all__ = ["RayExecutor"]

if __name__ != "simrun.simulator.cluster":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.simulator.cluster; import it as `simrun.simulator.cluster`, not `{__name__}`")
