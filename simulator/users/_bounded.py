"""The Anthropic SDK's HTTP client, with every answer held to MAX_ANSWER_BYTES as it arrives.

The SDK reads a whole answer into memory, success or error, and the server is whatever
ANTHROPIC_BASE_URL names. simrun's own client (simulator/users/_wire.py, for OpenAI-compatible
servers) holds answers to the same bound; this wraps the SDK's transport so that the anthropic
backend does too. Answers are asked for uncompressed, so that what is counted is what is kept: a
compressed answer says nothing of what it inflates to (a gzip bomb), and is refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

import httpx2

from simrun.simulator.users._wire import MAX_ANSWER_BYTES


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


def bounded(client: httpx2.AsyncClient) -> httpx2.AsyncClient:
    """`client`, its transports wrapped: the one it uses, and those of the proxies the environment
    names (HTTPS_PROXY), which it uses instead for their hosts. httpx keeps them in `_transport`
    and `_mounts`; tests/security/test_model_answer_size.py fails if an SDK release moves them."""
    client._transport = BoundedTransport(client._transport)
    client._mounts = {pattern: None if transport is None else BoundedTransport(transport)
                      for pattern, transport in client._mounts.items()}
    return client
