"""The stdio transport: protocol 1 as one JSON object per line over a child process.

simrun writes `{"id": 7, "op": "turn", "session": "s-1", "body": {...}}` and reads back
`{"id": 7, "result": {...}}` or `{"id": 7, "error": {"status": 404, "message": "..."}}`; the
ops and bodies are those of the HTTP operations (docs/protocol.md). The child is started without
a shell. Requests are sent one at a time (a line protocol has one stream). A child that dies,
hangs past the timeout or writes a broken line fails the conversation in flight as
`runtime_error`, with its stderr tail; the next conversation starts a new child. A child just
started has `startup_timeout_s` for its first answer, as an HTTP runtime has for its health:
its start (an interpreter, its imports, a model loaded) is not a request's time.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from typing import Any, cast

from simrun._errors import RuntimeFault, RuntimeUnavailable
from simrun.simulator.adapters._base import (
    DEFAULT_MAX_RESULT_BYTES,
    EXCERPT_BYTES,
    Transport,
    by_size,
    check_health,
    excerpt,
    exit_text,
    read_answer,
    stderr_said,
)
from simrun.simulator.adapters._process import ManagedProcess, SessionId

ENVELOPE_BYTES = 1 << 12    # room for {"id": ..., "result": ...} around an answer of the largest size


class _NotSupported(Exception):
    pass


class _TooLong(Exception):
    def __init__(self, size: int, head: bytes) -> None:
        self.size, self.head = size, head


class StdioRuntime(Transport):
    def __init__(self, command: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                 timeout_s: float = 30.0, startup_timeout_s: float = 30.0,
                 max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> None:
        self.max_result_bytes = max_result_bytes
        self.process = ManagedProcess(command, env=env, cwd=cwd, stdin_pipe=True,
                                      line_limit=max_result_bytes + ENVELOPE_BYTES)
        self.description = f"stdio:{' '.join(command)}"
        self.timeout_s, self.startup_timeout_s = timeout_s, startup_timeout_s
        self._answered = False          # has the child running now answered once?
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self.restarts = 0

    def _fault(self, kind: str, message: str, session: str | None = None, **evidence: Any) -> RuntimeFault:
        # A conversation's evidence: the child's stderr less the lines it marked with another session's id.
        return RuntimeFault(kind, message, stderr=self.process.stderr_of(session, self.process.stderr_tail()),
                            **evidence)

    def _during(self, token: int) -> str:
        """'while answering', or how many conversations were in flight when the child died (those
        waiting their turn on its one stream among them)."""
        flying = self.process.in_flight_at_death(token)
        return ("while answering" if flying == 1 else
                f"while {flying} conversations were in flight; this was one of them")

    async def _call(self, op: str, session: str | None = None, body: Any = None, *,
                    fresh: bool = False, optional: bool = False, check: Callable[[Any], Any] | None = None) -> Any:
        # Under way from the moment it is asked for, waiting its turn on the one stream included.
        with self.process.request(session) as token:
            return await self._call_once(op, session, body, fresh=fresh, optional=optional, check=check,
                                         token=token)

    async def _call_once(self, op: str, session: str | None, body: Any, *, fresh: bool, optional: bool,
                         check: Callable[[Any], Any] | None, token: int) -> Any:
        async with self._lock:
            if fresh and (not self.process.alive or self.process.down_since is not None):
                # A new conversation gets a new child if the last one died, or was seen to die (its
                # stdout ended) while its supervisor still ends what it started.
                if self.process.proc is not None:
                    self.restarts += 1
                    await self.process.stop()
                await self.process.start()
                self._answered = False
            sent_at = time.perf_counter()
            # (A session this transport did not hand out, a caller's own id, belongs to no start.)
            generation = session.generation if isinstance(session, SessionId) else None
            if generation not in (None, self.process.generation):
                raise self._fault("exited", f"{op}: the runtime process that held this session exited during "
                                  "another conversation and was started again", collateral=True)
            if not self.process.alive:
                collateral = self.process.collateral(sent_at)
                self.process.mark_down()
                # Waiting its turn on the one stream when the child died, it was in flight with it.
                during = (f" {self._during(token)}, waiting for the request on the stream"
                          if self.process.was_in_flight(token) else "")
                raise self._fault("exited", f"{op}: the runtime process has exited "
                                  f"({exit_text(self.process.returncode)}){during}", session,
                                  collateral=collateral)
            rid = next(self._ids)
            mark = self.process.stderr_lines
            message = {"id": rid, "op": op, **({"session": session} if session else {}),
                       **({"body": body} if body is not None else {})}
            started = time.perf_counter()
            elapsed: Callable[[], float] = lambda: round((time.perf_counter() - started) * 1000, 3)  # noqa: E731
            proc = self.process.proc
            # (Alive, so started; and the stdio transport's child always has its pipes.)
            assert proc is not None and proc.stdin is not None and proc.stdout is not None
            limit, limit_name = ((self.timeout_s, "runtime.timeout_s") if self._answered
                                 else (self.startup_timeout_s, "runtime.startup_timeout_s: its first answer"))
            try:
                proc.stdin.write((json.dumps(message) + "\n").encode())
                await proc.stdin.drain()
                line = await asyncio.wait_for(self._read_line(proc.stdout), limit)
            except TimeoutError:
                self.process.mark_down()
                await self.process.stop(grace_s=1.0)   # a hung child is no use to the next conversation
                raise self._fault("timeout", f"{op}: no answer within {limit}s ({limit_name})",
                                  elapsed_ms=elapsed()) from None
            except (BrokenPipeError, ConnectionResetError):
                line = b""
            except _TooLong as cut:
                raise self._fault("too_large", f"{op}: the answer is {cut.size:,} bytes or more; simrun reads at "
                                  f"most {self.max_result_bytes:,} (runtime.max_result_bytes)",
                                  limit=self.max_result_bytes, bytes_read=cut.size, body=excerpt(cut.head),
                                  elapsed_ms=elapsed()) from None
            if not line:
                # Known dead before this request was sent: it failed because of another one's turn,
                # whether or not the exit had been seen when it was sent.
                collateral = self.process.collateral(sent_at)
                self.process.mark_down()
                await self.process.exited(0.5)   # let the exit status and last stderr lines arrive
                said = self.process.said_for(session, self.process.stderr_since(mark))
                if self.process.alive:
                    # It closed its stdout but runs on: it can answer nothing more, but it did not crash.
                    raise self._fault("closed", f"{op}: the runtime closed its standard output without answering, "
                                      f"and is still running{said}", elapsed_ms=elapsed())
                raise self._fault("exited", f"{op}: the runtime process exited "
                                  f"({exit_text(self.process.returncode)}) {self._during(token)}{said}", session,
                                  elapsed_ms=elapsed(), **({"collateral": True} if collateral else {}))
            self._answered = True
        try:
            reply = await read_answer(line, op)
        except RuntimeFault as fault:
            fault.evidence.update(stderr=self.process.stderr_tail(), elapsed_ms=elapsed())
            raise
        if not isinstance(reply, dict) or reply.get("id") != rid or ("result" in reply) == ("error" in reply):
            raise self._fault("malformed", f"{op}: expected {{\"id\": {rid}, \"result\" or \"error\"}}",
                              body=excerpt(line), elapsed_ms=elapsed())
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {"message": reply["error"]}
            if optional and error.get("status") == 404:
                raise _NotSupported
            raise self._fault("error", f"{op} failed: {excerpt(str(error.get('message')), 500)}"
                              f"{stderr_said(self.process.stderr_since(mark))}",
                              status=error.get("status"), body=excerpt(line), elapsed_ms=elapsed())
        return await by_size(len(line), check, reply["result"]) if check else reply["result"]

    async def _read_line(self, stdout: asyncio.StreamReader) -> bytes:
        """One line, up to the limit. A longer one is read to its end and dropped, so that the
        child stays in step and the other conversations it serves go on; only this answer is lost."""
        try:
            return await stdout.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:      # the child closed its stdout
            return end.partial
        except asyncio.LimitOverrunError as over:
            head = await stdout.readexactly(over.consumed)
            size = len(head)
            while True:
                try:
                    size += len(await stdout.readuntil(b"\n"))
                    raise _TooLong(size, head[:EXCERPT_BYTES])
                except asyncio.LimitOverrunError as more:
                    size += len(await stdout.readexactly(more.consumed))
                except asyncio.IncompleteReadError as end:
                    raise _TooLong(size + len(end.partial), head[:EXCERPT_BYTES]) from None

    async def health(self) -> dict[str, Any]:
        try:
            reply = await self._call("health", fresh=True)
        except RuntimeFault as fault:
            raise RuntimeUnavailable(f"{self.description}: {fault}\n{fault.evidence.get('stderr', '')}") from None
        return check_health(reply, self.description)

    async def start(self, request: dict[str, Any]) -> str:
        return self.process.session(self._started(await self._call("start", body=request, fresh=True)))

    async def turn(self, session: str, payload: dict[str, Any]) -> dict[str, Any]:
        return cast("dict[str, Any]", await self._call("turn", session, payload, check=self._turn))

    async def state(self, session: str) -> dict[str, Any] | None:
        try:
            return cast("dict[str, Any] | None", await self._call("state", session, optional=True, check=self._state))
        except _NotSupported:
            return None

    async def audit(self, session: str) -> list[dict[str, Any]] | None:
        try:
            return cast("list[dict[str, Any]] | None", await self._call("audit", session, optional=True,
                                                                        check=self._audit))
        except _NotSupported:
            return None

    async def close(self, session: str) -> None:
        await self._call("close", session)     # (its answer carries no audit this transport reads)

    async def aclose(self) -> None:
        await self.process.stop()
