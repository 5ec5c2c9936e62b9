"""Model-played users: the real openai and anthropic SDKs against a fake API, an exact ledger,
a hard budget, retries, replay, estimates and secrets. No test touches the network."""

from __future__ import annotations

import asyncio
import logging
from decimal import Decimal

import httpx
import httpx2
import pytest

from simrun._errors import ConfigError
from simrun._settings import Budgets, Price
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.dataset._files import Dataset, canonical_json
from simrun.scoring.pages._report import build_report
from simrun.scoring.store import _rates as R
from simrun.scoring.store._database import Store
from simrun.scoring.store._model_calls import replay_answers, spend
from simrun.simulator._ledger import Ledger
from simrun.simulator._plan import estimate
from simrun.simulator._pricing import Usage, cost, price_for, worst_case
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._model import ModelUser, ReplayCache
from simrun.simulator.users._prompt import OPENING, action_schema, stable_prefix
from simrun.simulator.users._providers import AnthropicProvider, OpenAIProvider
from simrun.simulator.users._retry import RetryPolicy
from tests.conftest import PLANTED_KEY as KEY
from tests.fixtures.model_api import FakeModelAPI

PRICE = Price(input_per_mtok=Decimal("2.00"), cached_input_per_mtok=Decimal("0.50"),
              cache_write_per_mtok=Decimal("2.50"), output_per_mtok=Decimal("8.00"))
PROVIDERS = {"openai": (OpenAIProvider, httpx), "anthropic": (AnthropicProvider, httpx2)}


pytestmark = pytest.mark.usefixtures("api_keys")


def small(demo, goals=("single-add-bag", "cancel-trip", "new-trip-full")) -> Dataset:
    return Dataset((demo.persona("plain-paula"), demo.persona("terse-tom")), tuple(demo.goal(g) for g in goals),
                   demo.hash, demo.item_hashes)


def user_for(kind: str, api: FakeModelAPI, ledger: Ledger, waits: list | None = None, price: Price = PRICE,
             **kw) -> ModelUser:
    provider_cls, http = PROVIDERS[kind]

    async def no_sleep(seconds):   # the policy's waits are recorded, not slept
        if waits is not None:
            waits.append(seconds)

    kw.setdefault("output", "json_schema")   # no probe: these tests count requests; auto has its own
    return ModelUser(f"{kind}:m", provider_cls("m", http_client=api.client(http)), price, ledger,
                     retry=RetryPolicy(sleep=no_sleep), **kw)


def run(db, dataset, user, ledger, *, repetitions=1, concurrency=4, runtime=None):
    with Store(db) as store:
        result = asyncio.run(run_matrix(dataset, runtime or PythonRuntime(TripDesk()), user, store,
                                        repetitions=repetitions, seed=5, budget=ledger.budget,
                                        concurrency=concurrency, ledger=ledger))
        calls = store.con.execute("SELECT conversation_id, turn, input_tokens, cached_input_tokens, "
                                  "cache_write_tokens, output_tokens, cost_usd, cache_status, answer "
                                  "FROM model_calls WHERE run_id = ? ORDER BY 1, 2", [result.run_id]).fetchall()
        spent = spend(store, result.run_id)
        ends = dict(store.con.execute("SELECT conversation_id, end_reason FROM conversations WHERE run_id = ?",
                                      [result.run_id]).fetchall())
        turns = store.con.execute("SELECT conversation_id, turn, user_turn, result FROM turns WHERE run_id = ? "
                                  "ORDER BY 1, 2", [result.run_id]).fetchall()
        findings = store.con.execute("SELECT conversation_id, turn, class FROM findings WHERE run_id = ? "
                                     "ORDER BY 1, 2, 3", [result.run_id]).fetchall()
        rates = {r.cls: r for r in R.class_rates(store, result.run_id)}
    return result, calls, spent, ends, turns, findings, rates


