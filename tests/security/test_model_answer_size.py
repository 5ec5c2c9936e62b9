"""A user model's answer is held to MAX_ANSWER_BYTES as it arrives, whichever backend reads it:
the anthropic SDK, given a client built with a bounding transport (simulator/users/_bounded.py),
as simrun's light path for OpenAI-compatible servers (simulator/users/_wire.py). A server named by
ANTHROPIC_BASE_URL or OPENAI_BASE_URL may be broken or hostile; one bad answer costs one call
(retried, then the conversation), never the run's memory."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc

import anthropic
import pytest
from aiohttp import web

from simrun.simulator.users import ModelAPIError
from simrun.simulator.users._providers import AnthropicProvider, OpenAIProvider
from simrun.simulator.users._wire import MAX_ANSWER_BYTES

# What each backend raises for an answer past the bound: the SDK's documented connection error
# (from the transport's ReadError), or simrun's own error from its light path.
PROVIDERS = {"anthropic": (AnthropicProvider, "", anthropic.APIConnectionError),
             "openai": (OpenAIProvider, "/v1", ModelAPIError)}

HUGE = 64 * 1024 * 1024
OK = {"id": "m1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
      "content": [{"type": "tool_use", "id": "t", "name": "user_turn", "input": {"message": "hi"}}],
      "usage": {"input_tokens": 5, "output_tokens": 2}}


def _bomb() -> bytes:
    """Small on the wire, 200 MB inflated (made before memory is traced: the server is in this process)."""
    return gzip.compress(b'{"content": "' + b"a" * (200 * 1024 * 1024) + b'"}', compresslevel=9)


def _answers(kind: str, bomb: bytes = b""):
    async def messages(request: web.Request) -> web.StreamResponse:
        if kind == "ok":
            return web.json_response(OK)
        if kind == "bomb":   # sent compressed, though simrun asked for it uncompressed
            return web.Response(body=bomb, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
        response = web.StreamResponse(status=200 if kind == "huge" else 500,
                                      headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"error": "')
        chunk = b"x" * (1024 * 1024)
        try:
            for _ in range(HUGE // len(chunk)):
                await response.write(chunk)
        except (ConnectionResetError, ConnectionError):
            pass
        return response
    return messages


async def _call(kind: str, bomb: bytes = b"", provider: str = "anthropic"):
    app = web.Application()
    app.router.add_post("/v1/messages", _answers(kind, bomb))
    app.router.add_post("/v1/chat/completions", _answers(kind, bomb))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    provider_cls, suffix, _ = PROVIDERS[provider]
    client = provider_cls("m", base_url=f"http://127.0.0.1:{port}{suffix}", timeout_s=30)
    try:
        request = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hello"}]}
        return await client.complete(request)
    finally:
        await client.client.close()
        await runner.cleanup()


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("kind", ["huge", "error", "bomb"])
def test_an_answer_past_the_bound_costs_the_call_not_the_memory_on_every_provider(kind, provider, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-real-key-000")
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key-000")
    bomb = _bomb() if kind == "bomb" else b""
    tracemalloc.start()
    try:
        with pytest.raises(PROVIDERS[provider][2]):
            asyncio.run(_call(kind, bomb, provider))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_ANSWER_BYTES + 16 * 1024 * 1024, f"peaked at {peak / 2**20:.0f} MB"


def test_an_ordinary_answer_is_read_through_the_bound(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-real-key-000")
    completion = asyncio.run(_call("ok"))
    assert completion.answer == {"message": "hi"} and completion.usage.output_tokens == 2


def test_no_private_attribute_of_a_library_is_read_or_set_on_the_model_path():
    """The bound and the proxy go through what the SDKs and httpx let a caller configure: a
    release that renames a private attribute cannot undo them. (A rule over the source, since a
    private attribute that is read leaves no trace at run time.)"""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "simrun" / "simulator" / "users"
    private = re.compile(r"\b(?:client|transport|response|request|sdk|inner|http_client)\._[a-z]\w*")
    found = [f"{path.name}: {line.strip()}" for path in sorted(root.glob("*.py"))
             for line in path.read_text().splitlines() if private.search(line) and not line.lstrip().startswith("#")]
    assert found == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_call_given_up_on_says_the_answer_was_too_large(provider, monkeypatch):
    """What the user reads of the failed call names the bound, not only the SDK's 'Connection error.'"""
    from simrun._errors import ProviderFailure
    from simrun.simulator.users._retry import RetryPolicy

    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-real-key-000")
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key-000")

    async def no_wait(_):
        return None

    with pytest.raises(ProviderFailure) as info:
        asyncio.run(RetryPolicy(attempts=2, sleep=no_wait).call(lambda: _call("huge", provider=provider)))
    assert info.value.kind == "retries_exhausted" and f"more than {MAX_ANSWER_BYTES:,} bytes" in str(info.value), \
        str(info.value)
