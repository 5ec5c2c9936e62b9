"""The command line: `simrun` and its commands, a thin shell over the Python API (`simrun.run`,
`simrun.gate`, ...) and the layers beneath it.

    main        the `simrun` app, its commands registered in order, and `main()`, the console script
    common      what the commands share: the console, one-line errors, the common options
    tables      rows of a table that fit 100 columns (runs, plan)
    run         plain `simrun` (and `run`), `resume`: `simrun.prepare` and its run, told on the console
    start       init, demo: a project started, and the demo with faults planted
    project     validate, check-runtime, plan, schema: a project checked before a run
    runs        runs, report, dashboard, show, merge: stored runs read back
    gate        baseline, gate, rescore, export, import: runs compared and moved
    check_user  check-user: a user model measured where the answer is known

Imports: the API (`simrun._run`, `simrun._gate`), `simrun.simulator` and `simrun.scoring`; nothing
imports the command line. A command parses its options, calls a library function a Python user
could call too, and prints what it gives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simrun._lazy import exported

if TYPE_CHECKING:
    from simrun.cli._main import app, main

__all__ = ["app", "main"]
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "app": ("simrun.cli._main", "app"),
    "main": ("simrun.cli._main", "main"),
}


def __getattr__(name: str) -> object:
    return exported(__name__, _EXPORTS, name)


def __dir__() -> list[str]:
    # The exports are there before their first use: `dir()`, `help()` and completion list them.
    return sorted({*globals(), *__all__})