@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_model_user_drives_conversations_and_every_call_is_priced(tmp_path, demo, kind):
    api, ledger = FakeModelAPI(), Ledger(Decimal("1.00"))
    result, calls, (spent, n), ends, *_ = run(tmp_path / "m.duckdb", small(demo), user_for(kind, api, ledger), ledger)
    assert ends["plain-paula/single-add-bag/0"] == "goal_reached"
    assert ends["plain-paula/cancel-trip/0"] == "goal_reached"      # a message, then a click on Confirm
    assert n == len(api.requests) == len(calls) > 0
    assert spent == ledger.spent == result.spent_usd == sum(Decimal(str(c[6])) for c in calls)
    assert any(c[3] > 0 for c in calls), "the stable prefix was read from the cache"
    for _, _, uncached, cached, written, output, price, status, _ in calls:
        assert Decimal(str(price)) == cost(PRICE, Usage(uncached, cached, written, output))
        assert status == ("hit" if cached else "write" if written else "miss")
    if kind == "anthropic":
        assert all(r["system"][0]["cache_control"] == {"type": "ephemeral"} for r in api.requests)
    # Each call's request is stored as the JSON it was sent as (serialised once, not encoded again).
    with Store(tmp_path / "m.duckdb") as store:
        stored = [r for (r,) in store.con.execute("SELECT request FROM model_calls").fetchall()]
    assert sorted(stored) == sorted(map(canonical_json, api.requests))


# Prices whose costs need more than the store's eight decimal places.
FINE = Price(input_per_mtok=Decimal("0.0753"), cached_input_per_mtok=Decimal("0.00377"),
             cache_write_per_mtok=Decimal("0.094191"), output_per_mtok=Decimal("0.301137"))


@pytest.mark.parametrize("kind", PROVIDERS)
def test_costs_finer_than_the_store_keeps_still_make_one_spent_figure(tmp_path, demo, kind):
    """Each call's cost is rounded up to the store's precision where it is counted, so the run's
    own figure, the run's stored spend and the sum of its stored calls are one number (rounded
    apart, they differed in the ninth place), and no call is counted below what it cost."""
    api, ledger = FakeModelAPI(), Ledger(Decimal("1.00"))
    user = user_for(kind, api, ledger, price=FINE)
    result, calls, (spent, n), *_ = run(tmp_path / "m.duckdb", small(demo), user, ledger)
    assert n == len(calls) > 0
    assert spent == ledger.spent == result.spent_usd == sum(Decimal(str(c[6])) for c in calls)
    finer = 0
    for _, _, uncached, cached, written, output, price, *_ in calls:
        exact = (uncached * FINE.input_per_mtok + cached * FINE.cached_input_per_mtok
                 + written * FINE.cache_write_per_mtok + output * FINE.output_per_mtok) / 1_000_000
        assert Decimal(str(price)) == cost(FINE, Usage(uncached, cached, written, output))
        assert exact <= Decimal(str(price)) < exact + Decimal("1e-8")
        finer += exact != exact.quantize(Decimal("1e-8"))
    assert finer, "some costs needed more places than the store keeps"


@pytest.mark.parametrize("kind", PROVIDERS)
def test_the_stable_prefix_comes_first_and_never_changes_within_a_conversation(demo, kind):
    api, ledger = FakeModelAPI(), Ledger(Decimal("1"))
    run_one = lambda: run(":memory:", small(demo, ("cancel-trip",)), user_for(kind, api, ledger), ledger,  # noqa: E731
                          concurrency=1)
    run_one()
    systems = [r["messages"][0]["content"] if kind == "openai" else r["system"][0]["text"] for r in api.requests]
    assert len(systems) == 4 and systems[0] == systems[1] and systems[2] == systems[3]
    assert "Cancel a trip" in systems[0] and "Tom" in systems[2] and "Write as briefly" in systems[2]


