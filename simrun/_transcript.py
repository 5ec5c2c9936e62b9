"""The evidence a conversation leaves, and the findings the scorer draws from it.

A `Transcript` holds what the user sent, every turn result exactly as the runtime returned it
(a plain dict: a field the runtime left out stays absent, which is how checks know to answer
UNVERIFIABLE rather than pass), the store after every turn, and the audit stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

EndReason = Literal["goal_reached", "user_stopped", "turn_cap", "runtime_error", "simulator_error",
                    "provider_error", "budget_cut"]
END_REASONS: tuple[EndReason, ...] = get_args(EndReason)
# Conversations that ended for reasons that are not the runtime's doing are kept out of its rates.
NOT_THE_RUNTIME = frozenset({"simulator_error", "provider_error", "budget_cut"})


@dataclass(frozen=True)
class UserTurn:
    kind: str                           # message | click | stop
    text: str | None = None
    offer: str | None = None            # the clicked offer id
    stop_reason: str | None = None      # done | gave_up
    meta: dict[str, Any] = field(default_factory=dict)   # how the simulator made it (never sent)
    # The goal step this turn serves (Goal.step_id), as the user declared it: the scorer reads
    # intent from it (a probe must be refused) rather than guessing from the words.
    step: str | None = None

    def payload(self) -> dict[str, Any]:
        if self.kind == "click":
            return {"action": {"offer": self.offer}}
        return {"message": self.text or ""}

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "offer": self.offer,
                "stop_reason": self.stop_reason, "meta": self.meta, "step": self.step}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UserTurn:
        return cls(data["kind"], data.get("text"), data.get("offer"), data.get("stop_reason"),
                   data.get("meta") or {}, data.get("step"))


@dataclass(frozen=True)
class TurnRecord:
    index: int                          # 1-based, the order of turn calls in the session
    user: UserTurn
    result: dict[str, Any] | None       # the turn result as received; None if the turn failed
    state: dict[str, Any] | None        # the store after the turn; None if the runtime has none
    latency_ms: float = 0.0


@dataclass(frozen=True)
class Transcript:
    persona: str
    goal: str
    seed: int
    repetition: int
    turns: tuple[TurnRecord, ...]
    end: str
    initial_state: dict[str, Any] | None = None
    final_state: dict[str, Any] | None = None
    audit: list[dict[str, Any]] | None = None   # None: the runtime has no audit stream
    stop: UserTurn | None = None                 # the user's stop, when it stopped
    error: dict[str, Any] | None = None          # evidence of a runtime/simulator/provider error
    session_id: str | None = None                # the runtime's own session id, for its logs

    def state_before(self, index: int) -> dict[str, Any] | None:
        return self.initial_state if index <= 1 else self.turns[index - 2].state

    def offer_label(self, offer: Any, index: int) -> tuple[str, int] | None:
        """(label, turn that showed it) of `offer` as last shown before turn `index`: a next step's
        label (else its operation), or a card action's label. None if no earlier turn showed it."""
        for turn in reversed(self.turns[:max(index - 1, 0)]):
            result = turn.result if isinstance(turn.result, dict) else {}
            card = found if isinstance(found := result.get("card"), dict) else {}
            for item in [*_dicts(result.get("next_steps")), *_dicts(card.get("actions"))]:
                if item.get("id") == offer:
                    label = item.get("label") or item.get("operation")
                    return (label if isinstance(label, str) else "", turn.index)
        return None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


@dataclass(frozen=True)
class Finding:
    cls: str
    turn: int | None
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckResult:
    """One class checked over one conversation."""

    cls: str
    findings: tuple[Finding, ...] = ()
    checked_turns: int = 0          # turns where the evidence was there
    unverifiable_turns: int = 0     # turns where it was missing
    reason: str | None = None       # why it was missing ("the runtime gives no offers as data")

    @property
    def status(self) -> str:
        if self.findings:
            return "fired"
        return "unverifiable" if self.unverifiable_turns else "clean"


@dataclass(frozen=True)
class Scorecard:
    goal_reached: bool | None       # None: UNVERIFIABLE (no state, or a check could not run)
    goal_detail: str
    turns: int
    end: str
    checks: dict[str, CheckResult]

    @property
    def findings(self) -> list[Finding]:
        return [f for check in self.checks.values() for f in check.findings]

    @property
    def counts_for_runtime(self) -> bool:
        return self.end not in NOT_THE_RUNTIME


# What a runtime_error's evidence holds, in the order it is shown (`simrun show`, the report):
# the runtime's own words first-hand. Short fields go on one line; long ones get a block each.
EVIDENCE_LINE = (("kind", "kind"), ("request", "request"), ("status", "status"))
EVIDENCE_BLOCKS = (("body", "its answer (excerpt)"), ("traceback", "traceback"), ("stderr", "its stderr (last lines)"))


def error_evidence(error: dict[str, Any] | None) -> tuple[str, list[tuple[str, str]]]:
    """A runtime_error's evidence as shown: one line of short facts, and (title, text) blocks."""
    if not error:
        return "", []
    facts = [f"{title} {error[key]}" for key, title in EVIDENCE_LINE if error.get(key) not in (None, "")]
    if isinstance(error.get("elapsed_ms"), (int, float)):
        facts.append(f"after {error['elapsed_ms']:,.0f} ms")
    line = " · ".join(facts)
    if error.get("read_after"):
        line += f" · read after it: {error['read_after']}"
    blocks = [(title, str(error[key]).rstrip()) for key, title in EVIDENCE_BLOCKS if str(error.get(key) or "").strip()]
    return line, blocks
