"""The HTTP client the Anthropic SDK is given: every answer held to MAX_ANSWER_BYTES as it arrives,
and the proxy the environment names, both through what the SDK lets a caller configure.

The SDK reads a whole answer into memory, success or error, and the server is whatever
ANTHROPIC_BASE_URL names. The SDK takes an httpx client (`http_client=`, of httpx2, its fork of
httpx); that client takes a transport (`transport=`); a transport is one public method,
`handle_async_request`. So the client is the SDK's own default type (`DefaultAsyncHttpxClient`)
built with `BoundedTransport`, which sends through the SDK's own aiohttp-backed client
(`DefaultAioHttpClient`, faster than httpx2's transport), itself built with the proxy that
`environment_proxy` resolves for the API's address, exactly as simrun's light path for
OpenAI-compatible servers resolves it (simulator/users/_wire.py). No private attribute is read
or set. Answers are asked for uncompressed, so that what is counted is what is kept: a
compressed answer says nothing of what it inflates to (a gzip bomb), and is refused.

Failures here are raised as httpx2's transport errors, which is the transport's contract: the
SDK turns them into its own documented `APIConnectionError`, which `simrun.simulator.users._retry` reads.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx2

from simrun.simulator.users._wire import KEEPALIVE_S, MAX_ANSWER_BYTES, environment_proxy

DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"
SdkClient = httpx2.AsyncClient      # the client the Anthropic SDK takes (`http_client=`)


class AnswerTooLarge(httpx2.ReadError):
    """Read no further: the SDK takes it as a connection error, and the call is retried."""


class _Capped(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self.inner, self.limit = inner, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.limit:
                raise AnswerTooLarge(f"the API's answer is more than {self.limit:,} bytes; simrun reads no more")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int = MAX_ANSWER_BYTES) -> None:
        self.inner, self.limit = inner, limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await self.inner.handle_async_request(request)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise AnswerTooLarge(f"the API's answer is {encoding}-compressed, though simrun asked for it "
                                 "uncompressed: its size cannot be known before it is inflated")
        # An async transport's answer streams asynchronously; the stub types it as either kind.
        stream = cast(httpx2.AsyncByteStream, response.stream)
        return httpx2.Response(response.status_code, headers=response.headers, request=request,
                               stream=_Capped(stream, self.limit), extensions=response.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Through(httpx2.AsyncBaseTransport):
    """A transport that sends through a client (`client.send(request, stream=True)`, public): how
    the SDK's own aiohttp-backed client, whose transport is built inside it, is reached."""

    def __init__(self, client: httpx2.AsyncClient) -> None:
        self.client = client

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self.client.send(request, stream=True)

    async def aclose(self) -> None:
        await self.client.aclose()


def bounded_client(sdk: Any, base_url: str | None, timeout_s: float) -> httpx2.AsyncClient:
    """The client for `sdk` (the anthropic module) at `base_url` (default: ANTHROPIC_BASE_URL, else
    the API's own): the SDK's default client type, whose one transport bounds every answer and
    sends it through the SDK's aiohttp-backed client (`DefaultAioHttpClient`, with the proxy the
    environment names for that address). Measured at 64 calls in flight against the fake API, on
    a loaded machine (issue 43): 0.78-0.90 ms of CPU a call this way, 1.64-2.29 through httpx2's
    own transport."""
    url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_URL
    # trust_env off: the proxy is the one resolved here, alike for every provider, and nothing
    # else of the environment (netrc) is read. Redirects are the outer client's to follow.
    inner = sdk.DefaultAioHttpClient(timeout=timeout_s, proxy=environment_proxy(url), trust_env=False,
                                     follow_redirects=False,
                                     limits=httpx2.Limits(max_connections=None, keepalive_expiry=KEEPALIVE_S))
    client: httpx2.AsyncClient = sdk.DefaultAsyncHttpxClient(transport=BoundedTransport(_Through(inner)),
                                                             timeout=timeout_s)
    return client