@pytest.mark.parametrize("fault", ["429", "500", "timeout", "malformed", "wrong_shape"])
@pytest.mark.parametrize("kind", PROVIDERS)
def test_each_transient_fault_is_retried_within_the_policy(demo, kind, fault):
    api, ledger, waits = FakeModelAPI([fault, fault]), Ledger(Decimal("1")), []
    *_, ends, _, _, _ = run(":memory:", small(demo, ("single-add-bag",)), user_for(kind, api, ledger, waits),
                            ledger, concurrency=1)
    assert set(ends.values()) == {"goal_reached"}
    assert len(waits) == 2 and len(api.requests) == 2 + 2   # two failures, then one success per conversation
    if fault == "429":
        assert waits == [2.0, 2.0]                          # Retry-After honoured


@pytest.mark.parametrize("kind", PROVIDERS)
def test_the_run_closes_the_users_connections(demo, kind):
    api, ledger = FakeModelAPI(), Ledger(Decimal("1"))
    user = user_for(kind, api, ledger)
    assert not user.provider.client.is_closed()
    run(":memory:", small(demo, ("single-add-bag",)), user, ledger, concurrency=1)
    assert user.provider.client.is_closed()


@pytest.mark.parametrize("kind", PROVIDERS)
def test_exhausted_retries_end_as_provider_error_and_the_run_goes_on(tmp_path, demo, kind):
    api, ledger = FakeModelAPI(["500"] * 5), Ledger(Decimal("1"))
    result, calls, (spent, _), ends, _, _, rates = run(tmp_path / "r.duckdb", small(demo, ("single-add-bag",)),
                                                     user_for(kind, api, ledger), ledger, concurrency=1)
    assert ends["plain-paula/single-add-bag/0"] == "provider_error"
    assert ends["terse-tom/single-add-bag/0"] == "goal_reached"
    assert spent == sum(Decimal(str(c[6])) for c in calls) and ledger.reserved == 0
    assert rates["not_understood"].scored == 1                 # the provider_error is not the runtime's


@pytest.mark.parametrize("kind", PROVIDERS)
def test_an_authentication_error_is_never_retried(demo, kind):
    api, ledger, waits = FakeModelAPI(["401"]), Ledger(Decimal("1")), []
    *_, ends, _, _, _ = run(":memory:", small(demo, ("single-add-bag",)), user_for(kind, api, ledger, waits),
                            ledger, concurrency=1)
    assert ends["plain-paula/single-add-bag/0"] == "provider_error" and waits == []


def test_the_budget_is_never_overshot_by_64_concurrent_conversations(tmp_path, demo):
    api = FakeModelAPI()
    budget = Decimal("0.004")      # a few conversations' worth
    ledger = Ledger(budget)
    dataset = small(demo, ("new-trip-full", "cancel-trip"))
    result, calls, (spent, n), ends, _, _, rates = run(tmp_path / "b.duckdb", dataset,
                                                     user_for("openai", api, ledger), ledger,
                                                     repetitions=16, concurrency=64)
    assert spent <= budget and spent == ledger.spent == sum(Decimal(str(c[6])) for c in calls)
    assert ledger.reserved == 0 and ledger.overruns == 0 and result.budget_stopped
    cut = [cid for cid, end in ends.items() if end == "budget_cut"]
    assert cut and len(ends) < 64                           # in flight ended as budget_cut; no new one began
    assert all(r.scored <= len(ends) - len(cut) for r in rates.values() if r.kind == "progress")
    with Store(tmp_path / "b.duckdb") as store:
        html = build_report(store, result.run_id, tmp_path / "reports").read_text()
    listed = html.split('id="set-aside"', 1)[1].split("</table>", 1)[0]
    assert all(f"<td>{cid}</td><td>budget_cut</td>" in listed for cid in cut)


