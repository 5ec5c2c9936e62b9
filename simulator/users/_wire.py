"""A light client for OpenAI-compatible chat completions: one POST of a finished body, its answer as bytes.

At a fast model (a local vLLM or llama.cpp server answering in 50 ms) the openai SDK's own
request path was most of simrun's CPU per call (benchmarks/README.md, "A fast model"): it
validates options through pydantic, builds httpx requests and headers, draws an idempotency key,
and hands the request to aiohttp through an httpx shim and the answer back. simrun sends a body it
has already serialised (for its worst case and its cache key) and reads the answer as JSON, so
none of that is needed: this client posts the bytes on simrun's lean HTTP/1.1 client
(simulator/_http1.py), one pool sized to the calls in flight, and reads an answer of at most
`MAX_ANSWER_BYTES` (a chat completion is kilobytes; a server that sends more is broken or hostile).

Failures are raised as the openai SDK's own exceptions (`openai.RateLimitError`,
`openai.InternalServerError`, `openai.APITimeoutError`, ...), with the response, its headers and
its body, so that `simrun.simulator._retry` treats them exactly as the SDK's: Retry-After honoured, 5xx
retried unless the message blames the request, other 4xx never retried. The API key goes in the
Authorization header only. An `httpx.AsyncClient` can be given instead of the pool (tests answer
through `httpx.MockTransport`): the same path, the same errors.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from simrun.scoring import UserModelUnavailable
from simrun.simulator._http1 import HttpError, Pool

if TYPE_CHECKING:
    import openai

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# The variables the SDK reads for these headers, read the same way: a team that scopes its key
# to an organisation or project keeps doing so.
SCOPE_HEADERS = {"OPENAI_ORG_ID": "OpenAI-Organization", "OPENAI_PROJECT_ID": "OpenAI-Project"}
MAX_ANSWER_BYTES = 16 * 1024 * 1024
# An idle connection is dropped after 4 s: the servers people run for a fast model (vLLM,
# llama-cpp-python, most OpenAI-compatible proxies) sit on uvicorn, which closes a connection idle
# for 5 s, and a request sent just as it does is lost (and retried, at the cost of a call). At 64
# calls in flight the pool's oldest connections do sit idle that long in a run's ramps.
KEEPALIVE_S = 4.0


class LightClient:
    def __init__(self, base_url: str | None, key: str, timeout_s: float, *, connections: int = 0,
                 http_client: httpx.AsyncClient | None = None) -> None:
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.timeout_s = timeout_s
        self.connections = connections     # 0: as many as there are calls in flight
        self.headers = {"Authorization": f"Bearer {key}", "Accept": "application/json",
                        **{header: os.environ[name] for name, header in SCOPE_HEADERS.items() if os.environ.get(name)}}
        self.http_client = http_client
        self._pool: Pool | None = None
        self._closed = False
        if http_client is None:
            try:        # an address that is not http(s), or a header that cannot be sent, is said now
                self._pool = Pool(self.base_url, timeout_s=self.timeout_s, keepalive_s=KEEPALIVE_S,
                                  connections=self.connections, headers=self.headers)
            except ValueError as exc:
                raise UserModelUnavailable(f"the model's base URL (base_url or OPENAI_BASE_URL) or a header "
                                           f"from OPENAI_ORG_ID / OPENAI_PROJECT_ID: {exc}") from None

    async def post(self, path: str, body: str) -> bytes:
        """POST `body` (JSON text) to `path`; the answer's bytes, or the SDK's exception for it."""
        url = self.base_url + path
        headers: Mapping[str, str]
        if self.http_client is not None:
            try:
                response = await self.http_client.post(url, content=body.encode(), timeout=self.timeout_s,
                                                       headers={**self.headers, "Content-Type": "application/json"})
            except httpx.TimeoutException:
                raise _timeout(url) from None
            except httpx.TransportError as exc:
                raise _connection(url, exc) from None
            status, headers, raw = response.status_code, response.headers, response.content
        else:
            pool = self._pool
            assert pool is not None     # (made in __init__ whenever no client is given)
            try:
                answer = await pool.request("POST", path, body.encode(), limit=MAX_ANSWER_BYTES)
            except TimeoutError:
                raise _timeout(url) from None
            except HttpError as exc:
                raise _connection(url, exc) from None
            status, headers, raw = answer.status, answer.headers, answer.body
        if not 200 <= status < 300:
            raise _status_error(url, status, dict(headers), raw)
        return raw

    def is_closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        self._closed = True
        if self._pool is not None:
            await self._pool.close()
        if self.http_client is not None:
            await self.http_client.aclose()


def _request(url: str) -> httpx.Request:
    return httpx.Request("POST", url)


# The openai SDK types its exceptions' request and response as httpx2's (its fork of httpx, with
# the same interface); this client makes httpx's, which the exceptions hold as they are and
# `simrun.simulator._retry` reads alike. Hence the ignores below: a gap between the two stubs.

def _timeout(url: str) -> openai.APITimeoutError:
    import openai

    return openai.APITimeoutError(request=_request(url))  # type: ignore[arg-type]


def _connection(url: str, exc: BaseException) -> openai.APIConnectionError:
    import openai

    return openai.APIConnectionError(message=f"Connection error: {type(exc).__name__}: {exc}",
                                     request=_request(url))  # type: ignore[arg-type]


def _status_error(url: str, status: int, headers: dict[str, str], raw: bytes) -> openai.APIStatusError:
    """The exception the openai SDK raises for this status, with the same message and body."""
    import openai

    response = httpx.Response(status, headers=headers, content=raw, request=_request(url))
    message = f"Error code: {status}"
    body: Any = raw.decode("utf-8", "replace").strip()
    try:
        body = json.loads(body)
    except ValueError:
        pass
    error = body.get("error", body) if isinstance(body, dict) else body
    said = error.get("message") if isinstance(error, dict) else None
    if isinstance(said, str) and said:
        message += f" - {said}"
    cls = {400: openai.BadRequestError, 401: openai.AuthenticationError, 403: openai.PermissionDeniedError,
           404: openai.NotFoundError, 409: openai.ConflictError, 422: openai.UnprocessableEntityError,
           429: openai.RateLimitError}.get(status)
    if cls is None:
        cls = openai.InternalServerError if status >= 500 else openai.APIStatusError
    return cls(message, response=response, body=error)  # type: ignore[arg-type]
