"""simrun: evaluate conversational assistants with simulated users, and gate releases on the rates.

The Python API, on which the `simrun` command stands:

    outcome = simrun.run("simrun.toml", budget="5usd")      # or: await simrun.run_async(...)
    assert outcome.passed, outcome.verdict                   # the verdict's lines when it fails
    outcome.exit_code, outcome.run_id, outcome.report

    judged = simrun.gate(candidate="latest", baseline="baselines/main.json")

`prepare` checks a run without spending anything (bad input raises `ConfigError` naming the file,
line or field); `PreparedRun.execute` runs it; `RunEvents` hears a run as it goes. Every error
simrun raises on purpose is a `SimrunError`, whose message says the fix.

The package, by layer (tests/test_layering.py holds the rules):

    scoring/     the judge, the store, the gate and the pages: everything after a conversation
    simulator/   runs persona x goal conversations against a runtime and records them
    _run, _gate  the API above: a run and a gate, from a project to a verdict
    cli/         the `simrun` command, a thin shell over the API
    examples/    the reference runtimes (TripDesk, LibDesk), written as an outside runtime would be

Names are imported on first use, so that `import simrun.scoring` (a worker, a rescore) does not
load the simulator.

Imports: `simrun.simulator` and `simrun.scoring`; `simrun.cli` is on top and nothing imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simrun._lazy import exported
from simrun._version import __version__

if TYPE_CHECKING:
    from simrun._gate import GateOutcome, gate
    from simrun._run import (
        Outcome,
        PreparedRun,
        ResumeOptions,
        RunEvents,
        RunOptions,
        RunStart,
        prepare,
        prepare_resume,
        resume,
        run,
        run_async,
    )
    from simrun.scoring import ConfigError, GateError, SimrunError
    from simrun.scoring.gate import Kind, Line, RunVerdict, Scope, Status

__all__ = [
    # a run, a gate, the demo
    "run", "run_async", "prepare", "PreparedRun", "RunOptions", "resume", "prepare_resume", "ResumeOptions",
    "demo", "prepare_demo", "gate", "Outcome", "GateOutcome",
    # what a run tells as it goes, and what it hands over
    "RunEvents", "RunStart", "Finished", "Estimate", "RunResult", "Sequential", "Store",
    # the verdict
    "RunVerdict", "Status", "Line", "Kind", "Scope", "verdict_json",
    # the errors simrun raises on purpose: every one a SimrunError whose message says the fix
    "SimrunError", "ConfigError", "GateError", "BaselineError", "StoreError", "RuntimeUnavailable",
    "UserModelUnavailable",
    "__version__",
]
_EXPORTS: dict[str, tuple[str, str | None]] = {
    **{name: ("simrun._run", name) for name in ("run", "run_async", "resume", "prepare", "prepare_resume",
                                                 "PreparedRun", "Outcome", "RunEvents", "RunStart", "RunOptions",
                                                 "ResumeOptions", "demo", "prepare_demo")},
    **{name: ("simrun._gate", name) for name in ("gate", "GateOutcome")},
    **{name: ("simrun.scoring.gate", name) for name in ("RunVerdict", "Status", "Kind", "Line", "Scope",
                                                         "Sequential", "verdict_json")},
    **{name: ("simrun.scoring", name) for name in ("SimrunError", "ConfigError", "GateError", "BaselineError",
                                                    "StoreError", "RuntimeUnavailable", "UserModelUnavailable")},
    **{name: ("simrun.scoring.store", name) for name in ("Finished", "Store")},
    **{name: ("simrun.simulator", name) for name in ("Estimate", "RunResult")},
}


def __getattr__(name: str) -> object:
    return exported(__name__, _EXPORTS, name)


def __dir__() -> list[str]:
    # The exports are there before their first use: `dir()`, `help()` and completion list them.
    return sorted({*globals(), *__all__})
