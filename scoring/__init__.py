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

The public surface, for Python users (imported on first use, so `import simrun.scoring` stays
cheap):

    score(transcript, goal, persona) -> Scorecard     (pure; no I/O, no model)
    Store(path)                                       (DuckDB: runs, conversations, turns, findings)
    class_rates(store, run_id), outcome(store, run_id)
    gate_verdict(baseline, candidate, settings) -> GateResult
    build_report(store, run_id, out_dir) -> Path
    build_dashboard(stores, out) -> Path              (every run, like with like)
"""

from __future__ import annotations

import importlib
from typing import Any

_CHECKS = "simrun.scoring.checks.scorer"
_EXPORTS = {
    "score": _CHECKS, "ALL_CLASSES": _CHECKS, "GUARANTEES": _CHECKS, "PROGRESS_CLASSES": _CHECKS,
    "SCORER_VERSION": _CHECKS,
    "Store": "simrun.scoring.store.database",
    "class_rates": "simrun.scoring.store.rates", "outcome": "simrun.scoring.store.rates",
    "gate_verdict": "simrun.scoring.gate.compare",
    "build_report": "simrun.scoring.pages.report", "build_dashboard": "simrun.scoring.pages.dashboard",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'simrun.scoring' has no attribute {name!r}")
