"""The DuckDB store: every run, conversation, turn, finding, check and model call.

Each finished conversation is written in one transaction, so a run cut short keeps exactly the
conversations it finished. Transcripts can be read back whole, which is what `rescore`, `show`
and the report's worst transcripts stand on.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import functools
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import duckdb

from simrun._errors import StoreError
from simrun._secrets import cut, redact
from simrun._storable import JsonObject
from simrun._transcript import Scorecard, Transcript, TurnRecord, UserTurn
from simrun.scoring.store import _catalog as catalog
from simrun.scoring.store._duck import insert_rows, reason, transaction
from simrun.scoring.store._migrations import OlderSchema, check_current, migrate
from simrun.scoring.store._rows import (
    Finished,
    ModelCall,
    call_row,
    check_rows,
    finding_rows,
    from_json,
    labels_of,
    paid_only,
    stand_in,
    to_json,
)

DEFAULT_DB = "simrun.duckdb"

P = ParamSpec("P")
T = TypeVar("T")


def _writes(method: Callable[Concatenate[Store, P], T]) -> Callable[Concatenate[Store, P], T]:
    """A write that fails (a full disk, a read-only file) is one line that says so, and why."""
    @functools.wraps(method)
    def writing(self: Store, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(self, *args, **kwargs)
        except duckdb.Error as exc:
            why = reason(exc).removeprefix("TransactionContext Error: ")
            raise StoreError(f"{self.path}: cannot write to the database: {why}") from None
    return writing


def _why(exc: Exception) -> str:
    return reason(exc) if isinstance(exc, duckdb.Error) else f"{type(exc).__name__}: {cut(str(exc), 200)}"


@contextlib.contextmanager
def reading(path: str | Path) -> Iterator[Store]:
    """A database from elsewhere (a CI artifact), opened read-only, so nothing in it changes. One
    written by an older simrun cannot be brought up to date in place without writing to it: it
    is read through an up-to-date copy in a temporary folder instead."""
    try:
        store = Store(path, read_only=True)
    except OlderSchema:
        with tempfile.TemporaryDirectory(prefix="simrun-") as folder:
            duplicate = Path(folder) / "copy.duckdb"
            shutil.copyfile(path, duplicate)
            if Path(f"{path}.wal").exists():
                shutil.copyfile(f"{path}.wal", f"{duplicate}.wal")
            with Store(duplicate) as store:
                store.path = str(path)      # messages name the file the user gave
                yield store
        return
    with store:
        yield store


class Store:
    def __init__(self, path: str | Path = DEFAULT_DB, *, create: bool = True, read_only: bool = False,
                 attach: tuple[str | Path, ...] = ()) -> None:
        self.path, self.read_only = str(path), read_only
        where = Path(path)
        if (read_only or not create) and not where.exists():
            raise StoreError(f"{self.path}: no such database; check the path (a run creates it)")
        if not where.parent.is_dir():
            raise StoreError(f"{self.path}: the folder {where.parent} does not exist; create it or pass another --db")
        # A file (and write-ahead log) that did not exist holds nothing anyone crafted.
        new = not where.exists() and not Path(f"{path}.wal").exists()
        try:
            # External access off, before anything reads the file (`catalog.py`).
            self.con = catalog.connect(self.path, read_only=read_only, attach=attach)
        except duckdb.Error as exc:
            first = reason(exc)
            hint = ("another process is writing to it; wait for it to finish, or pass another --db"
                    if "lock" in first.lower() else "is it a DuckDB file? Pass another --db")
            raise StoreError(f"{self.path}: cannot open the database ({first}); {hint}") from None
        try:
            if not new:
                catalog.refuse_crafted(self.con)
            (check_current if read_only else migrate)(self.con)
        except duckdb.Error as exc:
            self.con.close()
            raise StoreError(f"{self.path}: cannot prepare the database: {reason(exc)}") from None
        except StoreError as exc:
            self.con.close()
            raise type(exc)(f"{self.path}: {exc}") from None

    def close(self) -> None:
        self.con.close()

    def for_another_thread(self) -> Store:
        """The same database through a connection of its own (a DuckDB cursor), for a writer
        thread: one DuckDB connection must not be used by two threads at once."""
        twin = copy.copy(self)
        twin.con = self.con.cursor()
        return twin

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing ----------------------------------------------------------------------------

    @_writes
    def create_run(self, run_id: str, *, config: JsonObject, dataset_hash: str, dataset: dict[str, str],
                   scorer_version: str, simrun_version: str, user_backend: str, runtime: str,
                   seed: int, repetitions: int, budget_usd: Decimal, labels: tuple[str, ...] | list[str] = (),
                   runtime_version: str | None = None, git_commit: str | None = None,
                   git_branch: str | None = None) -> None:
        self.con.execute(
            "INSERT INTO runs (run_id, started_at, status, config, dataset_hash, dataset, scorer_version,"
            " simrun_version, user_backend, runtime, seed, repetitions, budget_usd, labels, runtime_version,"
            " git_commit, git_branch) VALUES (?, now(), 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [run_id, redact(to_json(config)), dataset_hash, to_json(dataset), scorer_version, simrun_version,
             redact(user_backend), redact(runtime), seed, repetitions, budget_usd, to_json(list(labels)),
             None if runtime_version is None else redact(runtime_version), git_commit, git_branch])

    @_writes
    def finish_run(self, run_id: str, *, status: str, spent_usd: Decimal, planned: int | None = None) -> None:
        self.con.execute("UPDATE runs SET status = ?, finished_at = now(), spent_usd = ?, "
                         "conversations_planned = coalesce(?, conversations_planned) WHERE run_id = ?",
                         [status, spent_usd, planned, run_id])

    def resumable(self, run_key: str) -> dict[str, Any] | None:
        """The newest unfinished run with this key (killed, interrupted, or cut short), if any."""
        row = self.con.execute("SELECT run_id FROM runs WHERE run_key = ? AND status <> 'finished' "
                               "ORDER BY started_at DESC LIMIT 1", [run_key]).fetchone()
        return self.run(row[0]) if row else None

    def latest_unfinished(self) -> dict[str, Any]:
        """The newest run that is not finished (killed, interrupted, or stopped by its budget)."""
        row = self.con.execute("SELECT run_id FROM runs WHERE status <> 'finished' "
                               "ORDER BY started_at DESC LIMIT 1").fetchone()
        if row is None:
            raise StoreError(f"{self.path}: every run in it is finished; there is nothing to resume")
        return self.run(row[0])

    @_writes
    def discard_run(self, run_id: str) -> None:
        """Remove a run and everything stored with it (an import that could not finish)."""
        with transaction(self.con) as con:
            for table in ("model_calls", "checks", "findings", "turns", "conversations", "goal_problems", "runs"):
                con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])

    @_writes
    def reopen_run(self, run_id: str) -> None:
        self.con.execute("UPDATE runs SET status = 'running', finished_at = NULL WHERE run_id = ?", [run_id])

    @_writes
    def set_identity(self, run_id: str, run_key: str, shard: str | None, planned: int | None = None) -> None:
        self.con.execute("UPDATE runs SET run_key = ?, shard = ?, "
                         "conversations_planned = coalesce(?, conversations_planned) WHERE run_id = ?",
                         [run_key, shard, planned, run_id])

    def gate_verdicts(self) -> list[tuple[str, str, str, Any]]:
        """The gate verdicts between runs this store remembers: (key, state, headline, classes)."""
        return [(key, state, headline, from_json(classes, f"{self.path}: gate_verdicts.classes"))
                for key, state, headline, classes in self.con.execute(
            "SELECT key, state, headline, classes FROM gate_verdicts").fetchall()]

    @_writes
    def remember_gate_verdicts(self, verdicts: list[tuple[str, str, str, list[str]]]) -> None:
        with transaction(self.con):
            self.con.executemany("INSERT OR REPLACE INTO gate_verdicts VALUES (?, ?, ?, ?, now())",
                                 [[key, state, headline, to_json(classes)]
                                  for key, state, headline, classes in verdicts])

    def set_release_criteria(self, run_id: str, criteria: JsonObject) -> None:
        """The release criteria the run was judged with, kept in its config (`release`): a report
        written again later, or the dashboard, judges it the same way."""
        self.con.execute("UPDATE runs SET config = json_merge_patch(config, ?::JSON) WHERE run_id = ?",
                         [to_json({"release": criteria}), run_id])

    def set_user_output(self, run_id: str, form: str | None) -> None:
        self.con.execute("UPDATE runs SET user_output = ? WHERE run_id = ?", [form, run_id])

    def record(self, run_id: str, conversation_id: str, transcript: Transcript, scorecard: Scorecard, *,
               started_at: float, duration_s: float, cost_usd: Decimal | float = 0,
               model_calls: tuple[ModelCall, ...] = ()) -> None:
        """Write one finished conversation, all of it or nothing."""
        self.record_many(run_id, [Finished(conversation_id, transcript, scorecard, started_at, duration_s,
                                           Decimal(str(cost_usd)), tuple(model_calls))])

    @_writes
    def record_many(self, run_id: str, finished: list[Finished], calls: Sequence[ModelCall] = ()) -> None:
        """Write finished conversations in one transaction: each is stored whole, or not at all.

        The runner writes a batch at a time; a run killed mid-batch loses only conversations that
        were never stored, which resuming runs again. `calls` are model calls settled since the
        last batch, each naming its conversation, finished or not: a call is stored once it is
        paid for, whatever becomes of its conversation.
        """
        if not finished and not calls:
            return
        try:
            self._insert(run_id, finished, calls)
        except (duckdb.Error, ValueError, UnicodeError):
            # One conversation's rows may hold what the store cannot (what the checks at the
            # adapters did not foresee): it must cost that conversation only, never the batch.
            # Each is written alone; one refused alone is stored as a stand-in that says why.
            for f in finished:
                try:
                    self._insert(run_id, [f], ())
                except (duckdb.Error, ValueError, UnicodeError) as alone:
                    self._insert(run_id, [stand_in(f, _why(alone))], ())
            if calls:
                try:
                    self._insert(run_id, [], calls)
                except (duckdb.Error, ValueError, UnicodeError):
                    self._insert(run_id, [], paid_only(calls))

    def _insert(self, run_id: str, finished: list[Finished], calls: Sequence[ModelCall]) -> None:
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        conversations, turns, checks, findings, rows = [], [], [], [], []
        for f in finished:
            t, card, cid = f.encoded_transcript(), f.scorecard, f.conversation_id
            persona, goal, repetition, seed, *stored = t.conversation
            conversations.append([
                cid, persona, goal, repetition, seed, card.end, card.goal_reached, card.goal_detail, len(t.turns),
                f.cost_usd, f.duration_s * 1000,
                dt.datetime.fromtimestamp(f.started_at, dt.UTC).replace(tzinfo=None), *stored])
            turns += [(cid, *turn) for turn in t.turns]
            checks += check_rows(run_id, cid, card)
            findings += finding_rows(run_id, cid, card)
            rows += [call_row(run_id, cid, c, now) for c in f.model_calls]
        rows += [call_row(run_id, c["conversation_id"], c, now) for c in calls]
        with transaction(self.con) as con:
            # The run id is the same on every row of a batch: DuckDB adds it, not each row.
            insert_rows(con, "conversations (run_id, conversation_id, persona, goal, repetition, seed, end_reason, "
                        "goal_reached, goal_detail, turns, cost_usd, duration_ms, started_at, initial_state, "
                        "final_state, audit, stop, error, loop_end, session_id)", conversations, leading=(run_id,))
            insert_rows(con, "turns", turns, leading=(run_id,))
            insert_rows(con, "checks", checks)
            insert_rows(con, "findings", findings)
            insert_rows(con, "model_calls (run_id, conversation_id, turn, backend, model, input_tokens, "
                        "cached_input_tokens, output_tokens, cost_usd, latency_ms, cache_status, request_hash, "
                        "created_at, cache_write_tokens, request, answer, response)", rows)

    def _write_score(self, run_id: str, conversation_id: str, scorecard: Scorecard) -> None:
        insert_rows(self.con, "checks", check_rows(run_id, conversation_id, scorecard))
        insert_rows(self.con, "findings", finding_rows(run_id, conversation_id, scorecard))

    @_writes
    def replace_score(self, run_id: str, conversation_id: str, scorecard: Scorecard) -> None:
        """Rescoring: swap a conversation's findings and checks for new ones, atomically."""
        with transaction(self.con) as con:
            for table in ("checks", "findings"):
                con.execute(f"DELETE FROM {table} WHERE run_id = ? AND conversation_id = ?", [run_id, conversation_id])
            con.execute("UPDATE conversations SET goal_reached = ?, goal_detail = ?, end_reason = ? "
                        "WHERE run_id = ? AND conversation_id = ?",
                        [scorecard.goal_reached, scorecard.goal_detail, scorecard.end, run_id, conversation_id])
            self._write_score(run_id, conversation_id, scorecard)

    @_writes
    def replace_scores(self, run_id: str, scorecards: dict[str, Scorecard], *, scorer_version: str) -> None:
        """Rescoring a whole run: every conversation's score and the run's scorer version, atomically.

        One transaction, so a run is never left half scored by one version and half by another;
        rows go in by the thousand, since a statement per conversation is most of the time.
        """
        previous = self.run(run_id)["scorer_version"]
        outcomes = [[cid, card.goal_reached, card.goal_detail, card.end] for cid, card in scorecards.items()]
        checks = [row for cid, card in scorecards.items() for row in check_rows(run_id, cid, card)]
        findings = [row for cid, card in scorecards.items() for row in finding_rows(run_id, cid, card)]
        with transaction(self.con) as con:
            for table in ("checks", "findings"):
                con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
            con.execute("CREATE TEMP TABLE rescored (conversation_id VARCHAR, goal_reached BOOLEAN, "
                        "goal_detail VARCHAR, end_reason VARCHAR)")
            for table, rows in (("rescored", outcomes), ("checks", checks), ("findings", findings)):
                for i in range(0, len(rows), 1000):
                    insert_rows(con, table, rows[i:i + 1000])
            con.execute("UPDATE conversations SET goal_reached = r.goal_reached, goal_detail = r.goal_detail, "
                        "end_reason = r.end_reason FROM rescored r "
                        "WHERE conversations.run_id = ? AND conversations.conversation_id = r.conversation_id",
                        [run_id])
            con.execute("DROP TABLE rescored")
            con.execute("UPDATE runs SET scorer_version = ?, rescored_at = now(), rescored_from = ? "
                        "WHERE run_id = ?", [scorer_version, previous, run_id])

    # --- reading ----------------------------------------------------------------------------

    def run(self, run_id: str | None = None) -> dict[str, Any]:
        """One run as a dict; the newest when run_id is None or 'latest'."""
        if run_id in (None, "latest"):
            row = self.con.execute("SELECT * FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()
        else:
            row = self.con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            known = [r[0] for r in self.con.execute(
                "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 5").fetchall()]
            hint = f"recent runs: {', '.join(known)}" if known else "this database holds no run yet"
            raise StoreError(f"{self.path}: no run {run_id!r}; {hint}")
        names = [d[0] for d in self.con.description]
        run = dict(zip(names, row))
        run["config"] = from_json(run["config"], f"{self.path}: run {run['run_id']}: its settings (runs.config)")
        run["dataset"] = from_json(run["dataset"], f"{self.path}: run {run['run_id']}: runs.dataset")
        run["labels"] = labels_of(run["labels"])
        return run

    def runs(self) -> list[dict[str, Any]]:
        cur = self.con.execute(
            "SELECT r.run_id, r.started_at, r.status, r.user_backend, r.dataset_hash, r.spent_usd, "
            "r.labels, r.runtime_version, r.git_commit, r.git_branch, "
            "count(c.conversation_id) AS conversations, "
            "avg(CASE WHEN c.goal_reached THEN 1.0 WHEN c.goal_reached IS NOT NULL THEN 0.0 END) AS goal_rate "
            "FROM runs r LEFT JOIN conversations c USING (run_id) GROUP BY ALL ORDER BY r.started_at DESC")
        names = [d[0] for d in cur.description]
        return [{**row, "labels": labels_of(row["labels"])} for row in (dict(zip(names, r)) for r in cur.fetchall())]

    def conversation_list(self, run_id: str) -> list[tuple[str, str, bool | None, str | None]]:
        """(conversation id, end reason, goal reached, the runtime's session id) of each."""
        return self.con.execute("SELECT conversation_id, end_reason, goal_reached, session_id FROM conversations "
                                "WHERE run_id = ? ORDER BY conversation_id", [run_id]).fetchall()

    def findings_by_class(self, run_id: str, cls: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """A run's findings grouped by class (one class with `cls`), each with its conversation,
        turn and detail, in conversation and turn order; runtime_error (an end reason, not a
        finding) with the error's turn and message, and whether it was collateral."""
        rows = self.con.execute(
            "SELECT class, conversation_id, turn, detail FROM findings WHERE run_id = ? AND (? IS NULL OR class = ?) "
            "UNION ALL SELECT 'runtime_error', conversation_id, TRY_CAST(error->>'turn' AS INTEGER), "
            "coalesce(error->>'message', 'runtime error') || CASE WHEN error->>'collateral' = 'true' "
            "THEN ' (collateral: the runtime went down in another conversation)' ELSE '' END "
            "FROM conversations WHERE run_id = ? AND end_reason = 'runtime_error' "
            "AND (? IS NULL OR ? = 'runtime_error') ORDER BY 1, 2, 3 NULLS LAST",
            [run_id, cls, cls, run_id, cls, cls]).fetchall()
        grouped: dict[str, list[dict[str, Any]]] = {}
        for c, cid, turn, detail in rows:
            grouped.setdefault(c, []).append({"conversation_id": cid, "turn": turn, "detail": detail})
        return grouped

    def conversation_row(self, run_id: str, conversation_id: str) -> dict[str, Any]:
        cur = self.con.execute("SELECT * EXCLUDE (initial_state, final_state, audit) FROM conversations "
                               "WHERE run_id = ? AND conversation_id = ?", [run_id, conversation_id])
        row = cur.fetchone()
        if row is None:
            raise StoreError(f"run {run_id} has no conversation {conversation_id!r}; "
                             "`simrun show RUN` lists them")
        return dict(zip([d[0] for d in cur.description], row))

    def conversation_ids(self, run_id: str) -> list[str]:
        return [r[0] for r in self.con.execute(
            "SELECT conversation_id FROM conversations WHERE run_id = ? ORDER BY conversation_id",
            [run_id]).fetchall()]

    def transcript(self, run_id: str, conversation_id: str) -> Transcript:
        row = self.con.execute(
            "SELECT persona, goal, seed, repetition, coalesce(loop_end, end_reason), initial_state, final_state, "
            "audit, stop, error, session_id "
            "FROM conversations WHERE run_id = ? AND conversation_id = ?", [run_id, conversation_id]).fetchone()
        if row is None:
            raise StoreError(f"run {run_id} has no conversation {conversation_id!r}; "
                             "`simrun show RUN` lists them")
        persona, goal, seed, rep, end, initial, final, audit, stop, error, session_id = row

        def read(text: Any, column: str) -> Any:
            return from_json(text, f"{self.path}: run {run_id}, conversation {conversation_id!r}: {column}")

        turns = tuple(
            TurnRecord(index, UserTurn.from_json(read(user, f"turn {index}'s user_turn")),
                       read(result, f"turn {index}'s result"), read(state, f"turn {index}'s state"), latency)
            for index, user, result, state, latency in self.con.execute(
                "SELECT turn, user_turn, result, state, latency_ms FROM turns "
                "WHERE run_id = ? AND conversation_id = ? ORDER BY turn", [run_id, conversation_id]).fetchall())
        return Transcript(persona, goal, seed, rep, turns, end, read(initial, "initial_state"),
                          read(final, "final_state"), read(audit, "audit"),
                          UserTurn.from_json(read(stop, "stop")) if stop else None, read(error, "error"), session_id)

    def first_error(self, run_id: str, end_reason: str) -> dict[str, Any] | None:
        """The first conversation (by start) that ended with `end_reason`, and its error evidence."""
        row = self.con.execute("SELECT conversation_id, error FROM conversations WHERE run_id = ? AND end_reason = ? "
                               "ORDER BY started_at, conversation_id LIMIT 1", [run_id, end_reason]).fetchone()
        if row is None:
            return None
        return {"conversation_id": row[0],
                **(from_json(row[1], f"{self.path}: run {run_id}, conversation {row[0]!r}: error") or {})}

    def findings(self, run_id: str, conversation_id: str) -> list[dict[str, Any]]:
        cur = self.con.execute("SELECT turn, class, kind, detail, evidence FROM findings "
                               "WHERE run_id = ? AND conversation_id = ? ORDER BY turn NULLS LAST, class",
                               [run_id, conversation_id])
        where = f"{self.path}: run {run_id}, conversation {conversation_id!r}: a finding's evidence"
        return [{"turn": t, "class": c, "kind": k, "detail": d, "evidence": from_json(e, where)}
                for t, c, k, d, e in cur.fetchall()]
