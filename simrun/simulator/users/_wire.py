"""The light path for OpenAI-compatible chat completions: one POST of a finished body, its answer as bytes.

Kept for a measured reason: at a fast model (a local vLLM or llama.cpp server answering in 50 ms)
the openai SDK's request path costs about ten times this module's CPU per call (1.7 ms against
0.12 ms on the reference machine; `benchmarks/call_cpu.py --client sdk` against the default), and
would take simrun past its 1.2 ms per call. The SDK does what simrun does not need here: it
validates options through pydantic, builds httpx requests and headers, draws an idempotency key,
and reads answers into models. simrun sends a body it has already serialised (for its worst case
and its cache key) and reads the answer as JSON.

This module speaks plain HTTP only, on simrun's one HTTP client (simulator/_http1.py), and
raises simrun's own errors, never another library's: `ModelStatusError` (an answer with a non-2xx
status, with its headers and body), `ModelTimeout`, `ModelUnreachable`, and `AnswerTooLarge` for
an answer past `MAX_ANSWER_BYTES` (a chat completion is kilobytes; a server that sends more is
broken or hostile; a compressed one is inflated no further than the bound). `simrun.simulator.users._retry`
classifies them alongside the SDKs' documented types. A proxy named by the environment
(HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY) is used as the Anthropic backend uses it
(`environment_proxy`). The API key goes in the Authorization header only. Another sender with the
one client's interface (`simrun.simulator._http1.Client.request`: absolute URL, headers, bound; an
`Answer` or the client's errors) can be given instead of the pool, as tests give an in-process fake
API: the same path, the same errors. No other HTTP library is used here.
"""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.request
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from simrun import _secrets as secrets
from simrun._errors import UserModelUnavailable
from simrun.simulator._http1 import Answer, HttpError, Pool, TooLarge

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


class ModelAPIError(Exception):
    """A model call that got no usable answer over plain HTTP (simrun's own, never a library's)."""


class ModelStatusError(ModelAPIError):
    """The server answered with a status other than 2xx: `status_code`, `headers` (lower-case
    names), `body` (the error object when the body is JSON that has one, else the body)."""

    def __init__(self, message: str, *, status_code: int, headers: Mapping[str, str], body: Any) -> None:
        super().__init__(message)
        self.status_code, self.headers, self.body = status_code, headers, body


class ModelTimeout(ModelAPIError):
    """No whole answer within the timeout."""


class ModelUnreachable(ModelAPIError):
    """The server (or the proxy) could not be reached, or broke the connection mid-answer."""


class AnswerTooLarge(ModelAPIError):
    """The answer went past MAX_ANSWER_BYTES (inflated, if it came compressed)."""


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (urllib.request.getproxies: HTTP_PROXY,
    HTTPS_PROXY, ALL_PROXY in either case), or None when NO_PROXY lists its host (a name and
    its subdomains, an address, a network, or `*`). Both model backends use it alike."""
    proxies = urllib.request.getproxies()
    target = urlsplit(url)
    proxy = proxies.get(target.scheme) or proxies.get("all")
    if not proxy or _bypassed(target.hostname or "", target.port, proxies.get("no", "")):
        return None
    # The proxy's own user:password@ is sent as Proxy-Authorization: an error that quotes it
    # must not carry it into the store.
    secrets.register_url(proxy if "://" in proxy else f"http://{proxy}")
    return proxy


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    host = host.lower().strip("[]")
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        name, _, only_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if only_port and (not only_port.isdigit() or int(only_port) != port):
            continue
        name = name.lstrip(".").strip("[]")
        try:
            if ipaddress.ip_address(host) in ipaddress.ip_network(name, strict=False):
                return True
            continue
        except ValueError:
            pass
        if host == name or host.endswith("." + name):
            return True
    return False


class Sender(Protocol):
    """What can be given instead of the pool: the one client's interface (`_http1.Client`)."""

    async def request(self, method: str, url: str, body: bytes | None = None, *, limit: int,
                      headers: Mapping[str, str] | None = None, timeout_s: float | None = None) -> Answer: ...

    async def close(self) -> None: ...


class LightClient:
    def __init__(self, base_url: str | None, key: str, timeout_s: float, *, connections: int = 0,
                 http_client: Sender | None = None) -> None:
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.timeout_s = timeout_s
        self.connections = connections     # 0: as many as there are calls in flight
        self.headers = {"Authorization": f"Bearer {key}", "Accept": "application/json",
                        **{header: os.environ[name] for name, header in SCOPE_HEADERS.items() if os.environ.get(name)}}
        self.http_client = http_client
        self.pool: Pool | None = None
        self.closed = False
        if http_client is None:
            self.proxy = environment_proxy(self.base_url)
            try:        # an address that is not http(s), or a header that cannot be sent, is said now
                self.pool = Pool(self.base_url, timeout_s=self.timeout_s, keepalive_s=KEEPALIVE_S,
                                 connections=self.connections, headers=self.headers, proxy=self.proxy)
            except ValueError as exc:
                raise UserModelUnavailable(f"the model's base URL (base_url or OPENAI_BASE_URL), a header "
                                           f"from OPENAI_ORG_ID / OPENAI_PROJECT_ID or the proxy the environment "
                                           f"names (HTTP_PROXY, HTTPS_PROXY): {exc}") from None

    async def post(self, path: str, body: str) -> bytes:
        """POST `body` (JSON text) to `path`; the answer's bytes, or simrun's error for it."""
        url = self.base_url + path
        try:
            if self.http_client is not None:
                answer = await self.http_client.request("POST", url, body.encode(), limit=MAX_ANSWER_BYTES,
                                                        headers={**self.headers, "Content-Type": "application/json"},
                                                        timeout_s=self.timeout_s)
            else:
                assert self.pool is not None     # (made in __init__ whenever no client is given)
                answer = await self.pool.request("POST", path, body.encode(), limit=MAX_ANSWER_BYTES)
        except TimeoutError:
            raise ModelTimeout(f"Request timed out: no whole answer from {url} in {self.timeout_s:g} s") from None
        except TooLarge as exc:
            raise AnswerTooLarge(f"the API's answer is more than {MAX_ANSWER_BYTES:,} bytes; simrun reads "
                                 f"no more ({exc})") from None
        except HttpError as exc:
            raise ModelUnreachable(f"Connection error: {type(exc).__name__}: {exc}") from None
        if not 200 <= answer.status < 300:
            raise _status_error(answer.status, answer.headers, answer.body)
        return answer.body

    def is_closed(self) -> bool:
        return self.closed

    async def close(self) -> None:
        self.closed = True
        if self.pool is not None:
            await self.pool.close()
        if self.http_client is not None:
            await self.http_client.close()


def _status_error(status: int, headers: dict[str, str], raw: bytes) -> ModelStatusError:
    """The error for a non-2xx answer, said as the SDKs say it: "Error code: 429 - <message>"."""
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
    elif isinstance(error, str) and error:
        message += f" - {error}"
    return ModelStatusError(message, status_code=status, headers=headers, body=error)
