"""What a store's model calls tell: a run's spend, its recorded answers (what `--replay` plays
back), the history `simrun plan` estimates from, and `simrun check-user` results.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from simrun.scoring.store._database import Store
from simrun.scoring.store._duck import insert_rows, one_row
from simrun.scoring.store._rows import from_json, to_json

# Calls charged at their worst case, their usage unknown: a server that reports none, an answer
# that could not be read, a call its worker died holding (a Ray worker; it may have been billed).
WORST_CASE_CALLS = ("no_usage", "unreadable", "lost")
USER_CHECK_JSON = ("simulator_errors", "goals", "conversation_costs", "examples")


def replay_answers(store: Store, run_id: str) -> dict[str, tuple[Any, bool]]:
    """A run's recorded model answers by request key, each with whether it was cut off at
    max_tokens (so that a replay reads it as the live run did), for `--replay`."""
    return {key: (from_json(answer, f"{store.path}: run {run_id}: a model call's answer"), bool(cut))
            for key, answer, cut in store.con.execute(
        "SELECT request_hash, answer, coalesce(response->'choices'->0->>'finish_reason' = 'length' "
        "OR response->>'stop_reason' = 'max_tokens', false) FROM model_calls "
        "WHERE run_id = ? AND answer IS NOT NULL", [run_id]).fetchall()}


def save_user_check(store: Store, check: dict[str, Any]) -> None:
    """A `simrun check-user` result; the newest per backend is shown beside its runs' rates."""
    columns = ("check_id", "checked_at", "user_backend", "user_output", "conversations", "goal_reached",
               "judged", "threshold", "simulator_errors", "provider_errors", "turns_per_goal", "goals",
               "cost_usd", "conversation_costs", "examples")
    values = [to_json(check[c]) if c in USER_CHECK_JSON else check[c] for c in columns]
    insert_rows(store.con, f"user_checks ({', '.join(columns)})", [values])


def user_check(store: Store, backend: str) -> dict[str, Any] | None:
    """The newest `check-user` result for a backend:model, if there is one."""
    cur = store.con.execute("SELECT * FROM user_checks WHERE user_backend = ? ORDER BY checked_at DESC LIMIT 1",
                            [backend])
    row = cur.fetchone()
    if row is None:
        return None
    check = dict(zip([d[0] for d in cur.description], row))
    for name in USER_CHECK_JSON:
        check[name] = from_json(check[name], f"{store.path}: user_checks.{name} of {backend}")
    return check


def conversation_costs(store: Store, backend: str, exclude_run: str | None = None) -> list[dict[str, Any]]:
    """Every stored conversation of `backend` with its goal, calls and tokens: the history
    `simrun plan` estimates a model user's conversations from. Calls whose usage is unknown
    are summed apart (`unpriced_usd`), at what they were charged."""
    cur = store.con.execute(f"""
        SELECT c.goal, count(m.turn) AS calls,
               coalesce(sum(m.input_tokens) FILTER (WHERE m.cache_status NOT IN {WORST_CASE_CALLS}), 0)
                   AS input_tokens,
               coalesce(sum(m.cached_input_tokens), 0) AS cached_input_tokens,
               coalesce(sum(m.cache_write_tokens), 0) AS cache_write_tokens,
               coalesce(sum(m.output_tokens) FILTER (WHERE m.cache_status NOT IN {WORST_CASE_CALLS}), 0)
                   AS output_tokens,
               coalesce(sum(m.cost_usd) FILTER (WHERE m.cache_status IN {WORST_CASE_CALLS}), 0)
                   AS unpriced_usd
        FROM conversations c JOIN runs r USING (run_id)
             JOIN model_calls m ON m.run_id = c.run_id AND m.conversation_id = c.conversation_id
        WHERE r.user_backend = ? AND m.cache_status <> 'replay' AND r.run_id IS DISTINCT FROM ?
        GROUP BY c.run_id, c.conversation_id, c.goal""", [backend, exclude_run])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def spend(store: Store, run_id: str) -> tuple[Decimal, int]:
    """(the exact sum of a run's call costs, the number of calls)."""
    total, calls = one_row(store.con.execute("SELECT coalesce(sum(cost_usd), 0), count(*) FROM model_calls "
                                             "WHERE run_id = ?", [run_id]))
    return Decimal(total), calls
