"""The bundled demo: TripDesk's personas, goals, budgets.toml and simrun.toml, wherever simrun is.

In a clone (or an editable install) they are the repository's own top-level files. A built wheel
carries a copy of them in `simulator/bundled/`, made by setup.py's build step from those same
files, so that `pip install simrun` in any folder can run the demo with no clone.

`FAULTS` are the faults `simrun demo` plants in TripDesk: enough that a newcomer sees what a
finding looks like (a dead end, a loop, a broken guarantee) in the first report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simrun._errors import ConfigError

# What the build step copies into the wheel; read from the repository root in a clone.
FILES = ("personas", "goals", "budgets.toml", "simrun.toml")

# dead_end and loop are progress classes; phantom_receipt is a guarantee (one violation fails a
# run). A fault fires only where it has a chance to (a loop needs an ask to repeat): at these
# rates the demo's 350 conversations show about 19% dead ends, 4% loops and 4% phantom receipts.
FAULTS = "dead_end=0.15,loop=0.3,phantom_receipt=0.05"
FAULT_SEED = 7


def folder() -> Path:
    """The folder holding the demo's files: the wheel's copy, else the clone's root."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "bundled", here.parent.parent):   # the clone: simrun/simulator/ -> its root
        if all((candidate / name).exists() for name in FILES):
            return candidate
    raise ConfigError("the bundled demo is missing from this installation (no personas/, goals/ beside "
                      f"{here}); reinstall simrun from a wheel or a clone")


def in_use(personas: str, goals: str, base: Path) -> bool:
    """A run with no simrun.toml and neither the personas nor the goals folder it names runs the demo."""
    return not (base / personas).exists() and not (base / goals).exists()


def faulty_run(db: str | Path = "simrun-demo.duckdb", reports: str | Path = "reports") -> dict[str, Any]:
    """`simrun.prepare`'s arguments for the demo with FAULTS planted (`simrun demo`), whatever folder
    it is called from: its own database by default, so that a team's `latest` run stays theirs."""
    here = folder()
    return {"config": here / "simrun.toml", "budgets": here / "budgets.toml", "db": db, "reports": reports,
            "runtime_settings": {"options": {"faults": FAULTS, "fault_seed": FAULT_SEED}},
            "labels": ["demo-with-faults"]}
