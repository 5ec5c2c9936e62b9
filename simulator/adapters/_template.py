"""The template and chat transports: an assistant behind any JSON HTTP endpoint.

template: every turn, simrun POSTs `runtime.body` to `runtime.url`, with `{message}` (the user's
latest words), `{messages}` (the conversation so far as chat messages) and `{session}` filled in,
and reads the reply's text at the JSON pointer `runtime.reply` of the answer (if it points at an
object with a string `reply`, that object is the turn result, protocol fields and all).

chat: an OpenAI-compatible chat-completions endpoint as the assistant: the template
`{"model": runtime.model, "messages": "{messages}"}` sent to `{url}/chat/completions`, the
reply at `/choices/0/message/content`.

Receipts (phantom_receipt): a field `receipts` beside the reply's text (the assistant message's
`receipts`, for chat), the tool call ids of the writes the reply claims.

Every request carries the turn's `traceparent` and an `X-Simrun-Session` header. With
`runtime.command`, simrun starts the endpoint itself (`{port}` filled in, in the command, the
URL and a state hook's URL), with `OTEL_EXPORTER_OTLP_ENDPOINT` set to its trace receiver, waits until the port takes
connections, and stops it at the end. Every way a request fails is a `RuntimeFault` with its
evidence, as over the http transport.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import aiohttp

from simrun.scoring import RuntimeFault, RuntimeUnavailable, secrets
from simrun.simulator.adapters._base import KEEPALIVE_S, excerpt, exit_text, parse_json, stderr_said, too_large
from simrun.simulator.adapters._foreign import ForeignRuntime
from simrun.simulator.adapters._process import ManagedProcess, free_port

CHAT_REPLY = "/choices/0/message/content"


_PLACEHOLDER = re.compile(r"\{(message|messages|session)\}")


def fill(template: Any, message: str, messages: list[dict[str, str]], session: str) -> Any:
    """The body template with this turn's values: a string that is exactly `{messages}` becomes
    the list itself; elsewhere each placeholder is replaced as text (`{messages}` as its JSON),
    in one pass, so that what a user says is never read as a placeholder in its turn. The body is
    then written as JSON whole: quotes, line breaks and braces in a message stay its text."""
    if isinstance(template, dict):
        return {key: fill(value, message, messages, session) for key, value in template.items()}
    if isinstance(template, list):
        return [fill(value, message, messages, session) for value in template]
    if not isinstance(template, str):
        return template
    if template == "{messages}":
        return messages
    values = {"message": message, "session": session}
    return _PLACEHOLDER.sub(lambda found: values[found[1]] if found[1] in values
                            else json.dumps(messages, ensure_ascii=False), template)


def pointer(document: Any, path: str) -> Any:
    """RFC 6901: the value at `path` in `document`; KeyError when there is none."""
    value = document
    for token in path.split("/")[1:] if path else ():
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        elif isinstance(value, dict) and token in value:
            value = value[token]
        else:
            raise KeyError(token)
    return value


def _tool_calls(answer: Any) -> str:
    """The tools a chat-completions answer asks its caller to run, named; '' if none."""
    try:
        calls = pointer(answer, "/choices/0/message/tool_calls")
        return ", ".join(secrets.cut(str(pointer(call, "/function/name")), 100) for call in calls[:5]) if calls else ""
    except (KeyError, TypeError):
        return ""


def never_again_after_an_error(response) -> None:
    """A server that fails inside a request often closes the connection right after its error
    answer, without saying so: Starlette's error middleware answers 500, and uvicorn then closes
    the connection (no `Connection: close`). A request sent on it next, another conversation's, is
    dropped unanswered, and would read as that conversation's runtime fault: one bad reply would
    cost two conversations. So a connection that carried a 5xx answer is closed here, once its
    body is read. aiohttp hands a connection back to its pool as soon as the body is complete (a
    short one, before the response is even returned), so it is the pooled connection that is
    closed, through the response's own reference to it: the pool passes over a closed one. (A
    later aiohttp without that reference would make this a no-op; the test for it would fail.)"""
    if response.status >= 500:
        response.close()
        protocol = getattr(response, "_protocol", None)
        if protocol is not None:
            protocol.close()


class TemplateRuntime(ForeignRuntime):
    def __init__(self, *, url: str, body: Any, reply: str, headers: dict[str, str] | None = None,
                 command: list[str] | None = None, env: dict[str, str] | None = None, cwd: str | None = None,
                 timeout_s: float = 30.0, startup_timeout_s: float = 30.0, concurrency: int = 8,
                 kind: str = "template", **settings: Any) -> None:
        super().__init__(**settings)
        self._identity = f"{kind}:{url}" + (f" ({' '.join(command)})" if command else "")
        self.process: ManagedProcess | None = None
        self.port: int | None = None
        if command is not None:
            self.port = free_port()
            command = [part.replace("{port}", str(self.port)) for part in command]
            url = url.replace("{port}", str(self.port))
            if self.state_hook is not None:
                self.state_hook = self.state_hook.replace("{port}", str(self.port))
            self.process = ManagedProcess(command, env={**(env or {}), **self.trace_environment()}, cwd=cwd)
        self.url, self.body, self.reply_at = url, body, reply
        self.description = f"{kind}:{url}"
        self.headers = dict(headers or {})
        self.timeout_s, self.startup_timeout_s, self.concurrency = timeout_s, startup_timeout_s, concurrency
        self._http_session: aiohttp.ClientSession | None = None

    @property
    def identity(self) -> str:
        return self._identity

    def _http(self) -> aiohttp.ClientSession:
        if self._http_session is None or self._http_session.closed:
            self._http_session = aiohttp.ClientSession(
                headers=self.headers, timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                connector=aiohttp.TCPConnector(limit=max(self.concurrency, 1), limit_per_host=0,
                                               keepalive_timeout=KEEPALIVE_S))
        return self._http_session

    async def _ready(self) -> None:
        if self.process is None or self.process.alive:
            return
        await self.process.start()
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if not self.process.alive:
                raise RuntimeUnavailable(f"the assistant {self.process.command!r} exited with status "
                                         f"{self.process.returncode} before taking connections; its stderr "
                                         f"ends:\n{self.process.stderr_tail()}")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return
            except OSError:
                await asyncio.sleep(0.05)
        raise RuntimeUnavailable(f"the assistant {self.process.command!r} took no connection on port {self.port} "
                                 f"within {self.startup_timeout_s}s (raise runtime.startup_timeout_s?)")

    async def _reply(self, messages: list[dict[str, str]], session: dict[str, Any]) -> Any:
        body = fill(self.body, messages[-1]["content"], messages, session["id"])
        headers = {"X-Simrun-Session": session["id"]}
        if session["traceparent"]:
            headers["traceparent"] = session["traceparent"]
        answer = await self._request("turn", "POST", self.url, body, headers)
        try:
            found = pointer(answer, self.reply_at)
        except KeyError:
            raise RuntimeFault("missing_reply", f"the answer has nothing at {self.reply_at} (runtime.reply)",
                               body=excerpt(str(answer))) from None
        if isinstance(found, dict) and isinstance(found.get("reply"), str):
            return found
        if not isinstance(found, str):
            calls = _tool_calls(answer)
            why = (f"the answer asks its caller to run tools ({calls}) instead of replying: an assistant under "
                   "test runs its own tools" if calls else f"the answer's {self.reply_at} is not text (runtime.reply)")
            raise RuntimeFault("missing_reply", why, body=excerpt(str(answer)))
        return self._with_receipts(answer, found)

    def _with_receipts(self, answer: Any, reply: str) -> Any:
        """The reply, with the receipts its message carries: a field `receipts` beside the reply's
        text (for chat, `choices[0].message.receipts`), the tool call ids of the writes the reply
        claims. The protocol's own check of the turn result holds them to a list of strings."""
        parent = self.reply_at.rsplit("/", 1)[0]
        try:
            holder = pointer(answer, parent)
        except KeyError:
            return reply
        if isinstance(holder, dict) and "receipts" in holder:
            return {"reply": reply, "receipts": holder["receipts"]}
        return reply

    async def _get_json(self, url: str, what: str) -> Any:
        return await self._request(what, "GET", url, None, {})

    async def _request(self, what: str, method: str, url: str, body: Any, headers: dict[str, str]) -> Any:
        started = time.perf_counter()
        mark = self.process.stderr_lines if self.process is not None else 0

        def evidence(**more: Any) -> dict[str, Any]:
            more |= {"request": f"{method} {url}", "elapsed_ms": round((time.perf_counter() - started) * 1000, 3)}
            if self.process is not None:
                more["stderr"] = self.process.stderr_tail()
            return more

        try:
            # No redirects: following one would send the configured headers (often a key) elsewhere.
            async with self._http().request(method, url, json=body, headers=headers,
                                            allow_redirects=False) as response:
                status, raw = response.status, await self._read(what, response)
                never_again_after_an_error(response)
        except TimeoutError:
            raise RuntimeFault("timeout", f"{what}: no answer within {self.timeout_s}s", **evidence()) from None
        except aiohttp.ClientError as exc:
            raise RuntimeFault(*await self._lost(what, exc, mark), **evidence()) from None
        except RuntimeFault as fault:
            fault.evidence.update(evidence())
            raise
        if not 200 <= status < 300:
            raise RuntimeFault("http_status", f"{what} answered HTTP {status}",
                               **evidence(status=status, body=excerpt(raw)))
        return parse_json(raw, what, **evidence(status=status))

    async def _lost(self, what: str, exc: aiohttp.ClientError, mark: int) -> tuple[str, str]:
        """(kind, message) of a request with no answer, saying what happened to a server simrun
        started: one that exited differs from one that closed the connection and stayed up (the
        request failed inside it), which is not a runtime that no longer answers."""
        said = f"{type(exc).__name__}: {exc}"
        if self.process is None or isinstance(exc, aiohttp.ClientConnectorError):
            return "connection", f"{what}: {said}"
        its = stderr_said(self.process.stderr_since(mark))
        if await self.process.exited(0.5):
            return "exited", f"{what}: the server exited ({exit_text(self.process.returncode)}) while answering{its}"
        return "disconnected", (f"{what}: the server closed the connection without answering, and is still "
                                f"running: the request failed inside it{its} ({said})")

    async def _read(self, what: str, response: aiohttp.ClientResponse) -> bytes:
        """The (decompressed) body, never more than max_result_bytes of it."""
        limit = self.max_result_bytes
        try:
            raw = await response.content.readexactly(limit + 1)
        except asyncio.IncompleteReadError as short:
            return short.partial
        raise too_large(what, len(raw), limit, raw[:limit])

    async def _close_transport(self) -> None:
        session, self._http_session = self._http_session, None
        if session is not None:
            await session.close()
        if self.process is not None:
            await self.process.stop()


class ChatRuntime(TemplateRuntime):
    """An OpenAI-compatible chat-completions endpoint as the assistant under test."""

    def __init__(self, *, url: str, model: str, **settings: Any) -> None:
        url = url.rstrip("/")
        if not url.endswith("/chat/completions"):
            url += "/chat/completions"
        super().__init__(url=url, body={"model": model, "messages": "{messages}"}, reply=CHAT_REPLY, kind="chat",
                         **settings)
