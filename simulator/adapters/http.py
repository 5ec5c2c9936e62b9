"""The http transport: protocol 1 over HTTP, with httpx (async, keep-alive sized to concurrency).

Either simrun starts the runtime itself from a command (with `{port}` replaced by a free port),
waits for `/v1/health`, and stops it at the end, or it talks to a URL that is already running.
Every way a request can fail is a `RuntimeFault` with its evidence (status, body excerpt,
timing, the managed server's stderr tail), which the loop records as `runtime_error`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from simulator.adapters.base import Checked, check_health
from simulator.adapters.process import ManagedProcess, free_port
from simulator.errors import RuntimeFault, RuntimeUnavailable

BODY_EXCERPT = 2000
POOL = 32           # connections per client of the pool


class _NotSupported(Exception):
    pass


class HttpRuntime(Checked):
    def __init__(self, *, url: str | None = None, command: list[str] | None = None,
                 env: dict[str, str] | None = None, cwd: str | None = None, timeout_s: float = 30.0,
                 startup_timeout_s: float = 30.0, headers: dict[str, str] | None = None,
                 concurrency: int = 8) -> None:
        if (url is None) == (command is None):
            raise RuntimeUnavailable("the http transport needs exactly one of runtime.url "
                                     "(a running server) or runtime.command (simrun starts it)")
        self.process: ManagedProcess | None = None
        if command is not None:
            port = free_port()
            command = [part.replace("{port}", str(port)) for part in command]
            self.process = ManagedProcess(command, env=env, cwd=cwd)
            url = f"http://127.0.0.1:{port}"
        self.url = url.rstrip("/")
        self.description = f"http:{self.url}" + (f" ({command[0]} started by simrun)" if command else "")
        self.timeout_s = timeout_s
        self.startup_timeout_s = startup_timeout_s
        self.headers = dict(headers or {})
        self.concurrency = concurrency
        self.clients: list[httpx.AsyncClient] = []
        self._next = 0
        self._server_up = False
        self.restarts = 0

    def _client(self, session: str | None = None) -> httpx.AsyncClient:
        """A client of the pool; a session keeps to one, so its connection stays warm.

        Several small pools rather than one large one: httpcore scans its whole pool for every
        request, which at hundreds of connections costs more CPU than the requests themselves.
        """
        if not self.clients:
            size = min(self.concurrency, POOL)
            self.clients = [httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=self.timeout_s,
                                              limits=httpx.Limits(max_connections=size,
                                                                  max_keepalive_connections=size))
                            for _ in range(max(1, -(-self.concurrency // POOL)))]
        if session is None:
            self._next = (self._next + 1) % len(self.clients)
            return self.clients[self._next]
        return self.clients[hash(session) % len(self.clients)]

    def _evidence(self, **more: Any) -> dict[str, Any]:
        if self.process is not None:
            more["stderr"] = self.process.stderr_tail()
        return more

    async def _request(self, op: str, method: str, path: str, body: Any = None,
                       optional: bool = False, session: str | None = None) -> Any:
        started = time.perf_counter()
        elapsed = lambda: round((time.perf_counter() - started) * 1000, 3)  # noqa: E731
        try:
            response = await self._client(session).request(method, path, json=body)
        except httpx.TimeoutException:
            raise RuntimeFault("timeout", f"{op}: no answer within {self.timeout_s}s",
                               **self._evidence(request=f"{method} {path}", elapsed_ms=elapsed())) from None
        except httpx.TransportError as exc:
            raise RuntimeFault("connection", f"{op}: {type(exc).__name__}: {exc}",
                               **self._evidence(request=f"{method} {path}", elapsed_ms=elapsed())) from None
        if optional and response.status_code == 404:
            raise _NotSupported
        if not response.is_success:
            raise RuntimeFault("http_status", f"{op} answered HTTP {response.status_code}",
                               **self._evidence(request=f"{method} {path}", status=response.status_code,
                                                body=response.text[:BODY_EXCERPT], elapsed_ms=elapsed()))
        try:
            return response.json()
        except ValueError:
            raise RuntimeFault("malformed", f"{op} answered with a body that is not JSON",
                               **self._evidence(request=f"{method} {path}", status=response.status_code,
                                                body=response.text[:BODY_EXCERPT], elapsed_ms=elapsed())) from None

    async def health(self) -> dict[str, Any]:
        if self.process is not None and not self._server_up:
            await self._start_server()
        try:
            reply = await self._request("health", "GET", "/v1/health")
        except RuntimeFault as fault:
            raise RuntimeUnavailable(f"{self.url}/v1/health: {fault}") from None
        return check_health(reply, self.description)

    async def _start_server(self) -> None:
        await self.process.start()
        self._server_up = True
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if not self.process.alive:
                raise RuntimeUnavailable(
                    f"the runtime {self.process.command!r} exited with status {self.process.returncode} "
                    f"before answering /v1/health; its stderr ends:\n{self.process.stderr_tail()}")
            try:
                response = await self._client().get("/v1/health", timeout=1.0)
                if response.is_success:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
        await self.aclose()
        raise RuntimeUnavailable(f"the runtime {self.process.command!r} did not answer {self.url}/v1/health "
                                 f"within {self.startup_timeout_s}s (raise runtime.startup_timeout_s?)")

    async def start(self, request: dict[str, Any]) -> str:
        try:
            reply = await self._request("start", "POST", "/v1/sessions", request)
        except RuntimeFault as fault:
            if fault.kind != "connection" or self.process is None or not await self.process.exited(1.0):
                raise
            # The server simrun started died in an earlier conversation: this one gets a new one.
            self.restarts += 1
            await self.process.stop()
            await self._start_server()
            reply = await self._request("start", "POST", "/v1/sessions", request)
        return self._started(reply)

    async def turn(self, session: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self._turn(await self._request("turn", "POST", f"/v1/sessions/{session}/turns", payload,
                                              session=session))

    async def state(self, session: str) -> dict[str, Any] | None:
        try:
            return self._state(await self._request("state", "GET", f"/v1/sessions/{session}/state",
                                                   optional=True, session=session))
        except _NotSupported:
            return None

    async def audit(self, session: str) -> list[dict[str, Any]] | None:
        try:
            return self._audit(await self._request("audit", "GET", f"/v1/sessions/{session}/audit",
                                                   optional=True, session=session))
        except _NotSupported:
            return None

    async def close(self, session: str) -> None:
        await self._request("close", "DELETE", f"/v1/sessions/{session}", session=session)

    async def aclose(self) -> None:
        clients, self.clients = self.clients, []
        for client in clients:
            await client.aclose()
        if self.process is not None:
            await self.process.stop()
            self._server_up = False
