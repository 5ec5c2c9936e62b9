"""simrun: evaluate conversational assistants with simulated users.

    simulator/   runs persona x goal conversations against a runtime and records them
    scoring/     the judge, the store, the gate and the pages: everything after a conversation
    cli/         the `simrun` command, a thin shell over the library
    examples/    the reference runtimes (TripDesk, LibDesk)

Imports: `simrun.simulator` and `simrun.scoring`; `simrun.cli` is on top and nothing imports it.
"""

from __future__ import annotations

from simrun._version import __version__

__all__ = ["__version__"]
