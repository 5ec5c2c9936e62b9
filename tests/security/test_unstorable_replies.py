"""One reply costs one conversation, whatever it holds: a value the store cannot hold (a lone
surrogate, a NUL, a number JSON cannot write, an integer thousands of digits long), in a reply,
a store or a key, ends that conversation as `runtime_error` with evidence, and every other
conversation of the run is stored and scored. What no check foresaw still costs only its own
conversation: the store writes a refused conversation alone, as a stand-in that says why."""

from __future__ import annotations

import asyncio
import json
import math
from decimal import Decimal

import duckdb
import pytest

from simrun._errors import RuntimeFault
from simrun._transcript import Scorecard, Transcript, TurnRecord, UserTurn
from simrun.scoring.store._database import Store
from simrun.scoring.store._rows import Finished, encoded_or_stand_in
from simrun.simulator.adapters._base import parse_json, read_answer

POISONED = '''
from simrun.examples.tripdesk import TripDesk

POISONS = {
    "cancel-trip": ("reply", "\\ud800"),
    "rename-trip": ("reply", "nul \\x00 here"),
    "new-trip-full": ("state", 10 ** 5000),
    "remove-bag": ("state", float("nan")),
    "ask-bags": ("key", "\\udfff"),
    "single-add-bag": ("state", -(10 ** 1500)),
    "open-and-ask-date": ("state", float("-inf")),
}


class PoisonedDesk(TripDesk):
    def __init__(self, **options):
        super().__init__(**options)
        self.poison = {}

    def start(self, request):
        started = super().start(request)
        self.poison[started["session"]] = POISONS.get(request.get("goal"))
        return started

    def turn(self, session, request):
        result = super().turn(session, request)
        where, value = self.poison.get(session) or (None, None)
        if where == "reply":
            result["reply"] = f"{result['reply']} {value}"
        elif where == "key":
            result["mentions"] = {value: 1}
        return result

    def state(self, session):
        state = super().state(session)
        where, value = self.poison.get(session) or (None, None)
        if where == "state" and self.turned(session):
            state = {**state, "poison": [value]}
        return state

    def turned(self, session):
        return bool(self._get(session).audit)
'''
POISONED_GOALS = ("cancel-trip", "rename-trip", "new-trip-full", "remove-bag", "ask-bags", "single-add-bag",
                  "open-and-ask-date")


def test_each_unstorable_reply_costs_its_conversation_only(run_cli, project):
    (project / "poisoned.py").write_text(POISONED)
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace('target = "simrun.examples.tripdesk:TripDesk"',
                                             'target = "poisoned.py:PoisonedDesk"'))
    code, output = run_cli("--budget", "5usd", "-n", "1")
    assert code in (0, 1), output                  # the run ends normally: a verdict, not a crash
    con = duckdb.connect(str(project / "simrun.duckdb"), read_only=True)
    rows = con.execute("SELECT goal, end_reason, error FROM conversations").fetchall()
    planned = con.execute("SELECT conversations_planned FROM runs").fetchone()[0]
    assert len(rows) == planned                    # every conversation stored
    for goal, end, error in rows:
        if goal in POISONED_GOALS:
            assert end == "runtime_error", (goal, end)
            evidence = json.loads(error)
            assert evidence["kind"] == "malformed", evidence
            assert "cannot store" in evidence["message"] or "is not JSON" in evidence["message"], evidence
        else:
            assert end != "runtime_error", (goal, error)


@pytest.mark.parametrize("raw", [b'{"reply": "\\ud800"}', b'{"reply": "a\\u0000b"}', b'{"reply": "x", "k": NaN}',
                                 b'{"reply": "x", "k": -Infinity}', b'{"reply": "x", "k": 1e999}',
                                 b'{"reply": "x", "k": [-2E+400]}', b'{"\\udc00": 1, "reply": "x"}',
                                 b'{"reply": "x", "n": ' + b"9" * 1500 + b"}",
                                 b'{"reply": "x", "n": ' + b"9" * 5000 + b"}",
                                 b'{"reply": "x", "k": ' + b"9" * 400 + b".0}",
                                 b'{"reply": "x", "k": 1' + b"0" * 320 + b"e-5}",
                                 b'{"reply": "x", "n": -' + b"9" * 1001 + b"}",
                                 b'{"reply": "\\ud83d"}', b'{"reply": "\\ude00\\ud83d"}'])
def test_an_answer_the_store_cannot_hold_is_a_fault(raw):
    with pytest.raises(RuntimeFault) as raised:
        asyncio.run(read_answer(raw, "turn"))
    assert raised.value.kind == "malformed"


