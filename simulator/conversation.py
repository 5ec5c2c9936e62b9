"""The conversation loop: the simulated user and the runtime take turns until an end reason.

After every turn it reads the runtime's store, so that the goal is checked on state and the
scorer works from the store, not from what the replies claim. Failures are data: a runtime that
crashes, a user that breaks its brief, each ends the conversation with its reason and evidence.
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass
from decimal import Decimal

from scoring.goal import goal_status
from scoring.scorer import score
from scoring.simulated_user import user_turn_fault
from scoring.transcript import Scorecard, Transcript, TurnRecord, UserTurn
from simulator.adapters.base import RuntimeAdapter
from scoring.dataset import Goal, Persona, canonical_json
from scoring.errors import BudgetCut, ProviderFailure, RuntimeFault
from simulator.users.base import UserBackend


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
    model_calls: tuple[dict, ...] = ()   # every paid (or replayed) call the simulated user made


async def converse(cell: Cell, user: UserBackend, runtime: RuntimeAdapter) -> Conversation:
    started, clock = time.time(), time.perf_counter()
    persona, goal = cell.persona, cell.goal
    turns: list[TurnRecord] = []
    end, error, stop = "turn_cap", None, None
    initial = final = audit = None
    session = talker = None
    try:
        session = await runtime.start({"seed": cell.seed, "persona": persona.id, "goal": goal.id,
                                       "setup": as_json_setup(goal)})
        initial = final = await runtime.state(session)
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
                end = "simulator_error"
                error = {"kind": "simulator_crash", "message": f"{type(exc).__name__}: {exc}",
                         "traceback": "".join(traceback.format_exception(exc)[-3:])[-2000:]}
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
                final = await runtime.state(session)
            except RuntimeFault as fault_:
                turns.append(TurnRecord(index, user_turn, None, None, _ms(t0)))
                end, error = "runtime_error", {**fault_.evidence, "turn": index}
                break
            turns.append(TurnRecord(index, user_turn, result, final, _ms(t0)))
            reached, _ = goal_status(goal, _partial(cell, turns, initial), final)
            if reached:
                end = "goal_reached"
                break
        if end != "runtime_error":
            audit = await runtime.audit(session)
    except RuntimeFault as fault_:
        end, error = "runtime_error", {**fault_.evidence, "turn": len(turns) or None}
    finally:
        if session is not None:
            try:
                await runtime.close(session)
            except RuntimeFault:
                pass  # closing is courtesy; a runtime that fails it has already answered
    transcript = Transcript(
        persona=persona.id, goal=goal.id, seed=cell.seed, repetition=cell.repetition,
        turns=tuple(turns), end=end, initial_state=initial, final_state=final, audit=audit,
        stop=stop, error=error)
    calls = tuple(getattr(talker, "calls", ())) if talker is not None else ()
    return Conversation(cell, transcript, score(transcript, goal, persona), started,
                        time.perf_counter() - clock, sum((c["cost_usd"] for c in calls), Decimal(0)), calls)


def as_json_setup(goal: Goal) -> dict:
    return json.loads(canonical_json(goal.setup))


def _stop_reason(goal: Goal, turns: list[TurnRecord], stop: UserTurn, state) -> str:
    """A stop before trying anything, or a claim of success the store denies, breaks the brief."""
    if not turns:
        return "simulator_error"
    if stop.stop_reason == "done":
        reached, _ = goal_status(goal, Transcript("", "", 0, 0, tuple(turns), ""), state)
        if reached is False:
            return "simulator_error"
    return "user_stopped"


def _partial(cell: Cell, turns: list[TurnRecord], initial) -> Transcript:
    return Transcript(cell.persona.id, cell.goal.id, cell.seed, cell.repetition, tuple(turns),
                      "", initial_state=initial)


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)
