"""What the transports with no protocol code share (callable, chat, template).

Such an assistant knows nothing of protocol 1: it takes the conversation so far as chat
messages and answers with text. simrun keeps the messages of each session and plays the rest
of the protocol itself: `health` and `start` are answered here, every turn gets its own W3C
trace context, and `state` is built from what the assistant does give: the tool calls its
OpenTelemetry spans show (as events, simulator/adapters/_spans.py) and, with a state hook, its
records. What it does not give stays absent, so the checks that need it are UNVERIFIABLE, each
with its reason. The runner, the store and the scorer see one more runtime.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from simrun._errors import RuntimeFault, RuntimeUnavailable
from simrun._protocol import SNAPSHOT
from simrun.scoring.dataset import EVENTS_UNKNOWN
from simrun.simulator.adapters._base import DEFAULT_MAX_RESULT_BYTES, Transport, as_json, json_excerpt
from simrun.simulator.adapters._python import guarded, load_attribute
from simrun.simulator.adapters._spans import Tool, TraceBook


@dataclass
class _Session:
    request: dict[str, Any]                 # the start request: seed, persona, goal, setup
    messages: list[dict[str, str]] = field(default_factory=list)
    turn: int = 0
    settled: int = 0                        # the last turn whose spans were waited for


def message_of(payload: dict[str, Any]) -> str:
    """A user turn as chat text. Such a runtime shows no offers, so a click (a model-played
    user's) is sent as words naming the offer."""
    if "message" in payload:
        return str(payload["message"])
    return f"[pressed {payload.get('action', {}).get('offer')}]"


class ForeignRuntime(Transport):
    """The protocol played for an assistant that speaks chat: subclasses say how a turn is sent
    (`_reply`) and how the assistant is made ready (`_ready`)."""

    description = "foreign"
    builds_state = True      # its state is simrun's, made from spans and a hook: never a protocol violation

    def __init__(self, *, tools: dict[str, Tool] | None = None, traces: bool = False, trace_wait_s: float = 6.0,
                 trace_port: int | None = None, state: str | None = None,
                 max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES, folder: str | None = None) -> None:
        self.folder = folder      # the project's: its modules (the target, a state hook) import from it
        self.book = TraceBook(tools) if traces else None
        self.receiver = None
        if self.book is not None:
            # Imported here: the receiver's server and decoder (aiohttp, protobuf) take a third of a
            # second to import (`python -X importtime`), which only a traced assistant should pay.
            from simrun.simulator.adapters._otlp import TraceReceiver

            self.receiver = TraceReceiver(self.book, port=trace_port or 0)
        self.trace_wait_s = trace_wait_s
        self.state_hook = state
        self._before_import()
        self._state_fn = (load_attribute(state, "module:function", folder=folder)
                          if state and "://" not in state else None)
        self.max_result_bytes = max_result_bytes
        self.sessions: dict[str, _Session] = {}

    # --- what subclasses provide -------------------------------------------------------------

    def _before_import(self) -> None:
        """Called before a module of the assistant (its state hook) is imported."""

    async def _ready(self) -> None:
        """Make the assistant ready to answer (start its server, say)."""

    async def _reply(self, messages: list[dict[str, str]], session: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def _get_json(self, url: str, what: str) -> Any:
        raise RuntimeUnavailable(f"{self.description}: a state hook URL needs an HTTP transport; give "
                                 "runtime.state as module:function")

    async def _close_transport(self) -> None:
        """Release the transport's own resources."""

    async def _settle(self, book: TraceBook, session: str, turn: int) -> None:
        """Wait until the turn's spans are in the book (a transport that sees them sooner says so)."""
        await book.settle(session, turn, self.trace_wait_s)

    # --- the protocol, played ----------------------------------------------------------------

    def trace_environment(self) -> dict[str, str]:
        return self.receiver.environment() if self.receiver is not None else {}

    async def health(self) -> dict[str, Any]:
        if self.receiver is not None:
            await self.receiver.start()
        await self._ready()
        return {"protocol": 1, "runtime": self.description, "version": None}

    async def start(self, request: dict[str, Any]) -> str:
        if self.receiver is not None:
            await self.receiver.start()
        session = f"s-{os.urandom(8).hex()}"
        self.sessions[session] = _Session(dict(request))
        return session

    def _session(self, session: str) -> _Session:
        if session not in self.sessions:
            raise RuntimeFault("malformed", f"no session {session!r}: it was never started, or was closed")
        return self.sessions[session]

    def context(self, session: str) -> dict[str, Any]:
        """The session as the assistant is given it: its id, the turn, the trace context, and
        the start request's seed, persona, goal and setup."""
        s = self._session(session)
        traceparent = self.book.begin(session, s.turn) if self.book is not None else None
        return {"id": session, "turn": s.turn, "traceparent": traceparent, **s.request}

    async def turn(self, session: str, payload: dict[str, Any]) -> dict[str, Any]:
        s = self._session(session)
        s.turn += 1
        s.messages.append({"role": "user", "content": message_of(payload)})
        result = self._result(await self._reply([dict(m) for m in s.messages], self.context(session)))
        if isinstance(result, dict) and isinstance(result.get("reply"), str):
            s.messages.append({"role": "assistant", "content": result["reply"]})
        return result

    def _result(self, raw: Any) -> dict[str, Any]:
        """The reply's text, or a turn result with whatever protocol fields the assistant has."""
        if isinstance(raw, str):
            raw = {"reply": raw}
        elif not isinstance(raw, dict):
            raise RuntimeFault("malformed", f"the assistant answered a {type(raw).__name__}, not the reply's text "
                               "or a turn-result object", body=json_excerpt(raw))
        return self._turn(as_json(raw, "turn result", self.max_result_bytes))

    def _turn(self, raw: Any) -> dict[str, Any]:
        # A field named `state` in an assistant's answer is its own (a graph's state, say), not
        # protocol 1's store snapshot: its store is simrun's to build, so that field is not checked.
        if isinstance(raw, dict) and SNAPSHOT in raw:
            super()._turn({k: v for k, v in raw.items() if k != SNAPSHOT})
            return raw
        return super()._turn(raw)

    async def state(self, session: str) -> dict[str, Any] | None:
        """The session's tool events (from its spans) and records (from the state hook); None
        when the assistant gives neither."""
        if self.book is None and self.state_hook is None:
            return None
        s = self._session(session)
        state: dict[str, Any] = {}
        if self.book is not None:
            if s.turn > s.settled:
                s.settled = s.turn
                await self._settle(self.book, session, s.turn)
            # Until a span of this conversation has come, and one of a convention simrun reads tool
            # calls from, its events are unknown, not none: an exporter that sends elsewhere, or
            # spans written in another convention, must make the checks over events (and goal
            # reached) UNVERIFIABLE, not pass them. Why, naming the conventions seen, goes with the
            # state, where the goal check reads it.
            if self.book.known(session):
                state["events"] = self.book.events(session)
            else:
                state[EVENTS_UNKNOWN] = self.book.unknown_reason(session)
        if self.state_hook is not None:
            state["records"] = await self._records(session, self.state_hook)
        return state

    async def _records(self, session: str, hook: str) -> dict[str, Any]:
        if self._state_fn is not None:
            records = await guarded("the state hook", self._state_fn, session)
        else:
            records = await self._get_json(hook.replace("{session}", session), "the state hook")
        records = as_json(records, "state hook's records", self.max_result_bytes)
        if not isinstance(records, dict) or not all(isinstance(r, dict) for r in records.values()):
            raise RuntimeFault("malformed", "the state hook must return the session's records as an object of "
                               "record id -> object", body=json_excerpt(records))
        return records

    async def audit(self, session: str) -> list[dict[str, Any]] | None:
        return None

    async def close(self, session: str) -> None:
        self.sessions.pop(session, None)
        if self.book is not None:
            self.book.forget(session)

    async def aclose(self) -> None:
        await self._close_transport()
        if self.receiver is not None:
            await self.receiver.aclose()
