"""Rescoring: a stored run's transcripts scored again by the current scorer, at no cost.

Nothing is sent to a runtime or a model: the transcripts, store snapshots and audit streams in
DuckDB are all the scorer reads. The run then records the scorer version that scored it (and
the one before), so the gate compares it with runs of the same version.

A run is rescored against the personas and goals it was made with: the content hash of every
persona and goal its conversations used must match the current files, or nothing is changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from simrun._errors import RescoreError
from simrun.scoring.checks import SCORER_VERSION, score
from simrun.scoring.dataset import Dataset, Goal, Persona
from simrun.scoring.store._database import Store


@dataclass(frozen=True)
class RescoreResult:
    run_id: str
    conversations: int
    changed: int                # conversations whose verdicts, goal or end reason changed
    previous_version: str
    scorer_version: str


def dataset_items(dataset: Dataset) -> tuple[dict[str, Persona], dict[str, Goal], dict[str, str]]:
    return ({p.id: p for p in dataset.personas}, {g.id: g for g in dataset.goals}, dataset.item_hashes)


def check_items(used: set[tuple[str, str]], dataset: Dataset, recorded: dict[str, str] | None,
                where: str) -> list[str]:
    """Every persona and goal `used` must be in the dataset; returns those whose content changed."""
    personas, goals, hashes = dataset_items(dataset)
    changed = []
    for kind, ident in sorted(used):
        if ident not in (personas if kind == "persona" else goals):
            raise RescoreError(f"{where} needs {kind} {ident!r}, which is not in the current {kind}s folder; "
                               f"restore its YAML file (or pass --{kind}s to the folder that has it)")
        key = f"{kind}:{ident}"
        if recorded and key in recorded and recorded[key] != hashes.get(key):
            changed.append(key)
    return changed


def rescore_run(store: Store, run: str | None, dataset: Dataset) -> RescoreResult:
    row = store.run(run)
    run_id = row["run_id"]
    personas, goals, _ = dataset_items(dataset)
    rows = store.con.execute("SELECT conversation_id, persona, goal, end_reason, goal_reached FROM conversations "
                             "WHERE run_id = ? ORDER BY conversation_id", [run_id]).fetchall()
    used = {("persona", r[1]) for r in rows} | {("goal", r[2]) for r in rows}
    changed_items = check_items(used, dataset, row["dataset"], f"run {run_id}")
    if changed_items:
        raise RescoreError(f"run {run_id} was made with other versions of {', '.join(changed_items)}; rescoring "
                           "against the edited files would change what the run means: check out the personas "
                           "and goals it was made with, then rescore")
    before: dict[str, dict[str, str]] = {}     # conversation -> class -> its status as stored
    for cid, cls, status in store.con.execute("SELECT conversation_id, class, status FROM checks WHERE run_id = ?",
                                              [run_id]).fetchall():
        before.setdefault(cid, {})[cls] = status
    cards, changed = {}, 0
    for cid, persona, goal, end, reached in rows:
        transcript = store.transcript(run_id, cid)
        card = score(transcript, goals[goal], personas[persona])
        cards[cid] = card
        after = {cls: check.status for cls, check in card.checks.items()}
        if after != before.get(cid) or (card.end, card.goal_reached) != (end, reached):
            changed += 1
    store.replace_scores(run_id, cards, scorer_version=SCORER_VERSION)
    return RescoreResult(run_id, len(rows), changed, row["scorer_version"], SCORER_VERSION)
