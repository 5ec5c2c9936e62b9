"""Every plain answer simrun reads is bounded as it arrives, whichever path reads it: the http, chat
and template transports (runtime.max_result_bytes) and the light path for OpenAI-compatible model
servers (MAX_ANSWER_BYTES). A 64 MB answer and a gzip bomb (under 1 MB on the wire, 200 MB
inflated, sent though simrun never asked for compression) each end in the path's own error, having
cost the bound and a decoded block, never what the server sends (measured with tracemalloc: the
server, in this process, writes its answer from memory allocated before tracing starts)."""

from __future__ import annotations

import asyncio
import functools
import tracemalloc
import zlib

import pytest
from aiohttp import web

from simrun._errors import RuntimeFault
from simrun.simulator.adapters._http import HttpRuntime
from simrun.simulator.adapters._template import ChatRuntime, TemplateRuntime
from simrun.simulator.users import ModelAPIError
from simrun.simulator.users._providers import OpenAIProvider
from simrun.simulator.users._wire import MAX_ANSWER_BYTES

HUGE = 64 * 1024 * 1024
INFLATED = 200 * 1024 * 1024
LIMIT = 1024 * 1024            # the runtimes' bound here; the model path's is MAX_ANSWER_BYTES
CHUNK = b"x" * (1024 * 1024)


@functools.cache
def bomb() -> bytes:
    """200 MB of JSON text, gzip-compressed a megabyte at a time (never held inflated)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [packer.compress(b'{"reply": "')]
    parts += [packer.compress(CHUNK) for _ in range(INFLATED // len(CHUNK))]
    return b"".join([*parts, packer.compress(b'"}'), packer.flush()])


async def answer(kind: str, request: web.Request) -> web.StreamResponse:
    await request.read()
    if kind == "bomb":
        return web.Response(body=bomb(), headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    try:
        await response.write(b'{"reply": "')
        for _ in range(HUGE // len(CHUNK)):
            await response.write(CHUNK)
        await response.write(b'"}')
    except ConnectionError:          # simrun stopped reading at its bound, and closed the connection
        pass
    return response


async def http_turn(url: str) -> None:
    runtime = HttpRuntime(url=url, max_result_bytes=LIMIT, timeout_s=60)
    try:
        await runtime.turn("s1", {"kind": "message", "text": "hi"})
    finally:
        await runtime.aclose()


async def foreign_turn(runtime) -> None:
    try:
        session = await runtime.start({"seed": 1, "persona": "p", "goal": "g", "setup": {}})
        await runtime.turn(session, {"message": "hi"})
    finally:
        await runtime.aclose()


async def chat_turn(url: str) -> None:
    await foreign_turn(ChatRuntime(url=f"{url}/v1", model="m", timeout_s=60, max_result_bytes=LIMIT))


async def template_turn(url: str) -> None:
    await foreign_turn(TemplateRuntime(url=f"{url}/ask", body={"q": "{message}"}, reply="/reply", timeout_s=60,
                                       max_result_bytes=LIMIT))


async def model_call(url: str) -> None:
    provider = OpenAIProvider("m", base_url=f"{url}/v1", timeout_s=60)
    try:
        await provider.complete(provider.request("be a user", [{"role": "user", "content": "hi"}], 50, {}))
    finally:
        await provider.client.close()


PATHS = {"http": (http_turn, RuntimeFault, LIMIT), "chat": (chat_turn, RuntimeFault, LIMIT),
         "template": (template_turn, RuntimeFault, LIMIT), "model": (model_call, ModelAPIError, MAX_ANSWER_BYTES)}


@pytest.fixture(scope="module", autouse=True)
def the_bomb_made_once():
    assert len(bomb()) < 1024 * 1024


@pytest.mark.parametrize("kind", ["huge", "bomb"])
@pytest.mark.parametrize("path", list(PATHS))
def test_an_answer_past_the_bound_costs_the_bound_on_every_path(path, kind, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k-not-sent-anywhere")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    call, error, limit = PATHS[path]

    async def go():
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", functools.partial(answer, kind))
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        tracemalloc.start()
        try:
            with pytest.raises(error) as caught:
                await call(f"http://127.0.0.1:{port}")
            return caught.value, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            await runner.cleanup()

    raised, peak = asyncio.run(go())
    if isinstance(raised, RuntimeFault):
        assert raised.kind == "too_large", raised
        assert raised.evidence["bytes_read"] > limit and raised.evidence["body"].startswith('{"reply": "')
    else:
        assert "more than" in str(raised), raised
    # The bound, what one decoded block and its copies hold, and the client's own: never the 64 or 200 MB.
    assert peak < limit + 24 * 1024 * 1024, f"{path}, {kind}: peaked at {peak / 2**20:.0f} MB"
