"""The conversation loop: the simulated user and the runtime take turns until an end reason.

After every turn it reads the runtime's store (sent with the turn's result by a runtime that can,
else asked for), so that the goal is checked on state and the scorer works from the store, not
from what the replies claim. Failures are data: a runtime that crashes, a user that breaks its
brief, each ends the conversation with its reason and evidence.
"""

from __future__ import annotations

import asyncio
import json
import time
import traceback
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from simrun import _secrets as secrets
from simrun._errors import BudgetCut, ProviderFailure, RuntimeFault
from simrun._protocol import split_snapshot
from simrun._storable import JsonObject
from simrun._transcript import Scorecard, Transcript, TurnRecord, UserTurn
from simrun.scoring.checks import goal_status, score, user_turn_fault
from simrun.scoring.dataset import Goal, NotAnswered, Persona, canonical_json, known_answer, per_goal
from simrun.scoring.store import Finished
from simrun.simulator.adapters import RuntimeAdapter
from simrun.simulator.users import UserBackend


@dataclass(frozen=True)
class Cell:
    """One conversation of the matrix: a persona, a goal, a repetition, and its own seed."""

    persona: Persona
    goal: Goal
    repetition: int
    seed: int

    @property
    def id(self) -> str:
        return f"{self.persona.id}/{self.goal.id}/{self.repetition}"


@dataclass(frozen=True)
class Conversation:
    cell: Cell
    transcript: Transcript
    scorecard: Scorecard
    started_at: float
    duration_s: float
    cost_usd: Decimal = Decimal(0)
    model_calls: tuple[dict[str, Any], ...] = ()   # every paid (or replayed) call the simulated user made

    def finished(self) -> Finished:
        """As the store writes it (its calls are the ledger's to store, and may have been)."""
        return Finished(self.cell.id, self.transcript, self.scorecard, self.started_at, self.duration_s,
                        self.cost_usd)


async def converse(cell: Cell, user: UserBackend, runtime: RuntimeAdapter) -> Conversation:
    started, clock = time.time(), time.perf_counter()
    persona, goal = cell.persona, cell.goal
    turns: list[TurnRecord] = []
    end, stop = "turn_cap", None
    error: dict[str, Any] | None = None    # the evidence of what ended it, when it failed
    initial = final = audit = None
    session = talker = None
    try:
        session = await runtime.start({"seed": cell.seed, "persona": persona.id, "goal": goal.id,
                                       "setup": as_json_setup(goal)})
        # The store as the session starts: sent with the start reply by a runtime that can.
        sent = runtime.first_state(session)
        initial = final = sent if sent is not None else await runtime.state(session)
        talker = user.session(persona, goal, cell.seed, cell.repetition)
        for index in range(1, goal.max_turns + 1):
            try:
                user_turn = await talker.next_turn(tuple(turns))
            except BudgetCut as cut:
                end, error = "budget_cut", {"kind": "budget_cut", "message": str(cut), "turn": index}
                break
            except ProviderFailure as failure:
                end, error = "provider_error", {**failure.evidence, "turn": index}
                break
            except Exception as exc:   # the simulator failed, not the runtime: data, not a crash
                end, error = "simulator_error", {**_evidence_of(exc), "kind": "simulator_crash"}
                break
            if user_turn.kind == "stop":
                stop = user_turn
                end = _stop_reason(goal, turns, stop, final)
                break
            fault = user_turn_fault(user_turn, goal, persona, tuple(turns))
            if fault:
                turns.append(TurnRecord(index, user_turn, None, None))
                end, error = "simulator_error", {"kind": fault.kind, "message": fault.message, "turn": index}
                break
            t0 = time.perf_counter()
            try:
                result = await runtime.turn(session, user_turn.payload())
            except Exception as exc:   # a fault, or anything else the answer set off: this conversation only
                turns.append(TurnRecord(index, user_turn, None, None, _ms(t0)))
                end, error = "runtime_error", {**_evidence_of(exc), "turn": index}
                break
            latency = _ms(t0)
            # (An assistant whose store simrun builds from its traces has no snapshot to send.)
            result, snapshot = (result, None) if runtime.builds_state else split_snapshot(result)
            try:
                # The store after the turn: sent with it by a runtime that can (one request, not two).
                final = snapshot if snapshot is not None else await runtime.state(session)
            except Exception as exc:
                # The reply came: it is evidence, kept, though the store could not be read.
                turns.append(TurnRecord(index, user_turn, result, None, latency))
                end, error = "runtime_error", {**_evidence_of(exc), "turn": index}
                break
            turns.append(TurnRecord(index, user_turn, result, final, latency))
            reached, _ = await _reached(goal, _partial(cell, turns, initial), final)
            if reached:
                end = "goal_reached"
                break
        if end == "runtime_error" and error is not None:     # (a runtime_error always has its evidence)
            final, audit = await _evidence_after_error(runtime, session, final, error)
        else:
            audit = await runtime.audit(session)
    except Exception as exc:
        end, error = "runtime_error", {**_evidence_of(exc), "turn": len(turns) or None}
        if session is not None:
            final, audit = await _evidence_after_error(runtime, session, final, error)
    finally:
        if session is not None:
            try:
                await runtime.close(session)
            except Exception:
                pass  # closing is courtesy; a runtime that fails it has already answered
    transcript = Transcript(
        persona=persona.id, goal=goal.id, seed=cell.seed, repetition=cell.repetition,
        turns=tuple(turns), end=end, initial_state=initial, final_state=final, audit=audit,
        stop=stop, error=error, session_id=None if session is None else str(session))
    calls = tuple(talker.calls) if talker is not None else ()
    # Scoring is linear in the transcript. A large one (a runtime's 100,000-offer reply) is scored
    # off the event loop, so that it does not hold up every other conversation in flight; an
    # ordinary one is scored here, where the hop to a thread would cost more than the scoring.
    if _weight(transcript) > OFF_LOOP_ITEMS:
        scorecard = await asyncio.to_thread(score, transcript, goal, persona)
    else:
        scorecard = score(transcript, goal, persona)
    return Conversation(cell, transcript, scorecard, started,
                        time.perf_counter() - clock, sum((c["cost_usd"] for c in calls), Decimal(0)), calls)


