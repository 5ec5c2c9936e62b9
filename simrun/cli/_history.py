"""Where the commands find a history, and the gate's baseline read from one.

`simrun gate --history LOC` judges the candidate against the newest finished run of the line it
would merge into (`simrun.scoring.store.compared_line`: a pull request's base, main unless its
labels say otherwise), read from the history as a run of a database is. With no such run yet (the
first pull request of a project), the candidate is not gated, says why, and passes or fails on
its guarantees and release criteria alone.
"""

from __future__ import annotations

import dataclasses

import typer

from simrun._api import write_verdict_json
from simrun._errors import ConfigError, GateError, StoreError
from simrun._settings import Budgets, load_budgets
from simrun.scoring.gate import RunSummary, RunVerdict, summary_from_store, verdict_of_run
from simrun.scoring.store import Store, compared_line, history_store, is_url, newest_of_line
from simrun.simulator import given_file, load_project_file, project_db

HISTORY = typer.Option(None, "--history", help="Read the runs kept in this history instead (a folder, or an "
                       "object-store URL such as s3://bucket/prefix; docs/how-to/dashboards.md).")


def history_location(given: str | None) -> str:
    """--history, else run.history of simrun.toml (a folder relative to it, or a URL)."""
    if given:
        return given
    config_file = given_file(None, "simrun.toml", "--config")
    found = load_project_file().run.history if config_file else None
    if not found or config_file is None:
        raise ConfigError("no history: pass --history FOLDER|URL, or set run.history in simrun.toml",
                          field="--history")
    return found if is_url(found) else str(config_file.parent / found)


def baseline_from_history(location: str, candidate: str, db: str | None,
                          other: str | None = None) -> tuple[RunSummary | None, str]:
    """The history's newest run of the candidate's compared line as a baseline, named by its place
    in the history (never by the temporary copy it was read from), and what it is; (None, why)
    when the history holds no such run. `other`: a baseline given besides, refused (one baseline
    per gate)."""
    if other is not None:
        raise ConfigError("give one of --history and --baseline/--baseline-ref, not both", field="--history")
    with Store(project_db(db), create=False) as store:
        try:
            row = store.run(candidate)
        except StoreError as exc:
            raise GateError(f"no candidate run {candidate!r}: {exc}") from None
    line = compared_line(row["labels"], row["git_branch"]) or "main"
    with history_store(location) as history:
        # The candidate itself may be in the history (a rerun of main): the run before it, then.
        found = newest_of_line(history, line, before=row["started_at"])
        if found is None:
            return None, (f"not gated: the history {location} holds no finished run of {line} yet, so there is no "
                          "baseline; judged on its guarantees and release criteria alone")
        summary = summary_from_store(history, found)
    named = dataclasses.replace(summary, source=f"run {found} of the history {location}")
    return named, f"gated against run {found}, the newest of {line} in the history {location}"


def ungated_verdict(candidate: str, db: str | None, budgets: str | None, verdict_json: str | None) -> RunVerdict:
    """The candidate's verdict with no baseline: guarantees and release criteria (written as
    JSON to `verdict_json` too, as the gate writes it)."""
    budgets_file = given_file(budgets, "budgets.toml", "--budgets")
    money = load_budgets(budgets_file) if budgets_file else Budgets()
    with Store(project_db(db), create=False) as store:
        verdict = verdict_of_run(store, candidate, money.release if budgets else None, gate_settings=money.gate,
                                 fallback=money.release)
    write_verdict_json(verdict, verdict_json)
    return verdict

