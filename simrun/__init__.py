"""simrun: evaluate conversational assistants with simulated users, and gate releases on the rates.

The Python API, on which the `simrun` command stands:

    outcome = simrun.run("simrun.toml", budget=5)            # or: await simrun.run_async(...)
    assert outcome.passed, outcome.verdict                   # the verdict's lines when it fails
    outcome.exit_code, outcome.run_id, outcome.report

    judged = simrun.gate(candidate="latest", baseline="baselines/main.json")

Every command of the `simrun` command line is a function here (`report`, `rescore`, `bless`,
`export_bundle`, `import_bundle`, `dashboard`, `runs`, `check_runtime`, `check_user`, `init`,
`demo`, ...), with typed keyword arguments, returning a typed record and printing nothing.
`prepare` checks a run without spending anything (bad input raises `ConfigError` naming the file,
line or parameter); `PreparedRun.execute` runs it; `RunEvents` hears a run as it goes. Every
error simrun raises on purpose is a `SimrunError`, whose message says the fix. `simrun.text`
holds the words the records are shown in.

The package, by layer (tests/test_layering.py holds the rules):

    _errors, _settings, ...   the base layer: errors, settings, protocol, transcript, secrets, money, ...
    scoring/     the judge, the store, the gate and the pages: everything after a conversation
    simulator/   runs persona x goal conversations against a runtime and records them
    _api/        the API above: one function for each thing the command line does
    text         the words the API's records are shown in
    cli/         the `simrun` command, a thin shell over these exports alone
    examples/    the reference runtimes (TripDesk, LibDesk), written as an outside runtime would be

Imports: the base layer, `simrun.simulator`, `simrun.scoring` and `simrun._api`; `simrun.cli` is
on top, imports nothing of simrun but these exports, and nothing imports it.
"""

from __future__ import annotations

from simrun import text
from simrun._api import (
    Blessed,
    CheckKept,
    ConversationEnd,
    CostEstimate,
    Exported,
    FoundIn,
    GateOutcome,
    HistoryBaseline,
    Imported,
    Kept,
    Merged,
    NewProject,
    Outcome,
    PreparedCheckUser,
    PreparedRun,
    Report,
    Rescored,
    RunContents,
    RunEvents,
    RunFacts,
    RunStart,
    RuntimeCheck,
    StoredConversation,
    StoredRun,
    UserCheck,
    Validated,
    bless,
    check_runtime,
    check_user,
    contents,
    conversation,
    dashboard,
    demo,
    estimate_cost,
    export_bundle,
    gate,
    import_bundle,
    init,
    keep_in_history,
    merge,
    prepare,
    prepare_check_user,
    prepare_demo,
    prepare_resume,
    report,
    rescore,
    resume,
    run,
    run_async,
    run_facts,
    runs,
    validate,
    write_schemas,
    write_step_summary,
)
from simrun._errors import (
    BaselineError,
    BudgetSyntaxError,
    BundleError,
    ClusterLost,
    ConfigError,
    GateError,
    Parameter,
    RescoreError,
    RuntimeUnavailable,
    SimrunError,
    StoreError,
    UserModelUnavailable,
)
from simrun._settings import Budgets, Project, RuntimeSection, SequentialSection
from simrun._transcript import CheckResult, Finding, Scorecard, Transcript, TurnRecord, UserTurn
from simrun._version import __version__
from simrun.scoring.dataset import Dataset, Goal, Persona
from simrun.scoring.gate import (
    Bound,
    CellRepetitions,
    ClassVerdict,
    Competence,
    Counts,
    Criterion,
    Flip,
    Futility,
    GateResult,
    ItemChange,
    Kind,
    Line,
    Look,
    MovedCell,
    NewSlice,
    Pairing,
    ReleaseCheck,
    RunSummary,
    RunVariation,
    RunVerdict,
    Scope,
    Sequential,
    Sharing,
    SliceVerdict,
    Status,
    Unchecked,
    verdict_json,
)
from simrun.scoring.gate import junit_xml as verdict_junit
from simrun.scoring.gate import markdown as verdict_markdown
from simrun.scoring.store import EncodedTranscript, Finished, Rate, Store
from simrun.scoring.store import Outcome as RunRates  # a run's rates and ends (`RunVerdict.outcome`)
from simrun.simulator import (
    ClusterExecutor,
    Conformance,
    Estimate,
    GoalCheck,
    Install,
    Ledger,
    Plan,
    RunProgress,
    RunResult,
    Seen,
    Usage,
    Violation,
)
from simrun.simulator.users import ReplayCache

__all__ = [
    # a run, the demo
    "run", "run_async", "prepare", "PreparedRun", "resume", "prepare_resume", "demo", "prepare_demo", "Outcome",
    # what a run tells as it goes, and what it hands over
    "RunEvents", "RunStart", "RunProgress", "Finished", "Estimate", "RunResult", "Sequential", "Store", "Plan",
    "Ledger", "ReplayCache", "run_facts", "RunFacts",
    # the gate, baselines and the history
    "gate", "GateOutcome", "GateResult", "RunSummary", "bless", "Blessed", "keep_in_history", "Kept",
    "HistoryBaseline",
    # stored runs: read back, reported, merged, scored again, moved
    "runs", "StoredRun", "contents", "RunContents", "ConversationEnd", "FoundIn", "conversation",
    "StoredConversation", "report", "Report", "dashboard", "merge", "Merged", "rescore", "Rescored",
    "export_bundle", "Exported", "import_bundle", "Imported",
    # a project checked before a run, and a user model measured
    "validate", "Validated", "check_runtime", "RuntimeCheck", "estimate_cost", "CostEstimate", "check_user",
    "prepare_check_user", "PreparedCheckUser", "UserCheck", "CheckKept",
    # a project started
    "init", "NewProject", "write_schemas",
    # the verdict, and what renders it
    "RunVerdict", "Status", "Line", "Kind", "Scope", "verdict_json", "verdict_markdown", "verdict_junit",
    "write_step_summary", "text",
    # the records those hand out, for a caller's type checker
    "Budgets", "Project", "RuntimeSection", "SequentialSection", "Dataset", "Goal", "Persona", "Transcript",
    "TurnRecord", "UserTurn", "Scorecard", "CheckResult", "Finding", "EncodedTranscript", "RunRates", "Rate",
    "ReleaseCheck", "Criterion", "Unchecked", "ClassVerdict", "SliceVerdict", "MovedCell", "Flip", "Pairing",
    "Sharing", "NewSlice", "ItemChange", "RunVariation", "Counts", "CellRepetitions", "Look", "Bound", "Futility",
    "Competence", "Conformance", "Violation", "GoalCheck", "Install", "Seen", "Usage", "ClusterExecutor",
    # the errors simrun raises on purpose: every one a SimrunError whose message says the fix
    "SimrunError", "ConfigError", "BudgetSyntaxError", "GateError", "BaselineError", "StoreError", "BundleError",
    "RescoreError", "RuntimeUnavailable", "UserModelUnavailable", "ClusterLost", "Parameter",
    "__version__",
]
