"""The store: every run in DuckDB, and what is read back out of it.

    database    Store: runs, conversations, turns, findings, checks and model calls
    rows        a transcript as the store's rows hold it (what a Ray worker sends back)
    migrations  the schema, as numbered migrations recorded in the database itself
    duck        transactions, and bulk inserts with secrets cut out
    run_ids     run ids, made in one place and checked wherever they come from
    rates       class rates with intervals, outcomes, the worst conversations: SQL over a run
    rescore     a stored run scored again by the current judge, at no cost
    bundle      a run exported as items, and items imported to be scored
    merge       the shards of one run joined into one
    seen        what a run's stores held, and the goals that name what none held
    history     finished runs kept as one file each in a folder or an object store, read back as one store

Imports: the shared vocabulary of `simrun.scoring`, `simrun.scoring.dataset` and the judge
(`simrun.scoring.checks`), never the gate or the pages.
"""

from __future__ import annotations

from simrun.scoring.store import _rates as rates
from simrun.scoring.store._bundle import export_bundle, import_bundle, load_bundle, write_bundle
from simrun.scoring.store._database import Store, reading
from simrun.scoring.store._duck import one_row, reason
from simrun.scoring.store._history import (
    compared_line,
    history_store,
    is_url,
    keep_run,
    line_of,
    newest_of_line,
)
from simrun.scoring.store._merge import merge
from simrun.scoring.store._model_calls import (
    WORST_CASE_CALLS,
    conversation_costs,
    replay_answers,
    save_user_check,
    spend,
    user_check,
)
from simrun.scoring.store._rates import EXCLUDED_ENDS, Outcome, Rate, class_rates, outcome, significant, wilson_sql
from simrun.scoring.store._reasons import unverifiable_reasons
from simrun.scoring.store._rescore import rescore_run
from simrun.scoring.store._rows import EncodedTranscript, Finished, JsonText, encoded_or_stand_in, labels_of
from simrun.scoring.store._run_ids import RUN_ID, checked_run_id, identifying, new_run_id
from simrun.scoring.store._seen import record_goal_problems, stored_goal_problems

__all__ = [
    "EXCLUDED_ENDS",
    "EncodedTranscript",
    "Finished",
    "JsonText",
    "Outcome",
    "RUN_ID",
    "Rate",
    "Store",
    "WORST_CASE_CALLS",
    "checked_run_id",
    "class_rates",
    "compared_line",
    "conversation_costs",
    "encoded_or_stand_in",
    "export_bundle",
    "history_store",
    "identifying",
    "import_bundle",
    "is_url",
    "keep_run",
    "labels_of",
    "line_of",
    "load_bundle",
    "merge",
    "new_run_id",
    "newest_of_line",
    "one_row",
    "outcome",
    "rates",
    "reading",
    "reason",
    "record_goal_problems",
    "replay_answers",
    "rescore_run",
    "save_user_check",
    "significant",
    "spend",
    "stored_goal_problems",
    "unverifiable_reasons",
    "user_check",
    "wilson_sql",
    "write_bundle",
]

if __name__ != "simrun.scoring.store":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.scoring.store; import it as `simrun.scoring.store`, not `{__name__}`")
