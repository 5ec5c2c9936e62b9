"""LibDesk, simrun's second reference runtime: a library's help desk (loans, renewals, holds,
pickups), written from the README and docs/protocol.md, in another style than TripDesk.

It can break any class on purpose (`LibDesk(faults={"loop": 0.1})`) and logs, in `truth`,
every conversation where it broke one, planted or not: what simrun's scorer is checked against.

Imports: nothing of simrun's; it was written from the protocol, as an outside team would.
"""

from simrun.examples.libdesk.desk import LibDesk, __version__

__all__ = ["LibDesk", "__version__"]

if __name__ != "simrun.examples.libdesk":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.examples.libdesk; import it as `simrun.examples.libdesk`, not `{__name__}`")
