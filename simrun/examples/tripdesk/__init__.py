"""TripDesk, simrun's reference runtime: trips, travelers, bags and flight segments.

It keeps every guarantee of the Turnframe record and can break any one of them on purpose
(`TripDesk(faults={"loop": 0.2})`), so that simrun's scorer is proven against known faults.

Imports: nothing of simrun's. It speaks PROTOCOL.md as a runtime written elsewhere would, so that
simrun drives it the way it drives an outside runtime.
"""

from simrun.examples.tripdesk.runtime import TripDesk, __version__

__all__ = ["TripDesk", "__version__"]

if __name__ != "simrun.examples.tripdesk":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.examples.tripdesk; import it as `simrun.examples.tripdesk`, not `{__name__}`")