def test_a_conversation_budget_cuts_only_that_conversation(demo):
    api, ledger = FakeModelAPI(), Ledger(Decimal("1"))
    user = user_for("openai", api, ledger, per_conversation=Decimal("0.009"))
    *_, ends, _, _, _ = run(":memory:", small(demo, ("new-trip-full", "single-add-bag")), user, ledger)
    assert ends["plain-paula/new-trip-full/0"] == "budget_cut"
    assert ends["plain-paula/single-add-bag/0"] == "goal_reached"


def recorded(tmp_path, demo, kind: str):
    """A live run of the small matrix, and the answers it recorded for replay."""
    db = tmp_path / "live.duckdb"
    ledger = Ledger(Decimal("1"))
    live = run(db, small(demo), user_for(kind, FakeModelAPI(), ledger), ledger, concurrency=1)
    with Store(db) as store:
        return live, replay_answers(store, live[0].run_id)


def test_replay_gives_identical_transcripts_at_no_cost_and_no_request(tmp_path, demo):
    live, answers = recorded(tmp_path, demo, "anthropic")
    offline = FakeModelAPI(["500"] * 1000)                  # any request to it would fail the conversation
    cache = ReplayCache(answers, only=True)
    ledger2 = Ledger(Decimal("1"))
    replayed = run(tmp_path / "replay.duckdb", small(demo), user_for("anthropic", offline, ledger2, replay=cache),
                   ledger2, concurrency=1)
    assert offline.requests == [] and replayed[2][0] == 0 and cache.misses == 0
    assert replayed[4] == live[4] and replayed[5] == live[5] and replayed[3] == live[3]


def test_replay_only_fails_where_the_runtime_now_answers_differently(tmp_path, demo):
    _, answers = recorded(tmp_path, demo, "openai")
    changed = PythonRuntime(TripDesk(faults="dead_end=1.0"))
    cache = ReplayCache(answers, only=True)
    ledger2 = Ledger(Decimal("1"))
    _, _, _, ends, *_ = run(tmp_path / "r.duckdb", small(demo), user_for("openai", FakeModelAPI(), ledger2,
                                                                         replay=cache), ledger2,
                            concurrency=1, runtime=changed)
    assert "provider_error" in ends.values() and cache.misses > 0
    # Without --replay-only, the same misses go live.
    api3, ledger3 = FakeModelAPI(), Ledger(Decimal("1"))
    cache3 = ReplayCache(answers)
    _, _, (spent, _), ends3, *_ = run(tmp_path / "r3.duckdb", small(demo), user_for("openai", api3, ledger3,
                                                                                  replay=cache3), ledger3,
                                      concurrency=1, runtime=PythonRuntime(TripDesk(faults="dead_end=1.0")))
    assert "provider_error" not in ends3.values() and api3.requests and spent > 0