@pytest.mark.parametrize("raw", [b'{"reply": "\\ud83d\\ude00 fine"}', b'{"reply": "a\\\\u0000b"}',
                                 b'{"reply": "x", "n": ' + b"9" * 900 + b"}", b'{"reply": "\\u00e9t\\u00e9"}',
                                 b'{"reply": "x", "k": 1.5E+300, "n": [-1e-320, 0.1, -' + b"9" * 1000 + b"]}"])
def test_what_the_store_can_hold_is_read_as_it_is(raw):
    assert parse_json(raw, "turn") == json.loads(raw)


def _finished(cid: str, reply: str) -> Finished:
    user = UserTurn("message", "hi")
    transcript = Transcript("p", "g", 1, 0, (TurnRecord(1, user, {"reply": reply}, {"k": 1}, 1.0),), "turn_cap")
    return Finished(cid, transcript, Scorecard(False, f"detail {reply}", 1, "turn_cap", {}), 0.0, 0.1,
                    Decimal("0.5"), ({"turn": 1, "backend": "fake", "model": "m", "input_tokens": 1,
                                      "cached_input_tokens": 0, "output_tokens": 1, "cost_usd": "0.5",
                                      "latency_ms": 1.0, "cache_status": "miss", "request_hash": "h",
                                      "cache_write_tokens": 0, "request": {"q": reply}, "answer": None,
                                      "response": None},))


def test_the_store_writes_a_refused_conversation_alone_as_a_stand_in(tmp_path):
    with Store(tmp_path / "s.duckdb") as store:
        store.create_run("r1", config={}, dataset_hash="h", dataset={}, scorer_version="1", simrun_version="1",
                         user_backend="scripted", runtime="x", seed=1, repetitions=1, budget_usd=Decimal(1))
        batch = [_finished("p/g/0", "fine"), _finished("p/g/1", "bad \ud800"), _finished("p/g/2", "fine too")]
        store.record_many("r1", batch)
        rows = dict(store.con.execute("SELECT conversation_id, end_reason FROM conversations").fetchall())
        assert rows == {"p/g/0": "turn_cap", "p/g/1": "runtime_error", "p/g/2": "turn_cap"}
        error = json.loads(store.con.execute("SELECT error FROM conversations WHERE conversation_id = 'p/g/1'")
                           .fetchone()[0])
        assert error["kind"] == "unstorable" and "could not be stored" in error["message"]
        paid = store.con.execute("SELECT count(*), sum(cost_usd) FROM model_calls").fetchone()
        assert paid == (3, Decimal("1.5"))          # what was paid for is stored, even for the stand-in


def _with_state(cid: str, state: dict) -> Finished:
    f = _finished(cid, "fine")
    turn = f.transcript.turns[0]
    return Finished(cid, Transcript("p", "g", 1, 0, (TurnRecord(1, turn.user, turn.result, state, 1.0),), "turn_cap"),
                    f.scorecard, 0.0, 0.1, f.cost_usd, f.model_calls)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_value_no_json_reader_can_read_back_is_never_stored_in_a_json_column(tmp_path, value):
    """What reaches the store without being read as JSON (a store built from a runtime's traces,
    a tool call's arguments) can hold NaN or an infinity; DuckDB kept them in a JSON column as
    `NaN` and `Infinity`, which no JSON reader reads back. The conversation is a stand-in that
    says why, here and where a Ray worker encodes it; the others are stored whole."""
    bad = _with_state("p/g/1", {"records": {}, "events": [{"turn": 1, "arguments": {"x": value}}]})
    stood = encoded_or_stand_in(bad)
    assert stood.transcript.conversation[-2] == "runtime_error" and stood.transcript.turns == ()
    assert "not JSON compliant" in json.loads(stood.transcript.conversation[8])["message"]
    with Store(tmp_path / "s.duckdb") as store:
        store.create_run("r1", config={}, dataset_hash="h", dataset={}, scorer_version="1", simrun_version="1",
                         user_backend="scripted", runtime="x", seed=1, repetitions=1, budget_usd=Decimal(1))
        store.record_many("r1", [_with_state("p/g/0", {"k": 1.5}), bad, _with_state("p/g/2", {"k": -0.0})])
        ends = dict(store.con.execute("SELECT conversation_id, end_reason FROM conversations").fetchall())
        assert ends == {"p/g/0": "turn_cap", "p/g/1": "runtime_error", "p/g/2": "turn_cap"}
        texts = store.con.execute("SELECT state::VARCHAR FROM turns UNION ALL SELECT error::VARCHAR FROM "
                                  "conversations WHERE error IS NOT NULL").fetchall()
        assert len(texts) == 3 and all(json.loads(t, parse_constant=pytest.fail) for (t,) in texts)
