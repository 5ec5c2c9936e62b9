"""simrun's judgement: everything after a conversation, and what it is judged against.

Imports: each layer below may import the ones above it in this list, never one below, and none
imports the simulator, so that rescore, import and the workers of a cluster can judge without
it (`tests/test_layering.py` holds every rule here):

    simrun.scoring (these modules)  the shared vocabulary: errors (the one error hierarchy),
                                    transcript (the evidence a conversation leaves, and findings),
                                    protocol (what a runtime may send), secrets, untrusted_text,
                                    input_files, field_errors (validation errors in words),
                                    settings (simrun.toml's and budgets.toml's models, read from a
                                    file or a store), classes (the classes' names), labels, money
    simrun.scoring.dataset          personas and goals: the YAML models, loading, goal SQL, patterns
    simrun.scoring.checks           the judge: pure functions from a transcript to findings
    simrun.scoring.store            DuckDB: runs, conversations, turns, findings; rates; bundles
    simrun.scoring.gate             verdicts: the merge gate, baselines, statistics, release criteria
    simrun.scoring.pages            the HTML report and the dashboard

Each module is private (`_name.py`); each package exports what the others use, imported on
first use (so `import simrun.scoring` stays cheap), among them:

    simrun.scoring.checks.score(transcript, goal, persona) -> Scorecard   (pure; no I/O, no model)
    simrun.scoring.store.Store(path)          (DuckDB: runs, conversations, turns, findings)
    simrun.scoring.store.class_rates(store, run_id), outcome(store, run_id)
    simrun.scoring.gate.gate_verdict(baseline, candidate, settings) -> GateResult
    simrun.scoring.pages.build_report(store, run_id, out_dir) -> Path
    simrun.scoring.pages.build_dashboard(stores, out) -> Path   (every run, like with like)

A team's code uses the API above all of this (`import simrun`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simrun._lazy import exported

if TYPE_CHECKING:
    from simrun.scoring import _secrets as secrets
    from simrun.scoring._commits import recorded_commit, short_commit
    from simrun.scoring._errors import (
        BaselineError,
        BudgetCut,
        ClusterLost,
        ConfigError,
        GateError,
        ProviderFailure,
        RuntimeFault,
        RuntimeUnavailable,
        SimrunError,
        StoreError,
        UserModelUnavailable,
    )
    from simrun.scoring._labels import clean_labels
    from simrun.scoring._money import parse_usd, stored_usd, usd
    from simrun.scoring._protocol import (
        SNAPSHOT,
        TURN_FIELDS,
        Audit,
        Started,
        State,
        TurnResult,
        split_snapshot,
        violations,
    )
    from simrun.scoring._secrets import redact, register_header
    from simrun.scoring._settings import (
        FOREIGN,
        Budgets,
        Price,
        Project,
        RunSection,
        RuntimeSection,
        UserSection,
        load_budgets,
        load_project,
        stored_sequential,
    )
    from simrun.scoring._storable import MAX_INT_DIGITS, SUSPECT_ESCAPE, unstorable
    from simrun.scoring._transcript import Scorecard, Transcript, TurnRecord, UserTurn, error_evidence
    from simrun.scoring._untrusted_text import CommandGuard, escaped, markdown_text, one_line, without_commands
    from simrun.scoring._writing import append_file, write_file

__all__ = [
    "CommandGuard",
    "recorded_commit",
    "short_commit",
    "BaselineError",
    "Audit",
    "BudgetCut",
    "Budgets",
    "ClusterLost",
    "ConfigError",
    "FOREIGN",
    "GateError",
    "MAX_INT_DIGITS",
    "Price",
    "Project",
    "ProviderFailure",
    "RunSection",
    "RuntimeFault",
    "RuntimeSection",
    "RuntimeUnavailable",
    "SNAPSHOT",
    "SUSPECT_ESCAPE",
    "Scorecard",
    "SimrunError",
    "Started",
    "State",
    "StoreError",
    "TURN_FIELDS",
    "Transcript",
    "TurnRecord",
    "TurnResult",
    "UserModelUnavailable",
    "UserSection",
    "UserTurn",
    "append_file",
    "clean_labels",
    "error_evidence",
    "escaped",
    "load_budgets",
    "load_project",
    "markdown_text",
    "one_line",
    "parse_usd",
    "redact",
    "register_header",
    "secrets",
    "split_snapshot",
    "stored_sequential",
    "stored_usd",
    "unstorable",
    "usd",
    "violations",
    "without_commands",
    "write_file",
]
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "recorded_commit": ("simrun.scoring._commits", "recorded_commit"),
    "short_commit": ("simrun.scoring._commits", "short_commit"),
    "BaselineError": ("simrun.scoring._errors", "BaselineError"),
    "Audit": ("simrun.scoring._protocol", "Audit"),
    "BudgetCut": ("simrun.scoring._errors", "BudgetCut"),
    "Budgets": ("simrun.scoring._settings", "Budgets"),
    "ClusterLost": ("simrun.scoring._errors", "ClusterLost"),
    "ConfigError": ("simrun.scoring._errors", "ConfigError"),
    "FOREIGN": ("simrun.scoring._settings", "FOREIGN"),
    "GateError": ("simrun.scoring._errors", "GateError"),
    "MAX_INT_DIGITS": ("simrun.scoring._storable", "MAX_INT_DIGITS"),
    "Price": ("simrun.scoring._settings", "Price"),
    "Project": ("simrun.scoring._settings", "Project"),
    "ProviderFailure": ("simrun.scoring._errors", "ProviderFailure"),
    "RunSection": ("simrun.scoring._settings", "RunSection"),
    "RuntimeFault": ("simrun.scoring._errors", "RuntimeFault"),
    "RuntimeSection": ("simrun.scoring._settings", "RuntimeSection"),
    "RuntimeUnavailable": ("simrun.scoring._errors", "RuntimeUnavailable"),
    "SNAPSHOT": ("simrun.scoring._protocol", "SNAPSHOT"),
    "SUSPECT_ESCAPE": ("simrun.scoring._storable", "SUSPECT_ESCAPE"),
    "Scorecard": ("simrun.scoring._transcript", "Scorecard"),
    "SimrunError": ("simrun.scoring._errors", "SimrunError"),
    "Started": ("simrun.scoring._protocol", "Started"),
    "State": ("simrun.scoring._protocol", "State"),
    "StoreError": ("simrun.scoring._errors", "StoreError"),
    "TURN_FIELDS": ("simrun.scoring._protocol", "TURN_FIELDS"),
    "Transcript": ("simrun.scoring._transcript", "Transcript"),
    "TurnRecord": ("simrun.scoring._transcript", "TurnRecord"),
    "TurnResult": ("simrun.scoring._protocol", "TurnResult"),
    "UserModelUnavailable": ("simrun.scoring._errors", "UserModelUnavailable"),
    "UserSection": ("simrun.scoring._settings", "UserSection"),
    "UserTurn": ("simrun.scoring._transcript", "UserTurn"),
    "clean_labels": ("simrun.scoring._labels", "clean_labels"),
    "error_evidence": ("simrun.scoring._transcript", "error_evidence"),
    "escaped": ("simrun.scoring._untrusted_text", "escaped"),
    "append_file": ("simrun.scoring._writing", "append_file"),
    "write_file": ("simrun.scoring._writing", "write_file"),
    "load_budgets": ("simrun.scoring._settings", "load_budgets"),
    "load_project": ("simrun.scoring._settings", "load_project"),
    "one_line": ("simrun.scoring._untrusted_text", "one_line"),
    "CommandGuard": ("simrun.scoring._untrusted_text", "CommandGuard"),
    "markdown_text": ("simrun.scoring._untrusted_text", "markdown_text"),
    "without_commands": ("simrun.scoring._untrusted_text", "without_commands"),
    "parse_usd": ("simrun.scoring._money", "parse_usd"),
    "redact": ("simrun.scoring._secrets", "redact"),
    "register_header": ("simrun.scoring._secrets", "register_header"),
    "secrets": ("simrun.scoring._secrets", None),
    "split_snapshot": ("simrun.scoring._protocol", "split_snapshot"),
    "stored_sequential": ("simrun.scoring._settings", "stored_sequential"),
    "stored_usd": ("simrun.scoring._money", "stored_usd"),
    "unstorable": ("simrun.scoring._storable", "unstorable"),
    "usd": ("simrun.scoring._money", "usd"),
    "violations": ("simrun.scoring._protocol", "violations"),
}


def __getattr__(name: str) -> object:
    return exported(__name__, _EXPORTS, name)


def __dir__() -> list[str]:
    # The exports are there before their first use: `dir()`, `help()` and completion list them.
    return sorted({*globals(), *__all__})