def test_a_planted_key_lands_in_no_byte_of_the_store_report_or_logs(tmp_path, demo, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    api, ledger = FakeModelAPI(["500", "401"]), Ledger(Decimal("1"))
    db = tmp_path / "k.duckdb"
    result, *_ = run(db, small(demo), user_for("openai", api, ledger), ledger)
    assert any(h.get("authorization") == f"Bearer {KEY}" for h in api.headers)   # it was used...
    with Store(db) as store:
        report = build_report(store, result.run_id, tmp_path / "reports")
    out, err = capfd.readouterr()
    for blob in (db.read_bytes(), report.read_bytes(), caplog.text.encode(), (out + err).encode()):
        assert KEY.encode() not in blob                                           # ...and kept nowhere


def test_a_model_backend_without_its_key_or_price_refuses_to_start(monkeypatch):
    from simrun.simulator.users._base import make_user

    budgets = Budgets(prices={"openai:m": PRICE})
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY"):
        make_user("openai:m", budgets=budgets)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with pytest.raises(ConfigError, match=r'no price for .openai:unpriced.*\[prices\."openai:unpriced"\]'):
        make_user("openai:unpriced", budgets=budgets)
    assert price_for(budgets, "openai:m") is PRICE


def test_the_worst_case_bounds_every_real_call(demo):
    api, ledger = FakeModelAPI(), Ledger(Decimal("1"))
    run(":memory:", small(demo), user_for("anthropic", api, ledger), ledger)
    assert ledger.overruns == 0
    assert worst_case(PRICE, 1000, 300) == (1000 * Decimal("2.50") + 300 * Decimal("8.00")) / 1_000_000


@pytest.mark.parametrize("kind", PROVIDERS)
def test_plan_estimates_the_spend_within_30_percent(tmp_path, demo, kind):
    dataset = small(demo, ("single-add-bag", "cancel-trip"))
    budgets = Budgets(prices={f"{kind}:m": PRICE})
    (est,) = asyncio.run(estimate(dataset, PythonRuntime(TripDesk()), budgets, Decimal(1), repetitions=2, seed=5))
    api, ledger = FakeModelAPI(), Ledger(Decimal("1"))
    result, *_ = run(tmp_path / "e.duckdb", dataset, user_for(kind, api, ledger), ledger, repetitions=2)
    assert abs(result.spent_usd - est.cost_usd) / result.spent_usd <= Decimal("0.30"), (est.cost_usd, result.spent_usd)
    assert est.affordable == est.conversations


def say(text):
    return lambda system, messages: {"action": "message", "text": text, "offer": None, "reason": None}


def stop(reason, after=0):
    def policy(system, messages):
        if sum(m["role"] == "assistant" for m in messages) >= after:
            return {"action": "stop", "text": None, "offer": None, "reason": reason}
        return {"action": "message", "text": "Hello, could you help me with my trip?", "offer": None, "reason": None}
    return policy


def brief(system, messages):
    instructions = system.split("## Your goal\n", 1)[1].split("\n\n", 1)[1].split("\n##", 1)[0]
    return {"action": "message", "text": " ".join(instructions.split()), "offer": None, "reason": None}


def contradicting(system, messages):
    said = sum(m["role"] == "assistant" for m in messages)
    text = "Rebook the outbound of Lisbon offsite to 9 September 2031." if not said else "Thanks, that is all."
    return {"action": "message", "text": text, "offer": None, "reason": None}


@pytest.mark.parametrize("policy, finding", [
    (say(""), "empty message"),
    (say("As an AI language model, I can help you book that."), "role leakage"),
    (say("Assistant: How can I help you today?"), "role leakage"),
    (say("Sorry, I'm just an AI and cannot travel."), "role leakage"),
    (say("Hmm, I am not sure what I should do here."), "the same message 3 times in a row"),
    (brief, "leaked instructions"),
    (stop("done"), "stopped before trying anything"),
    (stop("done", after=1), "claimed the goal was done while the store says it is not"),
    (contradicting, "contradicts the goal's facts"),
    (lambda system, messages: "Sure! I'd like to rebook my flight.", "not answer in the structured form"),
])
@pytest.mark.parametrize("kind", PROVIDERS)
def test_simulator_faults_in_model_output_are_caught_by_code(demo, kind, policy, finding):
    goal = "correct-rebook-date" if policy is contradicting else "new-trip-full"
    api, ledger = FakeModelAPI(policy=policy), Ledger(Decimal("1"))
    dataset = Dataset((demo.persona("plain-paula"),), (demo.goal(goal),), demo.hash, demo.item_hashes)
    with Store(":memory:") as store:
        run_id = asyncio.run(run_matrix(dataset, PythonRuntime(TripDesk()), user_for(kind, api, ledger), store,
                                        repetitions=1, seed=5, budget=Decimal(1), ledger=ledger)).run_id
        end, = store.con.execute("SELECT end_reason FROM conversations").fetchone()
        details = [d for (d,) in store.con.execute("SELECT detail FROM findings WHERE class = 'simulator_error'")
                   .fetchall()]
        rates = {r.cls: r for r in R.class_rates(store, run_id)}
    assert end == "simulator_error" and any(finding in d for d in details), details
    assert rates["dead_end"].scored == 0            # kept out of the runtime's rates


def test_every_manner_is_honoured_through_the_prompt(demo):
    from simrun.simulator.users._prompt import MANNER_PROMPTS, stable_prefix

    for persona in demo.personas:
        prefix = stable_prefix(persona, demo.goal("new-trip-full"))
        for manner, text in MANNER_PROMPTS.items():
            lead = text.split("{pct}")[0][:30]
            assert (lead in prefix) == (persona.rate(manner) > 0), (persona.id, manner)
            if persona.rate(manner) > 0:
                assert f"{persona.rate(manner):.0%}" in prefix


@pytest.mark.parametrize(("fault", "status"), [
    ("no_usage", "no_usage"), ("empty_usage", "no_usage"),          # a good answer, its cost unknown
    ("malformed", "unreadable"), ("wrong_shape", "unreadable"),     # an answer that cannot be read, retried
])
@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_call_of_unknown_cost_is_charged_at_its_worst_case(demo, kind, fault, status):
    api, ledger = FakeModelAPI([fault]), Ledger(Decimal("1"))
    _, calls, (spent, _), ends, *_ = run(":memory:", small(demo, ("single-add-bag",)), user_for(kind, api, ledger),
                                         ledger, concurrency=1)
    assert set(ends.values()) == {"goal_reached"}
    unknown = [c for c in calls if c[7] == status]
    worst = worst_case(PRICE, len(canonical_json(api.requests[0]).encode()), 300)
    assert len(unknown) == 1 and unknown[0][2] == 0 and Decimal(str(unknown[0][6])) == worst
    assert worst > max(Decimal(str(c[6])) for c in calls if c[7] != status)
    assert spent == ledger.spent == sum(Decimal(str(c[6])) for c in calls) and ledger.reserved == 0


def test_a_retry_the_budget_cannot_hold_ends_as_a_budget_cut(demo):
    api = FakeModelAPI(["wrong_shape"])
    first = canonical_json(OpenAIProvider("m", http_client=api.client()).request(
        stable_prefix(demo.persona("plain-paula"), demo.goal("single-add-bag")), [{"role": "user", "content": OPENING}],
        300, action_schema(demo.goal("single-add-bag"))))
    worst = worst_case(PRICE, len(first.encode()), 300)
    ledger = Ledger(worst * Decimal("1.5"))    # one worst case, not two
    dataset = Dataset((demo.persona("plain-paula"),), (demo.goal("single-add-bag"),), demo.hash, demo.item_hashes)
    _, calls, (spent, _), ends, *_ = run(":memory:", dataset, user_for("openai", api, ledger), ledger, concurrency=1)
    assert ends == {"plain-paula/single-add-bag/0": "budget_cut"}
    assert spent == ledger.spent == worst and ledger.reserved == 0 and len(api.requests) == 1


@pytest.mark.parametrize("request_", [
    {"model": "m", "messages": [{"role": "user", "content": "Straße → 東京, \"quoted\"\n"}], "max_tokens": 64},
    {"z": [1, 2.5, None, True], "a": {"nested": {"b": "é"}}, "request": "a field named as the key's"},
    {}])
def test_a_request_s_key_is_the_hash_of_earlier_runs_though_its_json_is_made_once(request_):
    """The replay cache's key is composed from the request's JSON already made for the call: the
    same text, so the same key, as hashing the whole again (a run stored before still replays)."""
    import hashlib

    from simrun.simulator.users._model import key_around, request_key

    for identity in ({"persona": "plain-paula", "goal": "cancel-trip", "seed": 1714395345, "repetition": 2},
                     {"persona": "a\u0000b", "goal": "r", "seed": 0, "repetition": 0, "zz": [None]}):
        whole = hashlib.sha256(canonical_json({"request": request_, **identity}).encode()).hexdigest()
        assert request_key(canonical_json(request_), key_around(identity)) == whole
