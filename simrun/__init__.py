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

Imports: `simrun.simulator` and `simrun.scoring`; `simrun.cli` is on top and nothing imports it.
"""

from __future__ import annotations

from simrun._api import (
    GateOutcome,
    Outcome,
    PreparedRun,
    ResumeOptions,
    RunEvents,
    RunOptions,
    RunStart,
    demo,
    gate,
    prepare,
    prepare_demo,
    prepare_resume,
    resume,
    run,
    run_async,
)
from simrun._errors import (
    BaselineError,
    ConfigError,
    GateError,
    RuntimeUnavailable,
    SimrunError,
    StoreError,
    UserModelUnavailable,
)
from simrun._version import __version__
from simrun.scoring.gate import Kind, Line, RunVerdict, Scope, Sequential, Status, verdict_json
from simrun.scoring.store import Finished, Store
from simrun.simulator import Estimate, RunResult

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
