"""How the store's rows hold a conversation: its transcript encoded, its scores and its calls.

A transcript goes into the `conversations` and `turns` tables with its JSON already encoded,
strings and numbers only, and comes back out whole (`Store.transcript`). A Ray worker encodes
what it finished before sending it, so that the driver stores it without decoding anything.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, overload

from simrun import _secrets as secrets
from simrun._errors import StoreError
from simrun._transcript import Scorecard, Transcript
from simrun.scoring.checks import kind_of

# A model call's record, as the user backend writes it (`call_row` names its keys): what it cost,
# and what it sent and got back, as decoded JSON.
ModelCall = dict[str, Any]


class JsonText(str):
    """A value already serialised as JSON (a model call's request, as it was sent): stored as
    it is, not encoded again."""


@overload
def to_json(value: None) -> None: ...
@overload
def to_json(value: dict[str, Any] | list[Any]) -> str: ...
@overload
def to_json(value: Any) -> str | None: ...


def to_json(value: Any) -> str | None:
    if value is None or isinstance(value, JsonText):
        return value
    # No NaN or Infinity: DuckDB keeps them in a JSON column without a word, and no JSON reader
    # reads them back. A value holding one (a trace's double, a tool call's arguments) makes its
    # conversation's rows refused, and the conversation is stored as a stand-in that says why.
    return json.dumps(value, default=str, allow_nan=False)


def from_json(value: Any, where: str) -> Any:
    """A stored JSON value. A store may be a crafted file (or another tool's): DuckDB takes text
    into a JSON column that no JSON reader reads (a bare `nan`), which is a one-line error naming
    `where`, not a traceback."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        raise StoreError(f"{where} holds text that is not JSON: the database was changed, or not "
                         "written by simrun") from None


def labels_of(stored: Any) -> list[str]:
    """A run's labels as stored (a JSON list of names): the names, whatever a crafted file holds."""
    try:
        labels = json.loads(stored) if isinstance(stored, str) else stored
    except ValueError:
        return []
    return [label for label in labels if isinstance(label, str)][:50] if isinstance(labels, list) else []


# persona, goal, repetition, seed, then as JSON: initial state, final state, audit, stop, error;
# then end reason, session id.
ConversationColumns = tuple[str, str, int, int, str | None, str | None, str | None, str | None, str | None, str,
                            str | None]
# index, then as JSON: the user's turn, the result, the state; then latency in ms.
TurnColumns = tuple[int, str | None, str | None, str | None, float]


@dataclass(frozen=True)
class EncodedTranscript:
    """A transcript as the store's rows hold it, its JSON already encoded: strings and numbers
    only. A Ray worker sends these rather than the transcript's objects: the driver then stores
    them without decoding anything, and pickling the objects there and back cost more CPU than
    writing them (benchmarks/HISTORY.md, "Ray workers against one process")."""

    conversation: ConversationColumns   # its columns of the conversations row (see `encode`)
    turns: tuple[TurnColumns, ...]      # a row of the turns table per turn, less the run and conversation ids


def encode(transcript: Transcript) -> EncodedTranscript:
    t = transcript
    return EncodedTranscript(
        (t.persona, t.goal, t.repetition, t.seed, to_json(t.initial_state), to_json(t.final_state), to_json(t.audit),
         to_json(t.stop.to_json() if t.stop else None), to_json(t.error), t.end, t.session_id),
        tuple((turn.index, to_json(turn.user.to_json()), to_json(turn.result), to_json(turn.state), turn.latency_ms)
              for turn in t.turns))


@dataclass(frozen=True)
class Finished:
    """A finished conversation, as the store writes it; its transcript as objects, or encoded
    where it finished."""

    conversation_id: str
    transcript: Transcript | EncodedTranscript
    scorecard: Scorecard
    started_at: float
    duration_s: float
    cost_usd: Decimal = Decimal(0)
    model_calls: tuple[ModelCall, ...] = ()

    def encoded(self) -> Finished:
        """This conversation with its transcript encoded."""
        if isinstance(self.transcript, EncodedTranscript):
            return self
        return replace(self, transcript=encode(self.transcript))

    def encoded_transcript(self) -> EncodedTranscript:
        """The transcript encoded: as it came, or encoded here (what `encoded()` holds)."""
        t = self.transcript
        return t if isinstance(t, EncodedTranscript) else encode(t)


def call_row(run_id: str, conversation_id: str, c: ModelCall, now: dt.datetime) -> list[Any]:
    return [run_id, conversation_id, c["turn"], c["backend"], c["model"], c["input_tokens"],
            c["cached_input_tokens"], c["output_tokens"], Decimal(str(c["cost_usd"])), c["latency_ms"],
            c["cache_status"], c["request_hash"], now, c["cache_write_tokens"], to_json(c["request"]),
            to_json(c["answer"]), to_json(c["response"])]

def check_rows(run_id: str, conversation_id: str, scorecard: Scorecard) -> list[list[Any]]:
    return [[run_id, conversation_id, cls, kind_of(cls), check.status, len(check.findings),
             check.checked_turns, check.unverifiable_turns, check.reason if check.unverifiable_turns else None]
            for cls, check in scorecard.checks.items()]

def finding_rows(run_id: str, conversation_id: str, scorecard: Scorecard) -> list[list[Any]]:
    return [[run_id, conversation_id, f.turn, f.cls, kind_of(f.cls), f.detail, to_json(f.evidence)]
            for f in scorecard.findings]


def stand_in(f: Finished, reason: str) -> Finished:
    """What is stored of a conversation whose rows the store refused (a value no check before
    the write foresaw): its identity and a `runtime_error` with the reason, no turns, no scores,
    so that it costs that conversation only, and says why. Its model calls are kept, paid for,
    without what they sent and answered."""
    t = f.transcript     # not encoded again: encoding may be what failed
    persona, goal, repetition, seed = (t.conversation[:4] if isinstance(t, EncodedTranscript)
                                       else (t.persona, t.goal, t.repetition, t.seed))
    error = {"kind": "unstorable", "message": f"the conversation could not be stored: {reason}"}
    return replace(f, transcript=EncodedTranscript(
        (persona, goal, repetition, seed, None, None, None, None, to_json(error), "runtime_error", None), ()),
        scorecard=Scorecard(None, "not judged: the conversation could not be stored", 0, "runtime_error", {}),
        model_calls=paid_only(f.model_calls))


def encoded_or_stand_in(f: Finished) -> Finished:
    """`f` encoded for the store, or its stand-in when its transcript holds what JSON cannot (a
    Ray worker encodes where the conversation finished, away from the store's own fallback)."""
    try:
        return f.encoded()
    except (ValueError, RecursionError) as exc:
        return stand_in(f, secrets.cut(f"{type(exc).__name__}: {exc}", 300))   # encoded already


def paid_only(calls: Iterable[ModelCall]) -> tuple[ModelCall, ...]:
    """Model calls without their request, answer and response: what they cost, and no more."""
    return tuple({**c, "request": None, "answer": None, "response": None} for c in calls)
