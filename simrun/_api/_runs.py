"""Stored runs read back: the list of runs (`simrun runs`), a run's conversations and findings,
and one conversation with its evidence (`simrun show`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from simrun._errors import ConfigError
from simrun._transcript import Finding, Transcript
from simrun.scoring.checks import ALL_CLASSES
from simrun.scoring.store import Store, history_store, unverifiable_reasons
from simrun.simulator import project_db


@dataclass(frozen=True)
class StoredRun:
    """One run of a database (or a history), as `simrun runs` lists it."""

    run_id: str
    started_at: dt.datetime
    status: str                     # finished, interrupted, budget_stopped, ..., killed
    conversations: int
    goal_rate: float | None         # the share of the decided conversations that reached their goal
    spent_usd: Decimal
    dataset_hash: str
    user: str                       # who played the user: scripted, openai:<model>, ...
    labels: tuple[str, ...]
    runtime_version: str | None
    git_commit: str | None          # `<sha>` or `<sha>-dirty`, as recorded
    git_branch: str | None


def runs(*, db: str | Path | None = None, history: str | Path | None = None,
         config: str | Path | None = None) -> list[StoredRun]:
    """The runs of the database `db` (default: the project's), or of the `history` (a folder, or
    an object-store URL) when given, newest first."""
    with history_store(str(history)) if history else Store(project_db(db, config), create=False) as store:
        rows = store.runs()
    # This call held the database's only write lock, so no run in it was running meanwhile: one
    # still marked running was killed (kill -9, a lost machine). Resuming finishes it.
    return [StoredRun(r["run_id"], r["started_at"], "killed" if r["status"] == "running" else r["status"],
                      r["conversations"], r["goal_rate"], Decimal(str(r["spent_usd"] or 0)), r["dataset_hash"],
                      r["user_backend"], tuple(r["labels"]), r["runtime_version"], r["git_commit"], r["git_branch"])
            for r in rows]


@dataclass(frozen=True)
class ConversationEnd:
    """How one conversation of a run ended, as `simrun show RUN` lists them."""

    conversation_id: str            # persona/goal/repetition
    end_reason: str
    goal_reached: bool | None       # None: UNVERIFIABLE
    session_id: str | None          # the runtime's own session id, when it gave one


@dataclass(frozen=True)
class FoundIn:
    """A finding of a class in one conversation of a run (runtime_error: its error's message)."""

    conversation_id: str
    turn: int | None
    detail: str


@dataclass(frozen=True)
class RunContents:
    """A run's conversations (none when one class was asked for) and its findings by class."""

    run_id: str
    conversations: tuple[ConversationEnd, ...]
    findings: Mapping[str, tuple[FoundIn, ...]]


def contents(run: str = "latest", *, cls: str | None = None, db: str | Path | None = None,
             config: str | Path | None = None) -> RunContents:
    """The conversations of a stored run (a run id, or "latest") and its findings by class; with
    `cls`, that class's findings alone (runtime_error too, though an end reason)."""
    _known_class(cls)
    with Store(project_db(db, config), create=False) as store:
        run_id = store.run(run)["run_id"]
        ends = () if cls is not None else tuple(ConversationEnd(*row) for row in store.conversation_list(run_id))
        grouped = {name: tuple(FoundIn(r["conversation_id"], r["turn"], r["detail"]) for r in rows)
                   for name, rows in store.findings_by_class(run_id, cls).items()}
    return RunContents(run_id, ends, grouped)


@dataclass(frozen=True)
class StoredConversation:
    """One stored conversation with its evidence: its transcript turn by turn, its findings,
    how it ended and what its goal came to, and why each class it could not decide is
    UNVERIFIABLE (class -> [(reason, 1)])."""

    run_id: str
    conversation_id: str
    transcript: Transcript
    findings: tuple[Finding, ...]
    end_reason: str
    goal_detail: str
    unverifiable: Mapping[str, list[tuple[str, int]]]


def conversation(run: str, conversation_id: str, *, db: str | Path | None = None,
                 config: str | Path | None = None) -> StoredConversation:
    """One conversation (persona/goal/repetition) of a stored run (a run id, or "latest")."""
    with Store(project_db(db, config), create=False) as store:
        run_id = store.run(run)["run_id"]
        transcript = store.transcript(run_id, conversation_id)
        findings = tuple(Finding(f["class"], f["turn"], f["detail"], f["evidence"] or {})
                         for f in store.findings(run_id, conversation_id))
        row = store.conversation_row(run_id, conversation_id)
        reasons = unverifiable_reasons(store, run_id, conversation_id)
    return StoredConversation(run_id, conversation_id, transcript, findings, row["end_reason"],
                              row["goal_detail"], reasons)


def _known_class(cls: str | None) -> None:
    if cls is not None and cls not in (*ALL_CLASSES, "runtime_error"):
        raise ConfigError(f"no class {cls!r}; classes are: {', '.join(ALL_CLASSES)}", field="cls")
