"""Runs moved as bundles: a run's conversations exported (turns, responses, whole records), and
a bundle's recorded conversations scored into a new run, offline (`simrun export`, `simrun import`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simrun._api._report import verdict_now
from simrun._version import __version__
from simrun.scoring.gate import RunVerdict
from simrun.scoring.store import Store, load_bundle, new_run_id, write_bundle
from simrun.scoring.store import export_bundle as bundle_of
from simrun.scoring.store import import_bundle as scored_bundle
from simrun.simulator import project_dataset, project_db


@dataclass(frozen=True)
class Exported:
    """A run exported: its id, how many items the bundle holds, and where it was written."""

    run_id: str
    items: int
    path: Path


def export_bundle(run: str = "latest", *, out: str | Path, db: str | Path | None = None,
                  config: str | Path | None = None) -> Exported:
    """Write a stored run's conversations (a run id, or "latest") to `out` as a Plumbline-style
    bundle: turns, responses, whole records."""
    with Store(project_db(db, config), create=False) as store:
        bundle = bundle_of(store, run, producer=f"simrun {__version__}")
    path = write_bundle(bundle, out)
    return Exported(bundle["run"]["run_id"], len(bundle["items"]), Path(path))


@dataclass(frozen=True)
class Imported:
    """A bundle scored into a new run: its id and database, how many conversations, what was said
    of the bundle's items (`warnings`), and the run's verdict."""

    run_id: str
    db: Path
    conversations: int
    warnings: tuple[str, ...]
    verdict: RunVerdict


def import_bundle(bundle: str | Path, *, db: str | Path | None = None, config: str | Path | None = None,
                  personas: str | Path | None = None, goals: str | Path | None = None) -> Imported:
    """Score the recorded conversations of a bundle (from `export_bundle`, or Plumbline-style)
    with the current scorer into a new run of the database `db` (default: the project's),
    against the project's personas and goals (or the folders given), offline."""
    loaded = load_bundle(bundle)
    dataset = project_dataset(config, personas, goals)
    database = project_db(db, config)
    with Store(database) as store:
        result = scored_bundle(store, loaded, dataset, run_id=new_run_id(), source=str(bundle),
                               simrun_version=__version__)
        verdict = verdict_now(store, result.run_id, database)
    return Imported(result.run_id, Path(database), result.conversations, tuple(result.warnings), verdict)
