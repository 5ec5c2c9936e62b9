"""The structured-output forms real servers speak, through the real SDKs against local fakes of
each server's behaviour: every one ends in judged conversations, and the form is recorded."""

from __future__ import annotations

import asyncio
import json
import time
from decimal import Decimal

import httpx
import httpx2
import pytest

from simrun._errors import UserModelUnavailable
from simrun._transcript import NOT_THE_RUNTIME
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.store._database import Store
from simrun.simulator._ledger import Ledger
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._process import free_port
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._model import ModelUser
from simrun.simulator.users._prompt import REPAIR
from simrun.simulator.users._providers import AnthropicProvider, OpenAIProvider
from simrun.simulator.users._retry import RetryPolicy
from tests.fixtures.model_api import FakeModelAPI, serve
from tests.simulator.users.test_model_users import PRICE, small

AUTO_CHOOSES = {"openai": "json_schema", "llamacpp": "json_object", "vllm": "json_object", "tools": "tools",
                "prose": "prompt"}


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dialects-0000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-dialects-0000")


def openai_user(api: FakeModelAPI, ledger: Ledger, waits: list | None = None, *, output: str = "auto",
                client=None, timeout_s: float = 60.0, **kw) -> ModelUser:
    async def no_sleep(seconds):
        if waits is not None:
            waits.append(seconds)

    provider = OpenAIProvider("m", http_client=client or api.client(), timeout_s=timeout_s)
    return ModelUser("openai:m", provider, PRICE, ledger, retry=RetryPolicy(sleep=no_sleep), output=output, **kw)


def play(dataset, user, ledger, *, concurrency=4, db=":memory:"):
    """Run the matrix; return (result, ends, user turns by conversation, model_calls rows, runs row)."""
    with Store(db) as store:
        result = asyncio.run(run_matrix(dataset, PythonRuntime(TripDesk()), user, store, repetitions=1, seed=5,
                                        budget=ledger.budget, concurrency=concurrency, ledger=ledger))
        ends = dict(store.con.execute("SELECT conversation_id, end_reason FROM conversations").fetchall())
        turns: dict[str, list[dict]] = {}
        for cid, user_turn in store.con.execute("SELECT conversation_id, user_turn FROM turns ORDER BY 1, turn"
                                                ).fetchall():
            turns.setdefault(cid, []).append(json.loads(user_turn))
        calls = store.con.execute("SELECT conversation_id, cache_status, cost_usd FROM model_calls").fetchall()
        errors = dict(store.con.execute("SELECT conversation_id, error FROM conversations WHERE error IS NOT NULL"
                                        ).fetchall())
        run = store.run(result.run_id)
    return result, ends, turns, calls, run, errors


def judged(ends: dict) -> list[str]:
    return [cid for cid, end in ends.items() if end not in NOT_THE_RUNTIME]


@pytest.mark.parametrize("dialect", sorted(AUTO_CHOOSES))
def test_auto_probes_once_falls_back_in_order_and_records_the_form(demo, dialect):
    api, ledger, waits = FakeModelAPI(dialect=dialect), Ledger(Decimal(1)), []
    user = openai_user(api, ledger, waits)
    result, ends, turns, calls, run, _ = play(small(demo, ("single-add-bag", "cancel-trip")), user, ledger)
    assert result.user_output == run["user_output"] == AUTO_CHOOSES[dialect]
    probes = [r for r in api.requests if r["messages"][0]["content"].startswith("Reply with the JSON object")]
    order = ["json_schema", "json_object", "guided_json", "tools", "prompt"]
    assert [FakeModelAPI.form_of(r)[0] for r in probes] == order[:order.index(AUTO_CHOOSES[dialect]) + 1]
    assert waits == []                                 # a refused form is not retried
    assert [end for end in ends.values() if end == "goal_reached"], ends   # judged, and reached
    assert all(FakeModelAPI.form_of(r)[0] == AUTO_CHOOSES[dialect] for r in api.requests if r not in probes)
    # Every call answered is stored, the probes' too (a refused one cost nothing): the spend is their sum.
    answered_probes = 5 if dialect == "prose" else 1      # prose answers every form, honouring none
    assert sum(1 for c in calls if c[0] == "(output probe)") == answered_probes
    assert len(calls) == len(api.requests) - (len(probes) - answered_probes)
    assert sum(Decimal(str(c[2])) for c in calls) == result.spent_usd == ledger.spent
    if dialect == "llamacpp":   # no prompt_tokens_details: priced as uncached, never guessed
        assert {c[1] for c in calls} == {"miss"}


@pytest.mark.parametrize(("dialect", "form"), [("vllm", "guided_json"), ("tools", "tools"),
                                               ("llamacpp", "json_object"), ("prose", "prompt"),
                                               ("openai", "json_schema")])
