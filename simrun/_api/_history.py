"""The history: finished runs kept beyond the job that ran them, one file each, and the gate's
baseline read from it.

`keep_in_history` keeps a finished run there (`simrun history keep`). `gate(history=...)` judges a
candidate against the newest finished run of the line it would merge into
(`simrun.scoring.store.compared_line`: a pull request's base, main unless its labels say
otherwise), read from the history as a run of a database is: `baseline_from_history`. With no
such run yet (the first pull request of a project) there is no baseline, and the candidate is
judged on its guarantees and release criteria alone.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from simrun._errors import ConfigError, GateError, Parameter, StoreError
from simrun.scoring.gate import RunSummary, summary_from_store
from simrun.scoring.store import Store, compared_line, history_store, keep_run, newest_of_line
from simrun.simulator import project_db, project_history


def history_location(history: str | Path | None = None, config: str | Path | None = None) -> str:
    """`history` (a folder, or an object-store URL), else run.history of simrun.toml (a folder
    relative to it, or a URL)."""
    if history:
        return str(history)
    found = project_history(config)
    if found is None:
        raise ConfigError(("no history: give ", Parameter("history"), " (a folder or an object-store URL), or set "
                           "run.history in simrun.toml"), field="history")
    return found


@dataclass(frozen=True)
class Kept:
    """A finished run kept in the history: its id, and the file it is kept as."""

    run_id: str
    where: str


def keep_in_history(run: str = "latest", *, history: str | Path | None = None, db: str | Path | None = None,
         config: str | Path | None = None) -> Kept:
    """Keep a finished run (a run id, or "latest") in the history (a folder, or an object-store
    URL such as s3://bucket/prefix; default: run.history of simrun.toml), as one file written
    whole and never overwritten."""
    run_id, where = keep_run(project_db(db, config), run, history_location(history, config))
    return Kept(run_id, where)


@dataclass(frozen=True)
class HistoryBaseline:
    """The baseline a gate took from a history: the newest finished run of the candidate's
    compared `line` kept at `location` (`run_id`, `summary`), or none yet (both None)."""

    location: str
    line: str
    run_id: str | None
    summary: RunSummary | None


def baseline_from_history(location: str, candidate: str, database: str | Path) -> HistoryBaseline:
    """The history's newest run of the candidate's compared line (the candidate is a run of the
    database at `database`), named by its place in the history (never by the temporary copy it
    was read from)."""
    with Store(database, create=False) as store:
        try:
            row = store.run(candidate)
        except StoreError as exc:
            raise GateError(f"no candidate run {candidate!r}: {exc}") from None
    line = compared_line(row["labels"], row["git_branch"]) or "main"
    with history_store(location) as history:
        # The candidate itself may be in the history (a rerun of main): the run before it, then.
        found = newest_of_line(history, line, before=row["started_at"])
        if found is None:
            return HistoryBaseline(location, line, None, None)
        summary = summary_from_store(history, found)
    named = dataclasses.replace(summary, source=f"run {found} of the history {location}")
    return HistoryBaseline(location, line, found, named)
