"""The reference runtimes simrun ships, written apart from it, as an outside runtime would be.

    tripdesk    the demo's runtime: a travel desk that plants named faults at known rates
    libdesk     a library desk written from the README and docs/protocol.md alone, in another style

Each speaks the protocol (docs/protocol.md) and keeps a truth log of the faults it planted, so
that the judge can be proven against it. `target = "simrun.examples.tripdesk:TripDesk"` runs one.

Imports: nothing of simrun's: they speak the protocol as any runtime would.
"""

if __name__ != "simrun.examples":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.examples; import it as `simrun.examples`, not `{__name__}`")