def test_each_form_asked_for_ends_in_judged_conversations(demo, dialect, form):
    api, ledger = FakeModelAPI(dialect=dialect), Ledger(Decimal(1))
    result, ends, turns, *_ = play(small(demo, ("single-add-bag", "cancel-trip")),
                                   openai_user(api, ledger, output=form), ledger)
    assert result.user_output == form and all(FakeModelAPI.form_of(r)[0] == form for r in api.requests)
    assert len(judged(ends)) == len(ends) == 4 and "goal_reached" in ends.values()
    # The step the model declared is recorded on its turn.
    assert all(t["step"] == "step-1" for cid in turns for t in turns[cid] if t["kind"] == "message")


def test_the_answer_schema_offers_the_goals_step_ids_in_every_form(demo):
    goal = demo.goal("new-trip-full")
    for form in ("json_schema", "json_object", "guided_json", "tools"):
        api, ledger = FakeModelAPI(), Ledger(Decimal(1))
        dataset = small(demo, (goal.id,))
        play(dataset, openai_user(api, ledger, output=form), ledger, concurrency=1)
        _, schema = FakeModelAPI.form_of(api.requests[0])
        assert schema["properties"]["step"]["enum"] == [goal.step_id(i) for i in range(len(goal.steps))] + [None]
        assert "step" in schema["required"]
        system = api.requests[0]["messages"][0]["content"]
        assert all(f"- {goal.step_id(i)}" in system for i in range(len(goal.steps)))


def test_a_probe_step_is_named_as_a_probe_in_the_prompt(demo):
    from simrun.simulator.users._prompt import stable_prefix

    goal = demo.goal("passport-refusal")
    probes = [goal.step_id(i) for i, s in enumerate(goal.steps) if s.expect == "refusal"]
    prefix = stable_prefix(demo.persona("plain-paula"), goal)
    assert probes and all(f"- {sid} (a probe" in prefix for sid in probes)


def test_an_unknown_step_id_is_not_recorded_as_a_step(demo):
    def policy(system, messages):
        return {"action": "message", "text": "Please add one checked bag to my Lisbon offsite trip.", "offer": None,
                "reason": None, "step": "step-99"}

    api, ledger = FakeModelAPI(dialect="prose", policy=policy), Ledger(Decimal(1))
    _, _, turns, *_ = play(small(demo, ("single-add-bag",)), openai_user(api, ledger, output="prompt"), ledger)
    first = next(iter(turns.values()))[0]
    assert first["step"] is None and first["meta"]["unknown_step"] == "step-99"


def prose_until_repaired(system, messages):
    """Answers in prose unless the last message is the repair prompt."""
    if messages[-1]["content"].startswith(REPAIR.split("{")[0]):
        return {"action": "message", "text": "Please add one checked bag to my Lisbon offsite trip.",
                "offer": None, "reason": None, "step": None}
    return "I would like to add a bag, please."


def test_the_repair_step_quotes_the_parse_error_once_and_the_conversation_goes_on(demo):
    api, ledger = FakeModelAPI(policy=prose_until_repaired), Ledger(Decimal(1))
    _, ends, *_ = play(small(demo, ("single-add-bag",)), openai_user(api, ledger, output="json_schema"), ledger,
                       concurrency=1)
    repairs = [r for r in api.requests if r["messages"][-1]["content"].startswith("Your last answer could not")]
    assert repairs and "not JSON" in repairs[0]["messages"][-1]["content"]
    assert repairs[0]["messages"][-2] == {"role": "assistant", "content": "I would like to add a bag, please."}
    assert set(ends.values()) == {"goal_reached"}


def test_an_answer_still_unreadable_after_the_repair_is_a_simulator_error_of_its_own_kind(demo):
    api, ledger = FakeModelAPI(policy=lambda s, m: "Sure, happy to help!"), Ledger(Decimal(1))
    _, ends, _, _, _, errors = play(small(demo, ("single-add-bag",)), openai_user(api, ledger, output="json_schema"),
                                    ledger, concurrency=1)
    assert set(ends.values()) == {"simulator_error"}
    error = json.loads(next(iter(errors.values())))
    assert error["kind"] == "unstructured" and "even after the repair step" in error["message"]
    assert len(api.requests) == 2 * len(ends)          # the answer, and one repair: no more


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_an_answer_cut_off_at_max_tokens_says_to_raise_max_tokens(demo, kind):
    api, ledger = FakeModelAPI(["length"]), Ledger(Decimal(1))
    if kind == "openai":
        user = openai_user(api, ledger, output="json_schema", max_tokens=77)
    else:
        user = ModelUser("anthropic:m", AnthropicProvider("m", http_client=api.client(httpx2)), PRICE, ledger,
                         max_tokens=77)
    dataset = small(demo, ("single-add-bag",))
    _, ends, _, _, _, errors = play(dataset, user, ledger, concurrency=1)
    cut = [json.loads(e) for e in errors.values()]
    assert len(cut) == 1 and cut[0]["kind"] == "cut_off" and "raise max_tokens" in cut[0]["message"]
    assert "(77)" in cut[0]["message"]
    assert list(ends.values()).count("simulator_error") == 1 and "goal_reached" in ends.values()
    assert api.requests[0]["max_tokens"] == 77


