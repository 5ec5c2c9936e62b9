"""simrun's judge: scores conversations from the runtime's own stores, stores them, reports.

    score(transcript, goal, persona) -> Scorecard     (pure; no I/O, no model)
    Store(path)                                       (DuckDB: runs, conversations, turns, findings)
    class_rates(store, run_id), outcome(store, run_id)
    build_report(store, run_id, out_dir) -> Path
    build_dashboard(stores, out) -> Path              (scoring.dashboard: every run, like with like)
"""

from scoring.scorer import ALL_CLASSES, GUARANTEES, PROGRESS_CLASSES, SCORER_VERSION, score

__all__ = ["ALL_CLASSES", "GUARANTEES", "PROGRESS_CLASSES", "SCORER_VERSION", "score"]
