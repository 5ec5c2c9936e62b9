"""Personas and goals: the YAML files a project writes, validated at the boundary.

    files       load_dataset(personas_dir, goals_dir) -> Dataset; canonical_json; json_schemas
    models      the pydantic models of a persona and a goal file (extra fields forbidden)
    facts       a goal's `{fact}` templates: checked when the file is read, filled in a run
    goal_sql    a goal's `success.sql`, run in a sandbox as hostile code
    sql_names   the record types, operations and JSON paths a success query names
    patterns    the regular expressions goal files write, matched in linear time (RE2)

Imports: the shared vocabulary of `simrun.scoring` only. Everything else reads its personas and
goals from here: the judge, the store (bundles, rescore) and the simulator.
"""

from __future__ import annotations

from simrun.scoring.dataset import _patterns as patterns
from simrun.scoring.dataset._files import Dataset, canonical_json, json_schemas, load_dataset
from simrun.scoring.dataset._goal_sql import EVENTS_UNKNOWN, NotAnswered, QueryFailed, known_answer, sql_holds
from simrun.scoring.dataset._models import Goal, Persona, Question, RecordCheck, Step
from simrun.scoring.dataset._per_goal import per_goal
from simrun.scoring.dataset._sql_names import sql_names

__all__ = [
    "EVENTS_UNKNOWN",
    "Dataset",
    "Goal",
    "NotAnswered",
    "Persona",
    "QueryFailed",
    "Question",
    "RecordCheck",
    "Step",
    "canonical_json",
    "json_schemas",
    "known_answer",
    "load_dataset",
    "patterns",
    "per_goal",
    "sql_holds",
    "sql_names",
]

if __name__ != "simrun.scoring.dataset":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.scoring.dataset; import it as `simrun.scoring.dataset`, not `{__name__}`")
