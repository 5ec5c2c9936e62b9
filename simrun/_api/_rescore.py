"""A stored run's transcripts scored again with the current scorer: no runtime, no model, no
cost (`simrun rescore`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simrun._api._report import verdict_now
from simrun.scoring.gate import RunVerdict
from simrun.scoring.store import Store, rescore_run
from simrun.simulator import project_dataset, project_db


@dataclass(frozen=True)
class Rescored:
    """A run scored again: how many conversations, by which scorer (and which before), how many
    changed (their findings, goal or end reason), and the verdict it now has."""

    run_id: str
    conversations: int
    changed: int
    previous_version: str
    scorer_version: str
    verdict: RunVerdict


def rescore(run: str = "latest", *, db: str | Path | None = None, config: str | Path | None = None,
            personas: str | Path | None = None, goals: str | Path | None = None) -> Rescored:
    """Score a stored run's transcripts (a run id, or "latest") again with the current scorer,
    against the project's personas and goals (or the folders given), and judge it again as
    `report` would."""
    dataset = project_dataset(config, personas, goals)
    database = project_db(db, config)
    with Store(database, create=False) as store:
        result = rescore_run(store, run, dataset)
        verdict = verdict_now(store, result.run_id, database)
    return Rescored(result.run_id, result.conversations, result.changed, result.previous_version,
                    result.scorer_version, verdict)
