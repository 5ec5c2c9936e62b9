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

import importlib
from typing import TYPE_CHECKING, Any

from simrun._version import __version__

if TYPE_CHECKING:
    from simrun._gate import GateOutcome, gate
    from simrun._run import Outcome, PreparedRun, RunEvents, RunStart, prepare, prepare_resume, resume, run, run_async
    from simrun.scoring.errors import ConfigError, GateError, SimrunError
    from simrun.scoring.gate.run_verdict import RunVerdict
    from simrun.scoring.gate.verdict_lines import Kind, Line, Scope, Status

_EXPORTS = {
    "run": "simrun._run", "run_async": "simrun._run", "resume": "simrun._run", "prepare": "simrun._run",
    "prepare_resume": "simrun._run", "PreparedRun": "simrun._run", "Outcome": "simrun._run",
    "RunEvents": "simrun._run", "RunStart": "simrun._run",
    "gate": "simrun._gate", "GateOutcome": "simrun._gate",
    "RunVerdict": "simrun.scoring.gate.run_verdict", "Status": "simrun.scoring.gate.verdict_lines",
    "Kind": "simrun.scoring.gate.verdict_lines", "Line": "simrun.scoring.gate.verdict_lines",
    "Scope": "simrun.scoring.gate.verdict_lines",
    "SimrunError": "simrun.scoring.errors", "ConfigError": "simrun.scoring.errors",
    "GateError": "simrun.scoring.errors",
}
__all__ = ["ConfigError", "GateError", "GateOutcome", "Kind", "Line", "Outcome", "PreparedRun", "RunEvents",
           "RunStart", "RunVerdict", "Scope", "SimrunError", "Status", "__version__", "gate", "prepare",
           "prepare_resume", "resume", "run", "run_async"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'simrun' has no attribute {name!r}")
