"""Plumbline-style bundles: a run's conversations exported as items, and imported to be scored.

The layout follows Plumbline's ADR 0003 (multi-turn items are additive fields): an item's
`prompt` is the first user turn and `turns` the follow-up user turns; `response` is the final
reply and `turn_responses` every reply, one per user turn (null where the runtime gave none).
The two are not cross-checked, as in Plumbline. The bundle carries a `format_version` (a
loader refuses one it does not know) and the dataset hash of the personas and goals.

A bundle may come from anywhere, so it is read as hostile: bounded in size, strict UTF-8, JSON
that cannot exhaust the stack, every field typed, every recorded turn result, store and audit
stream checked against protocol 1 as a live answer would be. Its claims are not trusted: the
imported run's dataset hash is computed from the current personas and goals. A bundle that fails
any of this is one line, and leaves no run behind.

Each item simrun exports also carries `record`: the whole transcript (clicks, turn results,
store snapshots, audit stream), so that importing it scores exactly what the run scored. An
item without `record` (a bundle written by another tool) is scored from its text alone: every
check that needs more than the reply text is UNVERIFIABLE there, never a pass.

Importing looks each item's persona and goal up by id in the current dataset; a missing one
is an error that names the item.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from simrun import _input_files as input_files
from simrun._errors import BundleError, SimrunError
from simrun._protocol import Audit, State, TurnResult, violations
from simrun._storable import (
    BIGINT_MAX,
    BIGINT_MIN,
    INTEGER_MAX,
    MAX_REPETITIONS,
    MONEY_CEILING,
    first_unstorable,
)
from simrun._transcript import EndReason, Transcript, TurnRecord, UserTurn
from simrun._writing import write_file
from simrun.scoring.checks import SCORER_VERSION, score
from simrun.scoring.dataset import Dataset
from simrun.scoring.store._database import Store
from simrun.scoring.store._rescore import check_items, dataset_items
from simrun.scoring.store._rows import Finished

FORMAT_VERSION = 1
MAX_BUNDLE_BYTES = 1 << 30


class _Model(BaseModel):
    # Every number a bundle gives is one the store can keep (its column's range, finite): a
    # value past it failed the import's write with DuckDB's "transaction is aborted", or cost a
    # conversation counted as the runtime's fault.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RecordedUserTurn(_Model):
    kind: Literal["message", "click", "stop"]
    text: str | None = None
    offer: str | None = None
    stop_reason: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    step: str | None = None


class RecordedTurn(_Model):
    index: int = Field(ge=1, le=INTEGER_MAX, description="1-based, the order of turn calls.")
    user: RecordedUserTurn
    result: dict[str, Any] | None = Field(description="The turn result as received; null if the turn failed.")
    state: dict[str, Any] | None = Field(None, description="The runtime's store after the turn.")
    latency_ms: float = Field(0.0, ge=0)


class Record(_Model):
    """A whole transcript, as simrun stores it."""

    end: str
    turns: list[RecordedTurn] = Field(fail_fast=True)      # the first bad one, not an error per turn
    initial_state: dict[str, Any] | None = None
    final_state: dict[str, Any] | None = None
    audit: list[dict[str, Any]] | None = None
    stop: RecordedUserTurn | None = None
    error: dict[str, Any] | None = None
    session_id: str | None = Field(None, description="The runtime's own session id, for its logs.")
    started_at: dt.datetime | None = None
    duration_ms: float = Field(0.0, ge=0)
    cost_usd: float = Field(0.0, ge=0, lt=MONEY_CEILING)


class Item(_Model):
    id: str = Field(description="Unique in the bundle; simrun writes persona/goal/repetition.")
    persona: str = Field(description="Persona id, looked up in the current dataset on import.")
    goal: str = Field(description="Goal id, looked up in the current dataset on import.")
    repetition: int = Field(0, ge=0, lt=MAX_REPETITIONS)
    seed: int = Field(0, ge=BIGINT_MIN, le=BIGINT_MAX)
    prompt: str = Field(description="The first user turn.")
    turns: list[str] = Field(default_factory=list, description="Follow-up user turns after the prompt.")
    response: str | None = Field(description="The final reply.")
    turn_responses: list[str | None] | None = Field(None, description="Every reply, one per user turn.")
    end: EndReason | None = Field(None, description="Why the conversation ended (text-only items).")
    record: Record | None = Field(None, description="The whole transcript; what is scored when present.")


class SourceRun(_Model):
    run_id: str
    user_backend: str
    runtime: str
    seed: int = Field(ge=BIGINT_MIN, le=BIGINT_MAX)
    repetitions: int = Field(ge=1, le=MAX_REPETITIONS)
    scorer_version: str


class Bundle(_Model):
    format_version: Literal[1] = Field(description="Version of the bundle layout.")
    producer: str = ""
    dataset_hash: str = Field(description="Hash of the personas and goals the conversations were recorded with.")
    dataset: dict[str, str] = Field(default_factory=dict, description="Persona and goal -> content hash.")
    run: SourceRun | None = None
    items: list[Item] = Field(fail_fast=True)              # the first bad one: errors cost memory each

    @model_validator(mode="after")
    def _unique(self) -> Bundle:
        seen: set[str] = set()
        for item in self.items:
            if item.id in seen:
                raise ValueError(f"item id {item.id!r} appears twice")
            seen.add(item.id)
        return self


# --- export -------------------------------------------------------------------------------------

def _said(user: UserTurn) -> str:
    return f"[click {user.offer}]" if user.kind == "click" else (user.text or "")


def item_of(conversation_id: str, t: Transcript, row: dict[str, Any]) -> dict[str, Any]:
    said = [_said(turn.user) for turn in t.turns]
    replies = [turn.result.get("reply") if isinstance(turn.result, dict) else None for turn in t.turns]
    final = next((r for r in reversed(replies) if r is not None), None)
    started = row.get("started_at")
    return {
        "id": conversation_id, "persona": t.persona, "goal": t.goal, "repetition": t.repetition, "seed": t.seed,
        "prompt": said[0] if said else "", "turns": said[1:], "response": final, "turn_responses": replies,
        "end": t.end,
        "record": {
            "end": t.end,
            "turns": [{"index": turn.index, "user": turn.user.to_json(), "result": turn.result,
                       "state": turn.state, "latency_ms": turn.latency_ms} for turn in t.turns],
            "initial_state": t.initial_state, "final_state": t.final_state, "audit": t.audit,
            "stop": t.stop.to_json() if t.stop else None, "error": t.error, "session_id": t.session_id,
            "started_at": started.isoformat() if started else None,
            "duration_ms": float(row.get("duration_ms") or 0), "cost_usd": float(row.get("cost_usd") or 0),
        },
    }


def export_bundle(store: Store, run: str | None, *, producer: str) -> dict[str, Any]:
    row = store.run(run)
    run_id = row["run_id"]
    items = [item_of(cid, store.transcript(run_id, cid), store.conversation_row(run_id, cid))
             for cid in store.conversation_ids(run_id)]
    bundle = {
        "format_version": FORMAT_VERSION, "producer": producer, "dataset_hash": row["dataset_hash"],
        "dataset": row["dataset"] or {},
        "run": {"run_id": run_id, "user_backend": row["user_backend"], "runtime": row["runtime"],
                "seed": row["seed"], "repetitions": row["repetitions"], "scorer_version": row["scorer_version"]},
        "items": items,
    }
    # What we write we must be able to read: validate before anyone relies on the file. A store
    # from before its encoder refused them, or a crafted one, may hold NaN or an infinity, which
    # `import` refuses: said here, where the run can be named, not when the file is imported.
    found = first_unstorable(bundle)
    if found is not None:
        raise BundleError(f"run {run_id} ({_where(bundle, found[0])}): {found[1]}, so the run cannot be "
                          "exported (a bundle is JSON, and `simrun import` refuses it)")
    Bundle.model_validate(json.loads(json.dumps(bundle, default=str)))
    return bundle


def write_bundle(bundle: dict[str, Any], path: Path | str) -> Path:
    return write_file(path, json.dumps(bundle, indent=1, default=str) + "\n", what="the bundle")


# --- import -------------------------------------------------------------------------------------

def load_bundle(path: Path | str) -> Bundle:
    path = Path(path)
    try:
        data = json.loads(input_files.read_text(path, "bundle", MAX_BUNDLE_BYTES))
    except FileNotFoundError:
        raise BundleError(f"{path}: no such bundle; write one with `simrun export RUN --out {path}`") from None
    except input_files.InputRefused as exc:
        raise BundleError(f"{path}{f':{exc.line}' if exc.line else ''}: {exc}") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot read the bundle: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise BundleError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise BundleError(f"{path}: not a bundle: its JSON is nested too deep to read") from None
    if isinstance(data, dict) and data.get("format_version") not in (None, FORMAT_VERSION):
        raise BundleError(f"{path}: bundle format_version {data['format_version']!r} is not one this simrun "
                          f"reads (it reads {FORMAT_VERSION}); upgrade simrun, or export the bundle again")
    try:
        bundle = Bundle.model_validate(data)
    except RecursionError:
        raise BundleError(f"{path}: not a bundle: its JSON is nested too deep to read") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        raise BundleError(f"{path} ({_where(data, err['loc'])}): "
                          f"{' '.join(err['msg'].removeprefix('Value error, ').split())}") from None
    # What a live answer could not bring in (NaN, an infinity, a NUL, an integer past the bound,
    # refused as each answer is read) must not come in through a bundle either, in any field:
    # the store would keep `Infinity`, which is not JSON, in a JSON column.
    found = first_unstorable(data)
    if found is not None:
        raise BundleError(f"{path} ({_where(data, found[0])}): not storable: {found[1]}")
    _check_evidence(bundle, path)
    return bundle


def _where(data: Any, loc: tuple[Any, ...]) -> str:
    """A place in the bundle, as one line: keys quoted unless plain, an item named by its id."""
    parts = [str(p) if isinstance(p, int) or str(p).isidentifier() else repr(p) for p in loc]
    if len(parts) >= 2 and loc[0] == "items" and isinstance(loc[1], int) and isinstance(data, dict):
        try:
            parts[1] = f"{parts[1]} ({data['items'][loc[1]].get('id')!r})"
        except (AttributeError, IndexError, KeyError, TypeError):
            pass
    return ".".join(parts) or "file"


def _check_evidence(bundle: Bundle, path: Path) -> None:
    """Each recorded answer must be one a live runtime could have given (protocol 1): the scorer
    reads them as it reads live ones, and a shape it never sees live must not reach it."""
    for item in bundle.items:
        record = item.record
        if record is None:
            continue
        answers: list[tuple[str, type, Any]] = [         # (where, the protocol's shape, the answer)
            (f"turns.{t.index}.result", TurnResult, t.result) for t in record.turns if t.result is not None]
        answers += [(f"turns.{t.index}.state", State, t.state) for t in record.turns if t.state is not None]
        answers += [(name, State, getattr(record, name)) for name in ("initial_state", "final_state")
                    if getattr(record, name) is not None]
        if record.audit is not None:
            answers.append(("audit", Audit, {"turns": record.audit}))
        for where, shape, value in answers:
            problems = violations(shape, value)
            if problems:
                raise BundleError(f"{path} (items {item.id!r}, record.{where}): not a protocol 1 answer: "
                                  f"{problems[0]}")


def _user(u: RecordedUserTurn) -> UserTurn:
    return UserTurn(u.kind, u.text, u.offer, u.stop_reason, dict(u.meta), u.step)


def transcript_of(item: Item, where: str) -> Transcript:
    if item.record is not None:
        r = item.record
        turns = tuple(TurnRecord(t.index, _user(t.user), t.result, t.state, t.latency_ms) for t in r.turns)
        return Transcript(item.persona, item.goal, item.seed, item.repetition, turns, r.end, r.initial_state,
                          r.final_state, r.audit, _user(r.stop) if r.stop else None, r.error, r.session_id)
    said = [item.prompt, *item.turns]
    replies = item.turn_responses
    if replies is None:
        if item.turns:
            raise BundleError(f"{where}: item {item.id!r} has {len(said)} user turns but no turn_responses; "
                              "a multi-turn item without `record` needs one reply per user turn")
        replies = [item.response]
    if len(replies) != len(said):
        raise BundleError(f"{where}: item {item.id!r} has {len(said)} user turns and {len(replies)} "
                          "turn_responses; give one reply (or null) per user turn")
    # Text only: no store, no audit stream. The checks that need them answer UNVERIFIABLE.
    turns = tuple(TurnRecord(i, UserTurn("message", text), None if reply is None else {"reply": reply}, None)
                  for i, (text, reply) in enumerate(zip(said, replies), 1))
    return Transcript(item.persona, item.goal, item.seed, item.repetition, turns, item.end or "user_stopped")


@dataclass(frozen=True)
class ImportResult:
    run_id: str
    conversations: int
    warnings: tuple[str, ...]


def import_bundle(store: Store, bundle: Bundle, dataset: Dataset, *, run_id: str, source: str,
                  simrun_version: str) -> ImportResult:
    """Score every item with the current scorer into a new run; the dataset must hold its ids."""
    personas, goals, _ = dataset_items(dataset)
    used = {("persona", i.persona) for i in bundle.items} | {("goal", i.goal) for i in bundle.items}
    try:
        changed = check_items(used, dataset, bundle.dataset, source)
    except SimrunError as exc:
        raise BundleError(str(exc)) from None
    # Everything is read and scored before anything is written: a bad item leaves no run behind.
    now = dt.datetime.now(dt.UTC).timestamp()
    finished = []
    for item in bundle.items:
        transcript = transcript_of(item, source)
        record = item.record
        started = record.started_at if record else None
        finished.append(Finished(
            item.id, transcript, score(transcript, goals[item.goal], personas[item.persona]),
            (started if started.tzinfo else started.replace(tzinfo=dt.UTC)).timestamp() if started else now,
            (record.duration_ms if record else 0) / 1000, Decimal(str(record.cost_usd if record else 0))))
    warnings = []
    if bundle.dataset_hash != dataset.hash:
        warnings.append(f"the bundle says it was recorded with dataset {bundle.dataset_hash}; it was scored "
                        f"against the current personas and goals, and is stored as dataset {dataset.hash}")
    if changed:
        warnings.append(f"scored against edited versions of {', '.join(changed)}")
    src = bundle.run
    store.create_run(run_id, config={"imported_from": source, "source_run": src.run_id if src else None},
                     dataset_hash=dataset.hash, dataset=dataset.item_hashes,
                     scorer_version=SCORER_VERSION, simrun_version=simrun_version,
                     user_backend=src.user_backend if src else "imported",
                     runtime=src.runtime if src else "imported", seed=src.seed if src else 0,
                     repetitions=src.repetitions if src else 1 + max((i.repetition for i in bundle.items), default=0),
                     budget_usd=Decimal(0))
    try:
        store.record_many(run_id, finished)
        store.finish_run(run_id, status="finished", spent_usd=Decimal(0))
    except BaseException:
        store.discard_run(run_id)
        raise
    return ImportResult(run_id, len(finished), tuple(warnings))
