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

Requests go through simrun's one HTTP client (simulator/_http1.py, `Client`), as the http
transport's do: keep-alive sized to the concurrency, no redirects followed, every answer read to
`runtime.max_result_bytes` and no further (inflated, if it comes compressed), and a connection
that carried a 5xx answer never used again.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from simrun import _secrets as secrets
from simrun._errors import RuntimeFault, RuntimeUnavailable
from simrun.simulator._http1 import Client, ConnectFailed, HttpError, TooLarge
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
        self._client: Client | None = None
        self._http()          # a header that cannot be sent, or a URL that is not http(s), is said now

    @property
    def identity(self) -> str:
        return self._identity

    def _http(self) -> Client:
        """simrun's one client, keep-alive connections sized to the concurrency, for each server asked."""
        if self._client is None or self._client.closed:
            try:
                client = Client(timeout_s=self.timeout_s, keepalive_s=KEEPALIVE_S,
                                connections=max(self.concurrency, 1), headers=self.headers)
                client.check(self.url)
            except ValueError as exc:
                raise RuntimeUnavailable(f"runtime.url or runtime.headers: {exc}") from None
            self._client = client
        return self._client

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

        limit = self.max_result_bytes
        try:
            # No redirects (the client follows none): following one would send the configured
            # headers (often a key) elsewhere.
            answer = await self._http().request(method, url, None if body is None else json.dumps(body).encode(),
                                                limit=limit, headers=headers)
            status, raw = answer.status, answer.body
        except TimeoutError:
            raise RuntimeFault("timeout", f"{what}: no answer within {self.timeout_s}s", **evidence()) from None
        except TooLarge as cut:
            fault = too_large(what, cut.seen, limit, cut.head)
            fault.evidence.update(evidence())
            raise fault from None
        except ValueError as exc:       # an address no request can go to (a state hook's, filled in)
            raise RuntimeFault("connection", f"{what}: {exc}", **evidence()) from None
        except HttpError as exc:
            raise RuntimeFault(*await self._lost(what, exc, mark), **evidence()) from None
        if not 200 <= status < 300:
            raise RuntimeFault("http_status", f"{what} answered HTTP {status}",
                               **evidence(status=status, body=excerpt(raw)))
        return parse_json(raw, what, **evidence(status=status))

    async def _lost(self, what: str, exc: HttpError, mark: int) -> tuple[str, str]:
        """(kind, message) of a request with no answer, saying what happened to a server simrun
        started: one that exited differs from one that closed the connection and stayed up (the
        request failed inside it), which is not a runtime that no longer answers."""
        said = f"{type(exc).__name__}: {exc}"
        if self.process is None or isinstance(exc, ConnectFailed):
            return "connection", f"{what}: {said}"
        its = stderr_said(self.process.stderr_since(mark))
        if await self.process.exited(0.5):
            return "exited", f"{what}: the server exited ({exit_text(self.process.returncode)}) while answering{its}"
        return "disconnected", (f"{what}: the server closed the connection without answering, and is still "
                                f"running: the request failed inside it{its} ({said})")

    async def _close_transport(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()
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