def test_the_user_settings_reach_the_request(demo):
    api, ledger = FakeModelAPI(), Ledger(Decimal(1))
    provider = OpenAIProvider("m", http_client=api.client(), temperature=0.2, output="json_object")
    user = ModelUser("openai:m", provider, PRICE, ledger, max_tokens=120, output="json_object")
    play(small(demo, ("single-add-bag",)), user, ledger)
    assert {(r["temperature"], r["max_tokens"]) for r in api.requests} == {(0.2, 120)}


def test_a_server_that_takes_no_form_is_refused_before_the_run_with_its_message(demo):
    api, ledger = FakeModelAPI(["401"] * 5), Ledger(Decimal(1))
    with Store(":memory:") as store:
        with pytest.raises(UserModelUnavailable, match="bad key"):
            asyncio.run(run_matrix(small(demo, ("single-add-bag",)), PythonRuntime(TripDesk()),
                                   openai_user(api, ledger), store, repetitions=1, seed=5, budget=Decimal(1),
                                   ledger=ledger))
        assert store.con.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_what_a_failed_probe_paid_for_is_said_since_no_run_records_it(demo):
    # json_schema: five answers that cannot be read, each charged at its worst case; then a bad key.
    api, ledger = FakeModelAPI(["malformed"] * 5 + ["401"] * 5), Ledger(Decimal(1))
    with Store(":memory:") as store:
        with pytest.raises(UserModelUnavailable) as refused:
            asyncio.run(run_matrix(small(demo, ("single-add-bag",)), PythonRuntime(TripDesk()),
                                   openai_user(api, ledger), store, repetitions=1, seed=5, budget=Decimal(1),
                                   ledger=ledger))
        assert store.con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    assert ledger.spent > 0
    assert f"the probe's answered calls cost {ledger.spent:.6f} USD, which no run records" in str(refused.value)


def served(api: FakeModelAPI, latency_s: float, slots: int | None):
    port = free_port()
    server = serve(api, port, latency_s=latency_s, slots=slots)
    return server, f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("hint", [None, 1])
def test_a_slow_single_slot_server_needs_the_concurrency_hint(demo, hint):
    """Eight conversations at once against a server that answers one call at a time: without
    the hint, calls queue there past their timeout and are retried; with `[user] concurrency = 1`
    they wait their turn here, and none times out."""
    api = FakeModelAPI(dialect="llamacpp")
    server, url = served(api, latency_s=0.15, slots=1)
    try:
        ledger, waits = Ledger(Decimal(1)), []
        provider = OpenAIProvider("m", base_url=url, timeout_s=0.6, output="json_object")
        user = ModelUser("openai:m", provider, PRICE, ledger, output="json_object", concurrency=hint,
                         retry=RetryPolicy(sleep=_recording(waits)))
        _, ends, *_ = play(small(demo, ("single-add-bag", "cancel-trip", "rename-trip", "remove-bag")), user,
                           ledger, concurrency=8)
    finally:
        server.should_exit = True
    if hint:
        assert waits == [] and len(judged(ends)) == len(ends) == 8
    else:
        assert waits, "without the hint, calls queued past their timeout and were retried"


def _recording(waits: list):
    async def sleep(seconds):
        waits.append(seconds)
        await asyncio.sleep(0)
    return sleep


def test_the_fake_single_slot_server_works_one_call_at_a_time():
    api = FakeModelAPI()
    server, url = served(api, latency_s=0.2, slots=1)
    try:
        async def three():
            async with httpx.AsyncClient() as client:
                body = {"model": "m", "messages": [
                    {"role": "system", "content": 'Reply with the JSON object {"ok": true} and nothing else.'},
                    {"role": "user", "content": "ok?"}]}
                started = time.perf_counter()
                await asyncio.gather(*(client.post(f"{url}/chat/completions", json=body) for _ in range(3)))
                return time.perf_counter() - started
        assert asyncio.run(three()) >= 0.6
    finally:
        server.should_exit = True
