"""The Python API's functions and the values they hand out, behind `simrun`'s own exports.

    run     a run: from a project to a verdict (`run`, `run_async`, `prepare`, `resume`, `demo`)
    gate    a candidate run judged against a baseline

Imports: the base layer, `simrun.scoring` and `simrun.simulator`; only `simrun` (the package's
`__init__`) imports this, and the command line reaches it through `simrun`'s exports alone.
"""

from simrun._api._gate import GateOutcome, chosen_baseline, gate
from simrun._api._run import (
    Outcome,
    PreparedRun,
    ResumeOptions,
    RunEvents,
    RunOptions,
    RunStart,
    demo,
    interrupted_run,
    prepare,
    prepare_demo,
    prepare_resume,
    resume,
    run,
    run_async,
    write_verdict_json,
)

__all__ = ["GateOutcome", "Outcome", "PreparedRun", "ResumeOptions", "RunEvents", "RunOptions", "RunStart",
           "chosen_baseline", "demo", "gate", "interrupted_run", "prepare", "prepare_demo", "prepare_resume", "resume",
           "run", "run_async", "write_verdict_json"]

if __name__ != "simrun._api":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun._api; import it as `simrun._api`, not `{__name__}`")
