"""The command line: `simrun` and its commands, a thin shell over the Python API (`simrun.run`,
`simrun.gate`, `simrun.report`, ...): a command parses its flags, calls the function a Python
user would call, and prints the record it gives.

    main        the `simrun` app, its commands registered in order, and `main()`, the console script
    common      what the commands share: the console, one-line errors (a parameter spelled as its
                flag: the one translation table), the common options, how a run's records print
    tables      rows of a table that fit 100 columns (runs, plan)
    run         plain `simrun` (and `run`), `resume`: `simrun.prepare` and its run, told on the console
    start       init, demo: a project started, and the demo with faults planted
    project     validate, check-runtime, plan, schema: a project checked before a run
    runs        runs, report, dashboard, show, merge: stored runs read back
    gate        baseline, gate, rescore, export, import: runs compared and moved
    check_user  check-user: a user model measured where the answer is known

Imports: `simrun`'s public names (`from simrun import X`, X in `simrun.__all__`) and its own
modules, nothing else of simrun (tests/test_layering.py); nothing imports the command line.
"""

from __future__ import annotations

from simrun.cli._main import app, main

__all__ = ["app", "main"]

if __name__ != "simrun.cli":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.cli; import it as `simrun.cli`, not `{__name__}`")
