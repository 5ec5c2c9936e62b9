"""How competent a user model is: `simrun check-user`'s measure, and the word every report of a
run with that model carries.

A user model that cannot reach goals on the reference runtime, where every goal is known to be
reachable, makes a runtime look bad for its own failings. `measure` sums up a check run (goal
reached, simulator errors by kind, turns per goal, cost); `Competence` is the stored result as
the reports show it beside the rates, with a warning below the threshold.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from simrun import _secrets as secrets
from simrun.scoring.store import WORST_CASE_CALLS, Store, one_row, user_check

DEFAULT_THRESHOLD = 0.8
EXAMPLES_PER_KIND = 2
# Conversations that say nothing about the user: the provider failed, or the money ran out.
NOT_THE_USER = ("provider_error", "budget_cut")


def measure(store: Store, run_id: str, backend: str, threshold: float = DEFAULT_THRESHOLD) -> dict[str, Any]:
    """A check run summed up as a `user_checks` row. Goal reached counts over the conversations
    the user could be judged on: a simulator error is the user's failure, not left out."""
    con = store.con
    conversations, judged, reached, provider_errors, turns_per_goal, spent = one_row(con.execute(f"""
        SELECT count(*), count(*) FILTER (WHERE end_reason NOT IN {NOT_THE_USER}),
               count(*) FILTER (WHERE goal_reached AND end_reason NOT IN {NOT_THE_USER}),
               count(*) FILTER (WHERE end_reason = 'provider_error'),
               avg(turns) FILTER (WHERE goal_reached), coalesce(sum(cost_usd), 0)
        FROM conversations WHERE run_id = ?""", [run_id]))
    # Each conversation's first simulator fault names its kind.
    faults = con.execute("""
        SELECT f.conversation_id, coalesce(f.evidence->>'kind', 'other'), f.detail, f.evidence->>'message'
        FROM findings f WHERE f.run_id = ? AND f.class = 'simulator_error'
        QUALIFY row_number() OVER (PARTITION BY f.conversation_id ORDER BY f.turn NULLS LAST) = 1
        ORDER BY 2, 1""", [run_id]).fetchall()
    kinds: dict[str, int] = {}
    examples: list[dict[str, Any]] = []
    for cid, kind, detail, message in faults:
        kinds[kind] = kinds.get(kind, 0) + 1
        if kinds[kind] <= EXAMPLES_PER_KIND:
            examples.append({"conversation": cid, "kind": kind, "detail": detail,
                             "message": secrets.cut(message or "", 300)})
    costs = [{"goal": goal, "calls": calls, "input_tokens": int(uncached or 0), "cached_input_tokens": int(cached),
              "cache_write_tokens": int(written), "output_tokens": int(out or 0), "unpriced_usd": str(unpriced or 0)}
             for goal, calls, uncached, cached, written, out, unpriced in con.execute(f"""
        SELECT any_value(c.goal), count(*),
               sum(input_tokens) FILTER (WHERE cache_status NOT IN {WORST_CASE_CALLS}),
               sum(cached_input_tokens), sum(cache_write_tokens),
               sum(output_tokens) FILTER (WHERE cache_status NOT IN {WORST_CASE_CALLS}),
               sum(m.cost_usd) FILTER (WHERE cache_status IN {WORST_CASE_CALLS})
        FROM model_calls m JOIN conversations c USING (run_id, conversation_id)
        WHERE m.run_id = ? GROUP BY m.conversation_id""", [run_id]).fetchall()]
    goals = {goal: {"played": played, "reached": n, "turns": None if turns is None else round(turns, 2)}
             for goal, played, n, turns in con.execute(f"""
        SELECT goal, count(*), count(*) FILTER (WHERE goal_reached), avg(turns) FILTER (WHERE goal_reached)
        FROM conversations WHERE run_id = ? AND end_reason NOT IN {NOT_THE_USER} GROUP BY goal ORDER BY goal""",
                                                    [run_id]).fetchall()}
    output = one_row(con.execute("SELECT user_output FROM runs WHERE run_id = ?", [run_id]))[0]
    return {
        "check_id": uuid.uuid4().hex[:12], "checked_at": one_row(store.con.execute("SELECT now()::TIMESTAMP"))[0],
        "user_backend": backend, "user_output": output, "conversations": conversations, "goal_reached": reached,
        "judged": judged, "threshold": threshold, "simulator_errors": kinds, "provider_errors": provider_errors,
        "turns_per_goal": turns_per_goal, "goals": goals, "cost_usd": Decimal(spent), "conversation_costs": costs,
        "examples": examples,
    }


@dataclass(frozen=True)
class Competence:
    """A stored check-user result, as reports show it."""

    backend: str
    checked_at: Any
    goal_reached: int
    judged: int
    threshold: float
    simulator_errors: dict[str, int]
    turns_per_goal: float | None
    cost_per_conversation: Decimal | None
    output: str | None

    @property
    def rate(self) -> float | None:
        return self.goal_reached / self.judged if self.judged else None

    @property
    def low(self) -> bool:
        return self.rate is None or self.rate < self.threshold

    def headline(self) -> str:
        rate = "–" if self.rate is None else f"{self.rate:.0%}"
        return (f"user {self.backend} reached {rate} of the reference runtime's goals ({self.goal_reached}/"
                f"{self.judged}, check-user of {str(self.checked_at)[:16]})")

    def warning(self) -> str | None:
        if not self.low:
            return None
        return (f"this user model reaches fewer than {self.threshold:.0%} of goals that are known to be reachable: "
                "the runtime's rates may mostly measure the user")


def competence(store: Store, backend: str) -> Competence | None:
    check = user_check(store, backend)
    if check is None:
        return None
    n = check["conversations"]
    return Competence(backend, check["checked_at"], check["goal_reached"], check["judged"], check["threshold"],
                      check["simulator_errors"], check["turns_per_goal"],
                      Decimal(check["cost_usd"]) / n if n else None, check["user_output"])
