"""The Python API's functions and the values they hand out, behind `simrun`'s own exports: one
function for each thing the command line does, each returning a typed record and printing
nothing.

    run             a run: from a project to a verdict (`run`, `run_async`, `prepare`, `resume`, `demo`)
    gate            a candidate run judged against a baseline, a history's newest run, or none
    baselines       which baseline a call compares against; one blessed from stored runs
    history         runs kept beyond their job, and the gate's baseline read from there
    report          a stored run's verdict and report made again; what its summary shows beside the rates
    dashboard       every run of one or more databases on one page
    runs            stored runs read back: the list, a run's findings, one conversation
    merge           a run's shards joined into one run
    rescore         a stored run scored again with the current scorer
    bundles         a run exported as a bundle, and a bundle imported into a new run
    checks          a project checked before a run: validate, check-runtime, what it would cost
    check_user      a user model measured where the answer is known
    init            a project started; the JSON Schemas of its files
    step_summary    the verdict in GitHub Actions' step summary, when a caller asks

Imports: the base layer, `simrun.scoring` and `simrun.simulator`; only `simrun` (the package's
`__init__`) imports this, and the command line reaches it through `simrun`'s exports alone.
"""

from simrun._api._baselines import Blessed, bless
from simrun._api._bundles import Exported, Imported, export_bundle, import_bundle
from simrun._api._check_user import CheckKept, PreparedCheckUser, UserCheck, check_user, prepare_check_user
from simrun._api._checks import CostEstimate, RuntimeCheck, Validated, check_runtime, estimate_cost, validate
from simrun._api._dashboard import dashboard
from simrun._api._gate import GateOutcome, gate
from simrun._api._history import HistoryBaseline, Kept, keep_in_history
from simrun._api._init import NewProject, init, write_schemas
from simrun._api._merge import Merged, merge
from simrun._api._report import Report, RunFacts, report, run_facts
from simrun._api._rescore import Rescored, rescore
from simrun._api._run import (
    Outcome,
    PreparedRun,
    RunEvents,
    RunStart,
    demo,
    prepare,
    prepare_demo,
    prepare_resume,
    resume,
    run,
    run_async,
)
from simrun._api._runs import (
    ConversationEnd,
    FoundIn,
    RunContents,
    StoredConversation,
    StoredRun,
    contents,
    conversation,
    runs,
)
from simrun._api._step_summary import write_step_summary

__all__ = [
    "Blessed", "CheckKept", "ConversationEnd", "CostEstimate", "Exported", "FoundIn", "GateOutcome",
    "HistoryBaseline", "Imported", "Kept", "Merged", "NewProject", "Outcome", "PreparedCheckUser", "PreparedRun",
    "Report", "Rescored", "RunContents", "RunEvents", "RunFacts", "RunStart", "RuntimeCheck", "StoredConversation",
    "StoredRun", "UserCheck", "Validated",
    "bless", "check_runtime", "check_user", "contents", "conversation", "dashboard", "demo",
    "estimate_cost", "export_bundle", "gate", "import_bundle", "init", "keep_in_history", "merge", "prepare",
    "prepare_check_user", "prepare_demo", "prepare_resume", "report", "rescore", "resume", "run", "run_async",
    "run_facts", "runs", "validate", "write_schemas", "write_step_summary",
]

if __name__ != "simrun._api":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun._api; import it as `simrun._api`, not `{__name__}`")
