"""simrun's light OpenAI-compatible client against the openai SDK's, on a real server (the fake API
served over HTTP): the same answers, the same exceptions for the same failures, so that retries,
evidence and redaction cannot tell them apart."""

from __future__ import annotations

import asyncio

import pytest

from simrun.scoring.dataset._files import canonical_json
from simrun.simulator._retry import retry_after, server_message, should_retry
from simrun.simulator.adapters._process import free_port
from simrun.simulator.users._providers import OpenAIProvider
from tests.fixtures.model_api import FakeModelAPI, serve

KEY = "sk-wire-test-0123456789"
FAULTS = ["429", "500", "malformed", "wrong_shape", "401", "400", "no_usage"]


@pytest.fixture(scope="module")
def api():
    fake = FakeModelAPI(retry_after="3", cache=False)   # the same request twice, billed alike
    port = free_port()
    server = serve(fake, port)
    yield fake, f"http://127.0.0.1:{port}/v1"
    server.should_exit = True


def outcome(url: str, client: str, fault: str | None, api: FakeModelAPI, monkeypatch) -> tuple:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    provider = OpenAIProvider("m", base_url=url, timeout_s=5, client=client)
    request = provider.request("You are a user. ## Your goal\nAdd a bag\n", [{"role": "user", "content": "go"}], 50,
                               {"type": "object"})

    async def call():
        if fault:
            api.faults.append(fault)
        try:
            completion = await provider.complete(request, canonical_json(request))
            return ("answered", completion.answer, completion.usage, completion.usage_reported, completion.cut_off)
        except Exception as exc:
            return (type(exc).__name__, getattr(exc, "status_code", None), str(exc), should_retry(exc),
                    retry_after(exc), server_message(exc))
        finally:
            await provider.client.close()

    return asyncio.run(call())


@pytest.mark.parametrize("fault", [None, *FAULTS])
def test_the_light_client_answers_and_fails_as_the_sdk_does(api, fault, monkeypatch):
    fake, url = api
    fake.record = True
    light, sdk = (outcome(url, client, fault, fake, monkeypatch) for client in ("light", "sdk"))
    assert light == sdk
    if fault in ("429", "500", "401", "400"):
        assert light[1] == int(fault)
    if fault == "429":
        assert light[3] is True and light[4] == 3.0          # retried, after what Retry-After asks
    if fault in ("401", "400"):
        assert light[3] is False                              # never retried
    assert KEY not in repr(light)


def test_the_light_client_sends_the_body_it_is_given_with_the_key_in_the_header_only(api, monkeypatch):
    fake, url = api
    fake.record = True
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-simrun")
    provider = OpenAIProvider("m", base_url=url, timeout_s=5)
    request = provider.request("## Your goal\nAdd a bag\n", [{"role": "user", "content": "go"}], 50, {"type": "object"})

    async def call():
        try:
            return await provider.complete(request, canonical_json(request))
        finally:
            await provider.client.close()

    asyncio.run(call())
    assert fake.requests[-1] == request
    headers = {k.lower(): v for k, v in fake.headers[-1].items()}
    assert headers["authorization"] == f"Bearer {KEY}" and headers["openai-organization"] == "org-simrun"
    assert KEY not in canonical_json(fake.requests[-1])


def test_a_server_that_does_not_answer_in_time_is_a_timeout_and_one_that_is_gone_a_connection_error(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fake = FakeModelAPI()
    port = free_port()
    server = serve(fake, port, latency_s=1.0)
    try:
        for url, expected in ((f"http://127.0.0.1:{port}/v1", "APITimeoutError"),
                              (f"http://127.0.0.1:{free_port()}/v1", "APIConnectionError")):
            provider = OpenAIProvider("m", base_url=url, timeout_s=0.3)

            async def call(provider=provider):
                try:
                    request = provider.request("## Your goal\nA\n", [{"role": "user", "content": "go"}], 9, {})
                    await provider.complete(request)
                except Exception as exc:
                    return type(exc).__name__, should_retry(exc)
                finally:
                    await provider.client.close()

            assert asyncio.run(call()) == (expected, True)
    finally:
        server.should_exit = True
