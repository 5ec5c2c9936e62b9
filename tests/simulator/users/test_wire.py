"""simrun's light path for OpenAI-compatible servers against the openai SDK's own client (kept in
benchmarks/ for comparison), on a real server (the fake API served over HTTP): the same answers,
and for the same failures simrun's own errors, never the SDK's, classified as the SDK's own
exceptions are (status, retried or not, Retry-After, what the server said), so that retries,
evidence and redaction cannot tell them apart."""

from __future__ import annotations

import asyncio

import pytest

from benchmarks.sdk_client import SdkOpenAIProvider
from simrun.scoring.dataset._files import canonical_json
from simrun.simulator.adapters._process import free_port
from simrun.simulator.users import ModelAPIError
from simrun.simulator.users._providers import OpenAIProvider
from simrun.simulator.users._retry import RetryPolicy, retry_after, server_message, should_retry
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
    provider = (OpenAIProvider if client == "light" else SdkOpenAIProvider)("m", base_url=url, timeout_s=5)
    request = provider.request("You are a user. ## Your goal\nAdd a bag\n", [{"role": "user", "content": "go"}], 50,
                               {"type": "object"})

    async def call():
        if fault:
            api.faults.append(fault)
        try:
            completion = await provider.complete(request, canonical_json(request))
            return ("answered", completion.answer, completion.usage, completion.usage_reported, completion.cut_off)
        except Exception as exc:
            # What the retry logic and the stored evidence read of a failure; the class is the
            # path's own (simrun's, or the SDK's), so it is returned apart.
            return (getattr(exc, "status_code", None), str(exc), should_retry(exc),
                    retry_after(exc), server_message(exc)), exc
        finally:
            await provider.client.close()

    return asyncio.run(call())


@pytest.mark.parametrize("fault", [None, *FAULTS])
def test_the_light_path_fails_with_simrun_s_errors_read_as_the_sdk_s_own(api, fault, monkeypatch):
    import openai

    fake, url = api
    fake.record = True
    light, sdk = (outcome(url, client, fault, fake, monkeypatch) for client in ("light", "sdk"))
    if len(light) == 2:                      # a failure: (what is read of it, the exception)
        (light, light_exc), (sdk, sdk_exc) = light, sdk
        assert isinstance(light_exc, Exception) and not isinstance(light_exc, openai.OpenAIError)
        if fault != "malformed" and fault != "wrong_shape":
            assert isinstance(light_exc, ModelAPIError)          # simrun's own
        assert isinstance(sdk_exc, Exception)
    assert light == sdk
    if fault in ("429", "500", "401", "400"):
        assert light[0] == int(fault)
    if fault == "429":
        assert light[2] is True and light[3] == 3.0          # retried, after what Retry-After asks
    if fault in ("401", "400"):
        assert light[2] is False                              # never retried
    assert KEY not in repr(light)


@pytest.mark.parametrize("fault", ["429", "500", "401"])
def test_the_sdk_s_own_exceptions_reach_the_retry_logic_and_end_as_the_light_path_s(api, fault, monkeypatch):
    """The same failure, through either client, ends as the same ProviderFailure after the same
    attempts: the retry logic classifies the SDK's documented types and simrun's alike."""
    fake, url = api
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ended = []
    for cls in (OpenAIProvider, SdkOpenAIProvider):
        provider = cls("m", base_url=url, timeout_s=5)
        request = provider.request("## Your goal\nA\n", [{"role": "user", "content": "go"}], 9, {})
        calls = []

        async def attempt(provider=provider, request=request, calls=calls):
            calls.append(1)
            fake.faults.append(fault)
            return await provider.complete(request)

        async def no_wait(_):
            return None

        async def go(provider=provider, attempt=attempt):
            try:
                await RetryPolicy(attempts=3, sleep=no_wait).call(attempt)
            except Exception as exc:
                return exc
            finally:
                await provider.client.close()

        failure = asyncio.run(go())
        fake.faults.clear()
        ended.append((failure.kind, failure.evidence["status"], failure.evidence["server_message"], len(calls)))
    assert ended[0] == ended[1]
    assert ended[0][3] == (1 if fault == "401" else 3)


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


def test_a_server_that_does_not_answer_in_time_is_simrun_s_timeout_and_one_that_is_gone_unreachable(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fake = FakeModelAPI()
    port = free_port()
    server = serve(fake, port, latency_s=1.0)
    try:
        for url, expected in ((f"http://127.0.0.1:{port}/v1", "ModelTimeout"),
                              (f"http://127.0.0.1:{free_port()}/v1", "ModelUnreachable")):
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
