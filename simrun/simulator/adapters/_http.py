"""The http transport: protocol 1 over HTTP, on simrun's lean client (keep-alive sized to concurrency).

Either simrun starts the runtime itself from a command (with `{port}` replaced by a free port),
waits for `/v1/health`, and stops it at the end, or it talks to a URL that is already running.
Every way a request can fail is a `RuntimeFault` with its evidence (status, body excerpt,
timing, the managed server's stderr tail), which the loop records as `runtime_error`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, cast

from simrun._errors import RuntimeFault, RuntimeUnavailable
from simrun.simulator._http1 import ConnectFailed, HttpError, Pool, TooLarge
from simrun.simulator.adapters._base import (
    DEFAULT_MAX_RESULT_BYTES,
    KEEPALIVE_S,
    Transport,
    check_health,
    excerpt,
    exit_text,
    read_answer,
    too_large,
)
from simrun.simulator.adapters._process import ManagedProcess, SessionId, free_port

PORTLESS_WAIT_S = 3.0           # how long a command without {port} may take to exit with its own error


class _NotSupported(Exception):
    pass


class HttpRuntime(Transport):
    def __init__(self, *, url: str | None = None, command: list[str] | None = None,
                 env: dict[str, str] | None = None, cwd: str | None = None, timeout_s: float = 30.0,
                 startup_timeout_s: float = 30.0, headers: dict[str, str] | None = None,
                 concurrency: int = 8, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> None:
        if (url is None) == (command is None):
            raise RuntimeUnavailable("the http transport needs exactly one of runtime.url "
                                     "(a running server) or runtime.command (simrun starts it)")
        self.process: ManagedProcess | None = None
        self._portless = False
        if command is not None:
            # A server simrun starts gets a new port each time: a run is known by its command.
            self._identity = f"http:{' '.join(command)}"
            # Without {port} the runtime cannot know the port simrun chose, so it can never answer there.
            self._portless = not any("{port}" in part for part in command)
            port = free_port()
            command = [part.replace("{port}", str(port)) for part in command]
            self.process = ManagedProcess(command, env=env, cwd=cwd)
            url = f"http://127.0.0.1:{port}"
        elif url is not None:
            self._identity = f"http:{url.rstrip('/')}"
        assert url is not None    # (exactly one of the two, checked above)
        self.url = url.rstrip("/")
        self.description = f"http:{self.url}" + (f" ({command[0]} started by simrun)" if command else "")
        self.timeout_s = timeout_s
        self.startup_timeout_s = startup_timeout_s
        self.headers = dict(headers or {})
        self.concurrency = concurrency
        self.max_result_bytes = max_result_bytes
        self._pool: Pool | None = None
        # Learned from a close answer that carried the audit ("The audit with the close",
        # docs/protocol.md): from then on a conversation's audit is read by closing its session.
        self._audit_with_close = False
        self._closed_by_audit: set[str] = set()
        self._http()          # a header that cannot be sent, or a URL that is not http(s), is said now
        self._server_up = False
        self.restarts = 0
        self._restarting: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    @property
    def identity(self) -> str:
        return self._identity

    def _http(self) -> Pool:
        """One pool of keep-alive connections, sized to the concurrency: simrun's one HTTP client
        (simulator/_http1.py) rather than aiohttp or httpx, whose general request path costs 5x
        and 50x its CPU per request (benchmarks/http_clients.py), more than the runtime's own work
        at a fast model."""
        if self._pool is None or self._pool.closed:
            try:
                self._pool = Pool(self.url, timeout_s=self.timeout_s, keepalive_s=KEEPALIVE_S,
                                  connections=max(self.concurrency, 1), headers=self.headers)
            except ValueError as exc:
                raise RuntimeUnavailable(f"runtime.url or runtime.headers: {exc}") from None
        return self._pool

    def _evidence(self, mark: int | None = None, session: str | None = None, **more: Any) -> dict[str, Any]:
        """The server's stderr: what it wrote during this request (since `mark`), else its tail;
        of a session's request, less the lines the server marked with another session's id."""
        if self.process is not None:
            since = self.process.stderr_since(mark) if mark is not None else ""
            more["stderr"] = self.process.stderr_of(session, since or self.process.stderr_tail())
        return more

    async def _request(self, op: str, method: str, path: str, body: Any = None,
                       optional: bool = False, session: str | None = None,
                       check: Callable[[Any], Any] | None = None) -> Any:
        if self.process is None:
            return await self._send(op, method, path, body, optional, session, check, None)
        # Under way until its answer or its fault is made: a fault of a server that died counts
        # the conversations in flight with it, this one included.
        with self.process.request(session) as token:
            return await self._send(op, method, path, body, optional, session, check, token)

    async def _send(self, op: str, method: str, path: str, body: Any, optional: bool, session: str | None,
                    check: Callable[[Any], Any] | None, token: int | None) -> Any:
        started = time.perf_counter()
        elapsed: Callable[[], float] = lambda: round((time.perf_counter() - started) * 1000, 3)  # noqa: E731
        # (A session this transport did not hand out, a caller's own id, belongs to no start.)
        generation = session.generation if isinstance(session, SessionId) else None
        mark = self.process.stderr_lines if self.process is not None else 0
        if self.process is not None and generation not in (None, self.process.generation):
            raise RuntimeFault("connection", f"{op}: the server that held this session died during another "
                               "conversation and was started again", collateral=True,
                               **self._evidence(request=f"{method} {path}", elapsed_ms=elapsed()))
        try:
            # No redirects: a runtime that answers 3xx is misconfigured, and following one would
            # send the configured headers (often a key) and the body to wherever it points.
            answer = await self._http().request(method, path, None if body is None else json.dumps(body).encode(),
                                                limit=self.max_result_bytes)
            status, raw = answer.status, answer.body
        except TimeoutError:
            raise RuntimeFault("timeout", f"{op}: no answer within {self.timeout_s}s",
                               **self._evidence(mark, request=f"{method} {path}", elapsed_ms=elapsed())) from None
        except TooLarge as cut:
            fault = too_large(op, cut.seen, self.max_result_bytes, cut.head)
            fault.evidence.update(self._evidence(mark, request=f"{method} {path}", elapsed_ms=elapsed()))
            raise fault from None
        except HttpError as exc:
            died = await self._died(started, generation)
            kind, message = self._lost(op, exc, died, mark, session, token)
            raise RuntimeFault(kind, message, **died,
                               **self._evidence(mark, session=session, request=f"{method} {path}",
                                                elapsed_ms=elapsed())) from None
        if optional and status == 404:
            raise _NotSupported
        if not 200 <= status < 300:
            raise RuntimeFault("http_status", f"{op} answered HTTP {status}{self._said(mark)}",
                               **self._evidence(mark, request=f"{method} {path}", status=status,
                                                body=excerpt(raw), elapsed_ms=elapsed()))
        return await read_answer(raw, op, check, **self._evidence(mark, request=f"{method} {path}", status=status,
                                                                  elapsed_ms=elapsed()))

    def _said(self, mark: int, session: str | None = None) -> str:
        """The last line the server simrun started wrote to stderr during this request, if any:
        of a session's request, its own (the lines the server marked with its id) first."""
        if self.process is None:
            return ""
        return self.process.said_for(session, self.process.stderr_since(mark))

    def _lost(self, op: str, exc: HttpError, died: dict[str, Any], mark: int, session: str | None = None,
              token: int | None = None) -> tuple[str, str]:
        """(kind, message) of a request that got no answer, saying what happened: a server that
        cannot be reached, one that exited, and one that closed the connection but stayed up
        (the request failed inside it: it may still answer for the store and audit) differ."""
        what = f"{type(exc).__name__}: {exc}"
        # (`died` says something only of a server simrun started.)
        exited = exit_text(self.process.returncode if self.process is not None else None)
        if died.get("collateral"):
            return "connection", f"{op}: the server had exited ({exited}) during " \
                                 f"another conversation{self._said(mark, session)}"
        if died and isinstance(exc, ConnectFailed):
            # Refused: the request never reached the server, which had ended before it.
            return "connection", f"{op}: the server had exited ({exited}) before " \
                                 f"this request{self._said(mark, session)}"
        if isinstance(exc, ConnectFailed):
            return "connection", f"{op}: cannot connect to {self.url} ({what}): the runtime no longer answers"
        if died:
            flying = self.process.in_flight_at_death(token) if self.process is not None and token else 1
            # Each conversation in flight reads how many shared its end: the one whose request
            # took the server down cannot be told from the others by what the server sent.
            during = ("answering" if flying == 1 else
                      f"{flying} conversations were in flight; this was one of them")
            return "connection", f"{op}: the server exited ({exited}) while " \
                                 f"{during}{self._said(mark, session)}"
        if self.process is not None:
            return "disconnected", (f"{op}: the server closed the connection without answering, and is still "
                                    f"running: the request failed inside it{self._said(mark)} ({what})")
        return "disconnected", (f"{op}: the server closed the connection without answering ({what}); its own "
                                "log says why")

    async def _died(self, sent_at: float, generation: int | None) -> dict[str, Any]:
        """For a request the server simrun started failed to answer: whether it has died, and
        whether this request is collateral (sent after the death, or to a session of an earlier
        server). A request in flight when it died may be the one that took it down: not marked."""
        if self.process is None or not await self.process.exited(0.5):
            return {}
        collateral = self.process.collateral(sent_at, generation)
        self.process.mark_down()
        return {"server_died": True, "collateral": collateral}

    async def health(self) -> dict[str, Any]:
        if self.process is not None and not self._server_up:
            await self._start_server(self.process)
        try:
            reply = await self._request("health", "GET", "/v1/health")
        except RuntimeFault as fault:
            raise RuntimeUnavailable(f"{self.url}/v1/health: {fault}") from None
        return check_health(reply, self.description)

    async def _start_server(self, process: ManagedProcess) -> None:
        await process.start()
        self._server_up = True
        # A command without {port} is given a moment to exit with its own error, not the full wait.
        wait = min(self.startup_timeout_s, PORTLESS_WAIT_S) if self._portless else self.startup_timeout_s
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not process.alive:
                why = (f"the runtime {process.command!r} exited with status {process.returncode} "
                       f"before answering /v1/health{self._port_hint()}; its stderr ends:\n"
                       f"{process.stderr_tail()}")
                await self.aclose()
                raise RuntimeUnavailable(why)
            try:
                answer = await self._http().request("GET", "/v1/health", limit=self.max_result_bytes, timeout_s=1.0)
                if 200 <= answer.status < 300:
                    return
            except (HttpError, TimeoutError):
                pass
            await asyncio.sleep(0.05)
        await self.aclose()
        if self._portless:
            raise RuntimeUnavailable(f"the command has no {{port}} and nothing answered on the port simrun chose "
                                     f"({self.url}){self._port_hint()}")
        raise RuntimeUnavailable(f"the runtime {process.command!r} did not answer {self.url}/v1/health "
                                 f"within {self.startup_timeout_s}s (raise runtime.startup_timeout_s?)")

    def _port_hint(self) -> str:
        if not self._portless:
            return ""
        return (": runtime.command must say where the runtime listens, with {port} where its port goes "
                "(e.g. --port {port}); or start the runtime yourself and give runtime.url")

    async def start(self, request: dict[str, Any]) -> str:
        process = self.process
        if process is None:
            return self._started(await self._request("start", "POST", "/v1/sessions", request))
        async with self._restart_lock():     # a server being started again is waited for
            generation = process.generation
        try:
            reply = await self._request("start", "POST", "/v1/sessions", request)
        except RuntimeFault as fault:
            if fault.kind != "connection":
                raise
            # The server simrun started died in an earlier conversation: this one gets a new one.
            # Conversations in flight see the death together: one starts the server again, and
            # the others, finding it started, use it, rather than each stopping the one before.
            async with self._restart_lock():
                if process.generation == generation:
                    if not await process.exited(1.0):
                        raise
                    self.restarts += 1
                    await process.stop()
                    await self._start_server(process)
                generation = process.generation
            reply = await self._request("start", "POST", "/v1/sessions", request)
        # The session belongs to the server that was asked, even if it died while answering.
        sid = self._started(reply)
        if process.generation == generation:
            process.session(sid)          # (known to the server's stderr: its lines are this session's)
        return SessionId(sid, generation)

    def _restart_lock(self) -> asyncio.Lock:
        """The lock of this event loop (a runtime may serve several loops, one after another)."""
        loop = asyncio.get_running_loop()
        if self._restarting is None or self._restarting[0] is not loop:
            self._restarting = (loop, asyncio.Lock())
        return self._restarting[1]

    async def turn(self, session: str, payload: dict[str, Any]) -> dict[str, Any]:
        return cast("dict[str, Any]", await self._request("turn", "POST", f"/v1/sessions/{session}/turns", payload,
                                                          session=session, check=self._turn))

    async def state(self, session: str) -> dict[str, Any] | None:
        try:
            return cast("dict[str, Any] | None", await self._request(
                "state", "GET", f"/v1/sessions/{session}/state", optional=True, session=session, check=self._state))
        except _NotSupported:
            return None

    async def audit(self, session: str) -> list[dict[str, Any]] | None:
        if self._audit_with_close:
            # The audit is the last thing the loop reads of a session: closing it answers it.
            audit = await self._close(session)
            self._closed_by_audit.add(session)     # (a close that failed is tried again by close)
            return audit
        try:
            return cast("list[dict[str, Any]] | None", await self._request(
                "audit", "GET", f"/v1/sessions/{session}/audit", optional=True, session=session, check=self._audit))
        except _NotSupported:
            return None

    async def close(self, session: str) -> list[dict[str, Any]] | None:
        """Close the session; the audit its answer carried, if any (check-runtime compares it)."""
        if session in self._closed_by_audit:
            self._closed_by_audit.discard(session)
            return None
        return await self._close(session)

    async def _close(self, session: str) -> list[dict[str, Any]] | None:
        reply = await self._request("close", "DELETE", f"/v1/sessions/{session}", session=session)
        if not isinstance(reply, dict) or reply.get("audit") is None:
            # A runtime that stops sending it is asked again, as one that never sent it is.
            self._audit_with_close = False
            return None
        audit: list[dict[str, Any]] | None = self._audit(reply["audit"])
        self._audit_with_close = True
        return audit

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
        if self.process is not None:
            await self.process.stop()
            self._server_up = False