async def _evidence_after_error(runtime: RuntimeAdapter, session: str, final: dict[str, Any] | None,
                               error: dict[str, Any]
                               ) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    """(store, audit) read after a runtime_error, while the runtime still answers; the error's
    evidence says what could be read. A runtime that hung, or whose server died, is not asked:
    its audit stays None, and audit_gap UNVERIFIABLE, as for any runtime gone."""
    if error.get("kind") == "timeout" and not error.get("collateral"):
        # It may answer later, but not within the time a request has: it is not asked again.
        error["read_after"] = "nothing: it did not answer in time, so it was not asked again"
        return final, None
    if error.get("kind") in GONE or error.get("collateral"):
        error["read_after"] = "nothing: the runtime no longer answers"
        return final, None
    read, audit = [], None
    try:
        state = await runtime.state(session)
        if state is not None:
            final = state
            read.append("the store")
        audit = await runtime.audit(session)
        if audit is not None:
            read.append("the audit stream")
    except Exception as exc:
        read.append(f"then it failed again: {_evidence_of(exc)['message']}")
    error["read_after"] = ", ".join(read) or "nothing: the runtime keeps neither store nor audit"
    return final, audit


# Failures after which the runtime cannot answer: it is not asked anything more. A server that
# closed one connection but stayed up ("disconnected") is asked for its store and audit.
GONE = ("timeout", "connection", "exited", "closed")


def as_json_setup(goal: Goal) -> JsonObject:
    """The goal's setup as the runtime is sent it: a fresh object each time (a runtime may keep
    or change it), from JSON text made once per goal."""
    setup: JsonObject = json.loads(per_goal(goal, "setup JSON", lambda g: canonical_json(g.setup)))
    return setup


OFF_LOOP_ITEMS = 5_000


def _weight(transcript: Transcript) -> int:
    """What the checks walk: the offers, mentions, receipts, records and events of every turn."""
    items = 0
    for turn in transcript.turns:
        for part in (turn.result or {}).get("next_steps"), (turn.result or {}).get("mentions"), \
                (turn.result or {}).get("receipts"):
            items += len(part) if isinstance(part, (list, dict)) else 0
        items += _store_items(turn.state)
    return items


async def _reached(goal: Goal, transcript: Transcript, state: dict[str, Any] | None) -> tuple[bool | None, str]:
    """Whether the goal is reached now, and why (`goal_status`). A goal whose check would run a
    query is checked off the event loop: the query may run up to its time limit (scoring/dataset/
    goal_sql.py) while other conversations go on. Most checks run none (a record check fails
    first, or the query's answer over this store is known), and are made here: the hop to a
    thread and back costs far more than such a check (about 0.1 ms of this thread's CPU). Not
    over a large store, whose rows are encoded and hashed to look its answer up: that is work
    in proportion to the store (a runtime's may hold a hundred thousand events), as scoring a
    large transcript is, and it goes off the loop by the same rule (OFF_LOOP_ITEMS)."""
    if goal.success.sql:
        if _store_items(state) <= OFF_LOOP_ITEMS:
            try:
                return goal_status(goal, transcript, state, known_answer)
            except NotAnswered:
                pass
        return await asyncio.to_thread(goal_status, goal, transcript, state)
    return goal_status(goal, transcript, state)


def _store_items(state: dict[str, Any] | None) -> int:
    """The records and events of a store, as `_weight` counts them."""
    if not isinstance(state, dict):
        return 0
    return sum(len(part) for part in (state.get("records"), state.get("events")) if isinstance(part, (list, dict)))


def _stop_reason(goal: Goal, turns: list[TurnRecord], stop: UserTurn, state: dict[str, Any] | None) -> str:
    """A stop before trying anything, or a claim of success the store denies, breaks the brief."""
    if not turns:
        return "simulator_error"
    if stop.stop_reason == "done":
        reached, _ = goal_status(goal, Transcript("", "", 0, 0, tuple(turns), ""), state)
        if reached is False:
            return "simulator_error"
    return "user_stopped"


def _partial(cell: Cell, turns: list[TurnRecord], initial: dict[str, Any] | None) -> Transcript:
    """The conversation so far, for the goal check. Only a goal's answered questions read it
    (`goal_status`): for any other goal the one empty transcript stands in, not one built anew
    on every turn."""
    if not cell.goal.success.answered:
        return _NO_TURNS
    return Transcript(cell.persona.id, cell.goal.id, cell.seed, cell.repetition, tuple(turns),
                      "", initial_state=initial)


_NO_TURNS = Transcript("", "", 0, 0, (), "")


def _evidence_of(exc: BaseException) -> dict[str, Any]:
    """A runtime fault's own evidence; for any other exception (MemoryError, a RecursionError on a
    reply, a bug a reply set off in simrun), its type, message and traceback, so it can be fixed."""
    if isinstance(exc, RuntimeFault):
        return exc.evidence
    return {"kind": "unexpected", "message": f"{type(exc).__name__}: {secrets.cut(str(exc), 500)}",
            "traceback": secrets.tail("".join(traceback.format_exception(exc)[-3:]), 2000)}


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)
