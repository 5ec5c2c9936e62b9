"""Rates with intervals, computed in SQL over the store.

A class rate is `conversations with at least one occurrence / scored conversations`, with a
95% Wilson interval. A conversation whose evidence for a class was missing is counted
as UNVERIFIABLE for it and left out of that class's denominator: never a pass.

Progress classes and goal-reached are the runtime's rates, so conversations that ended for a
reason that is not the runtime's (simulator_error, provider_error, budget_cut) are left out.
Guarantee violations are counted in every conversation: a phantom receipt is one whatever the
simulated user did. simulator_error is reported over all conversations, on its own line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from statistics import NormalDist
from typing import TYPE_CHECKING, TypedDict, TypeVar

from simrun._transcript import NOT_THE_RUNTIME
from simrun.scoring.checks import ALL_CLASSES, GUARANTEES, kind_of
from simrun.scoring.store._database import Store
from simrun.scoring.store._duck import NamedRow, one_row

if TYPE_CHECKING:
    import numpy as np

# Counts of one rate, or arrays of them: `wilson_bounds` takes either.
Count = TypeVar("Count", float, "np.ndarray")

EXCLUDED_ENDS = ", ".join(f"'{r}'" for r in sorted(NOT_THE_RUNTIME))


def z_score(confidence: float) -> float:
    """The two-sided normal quantile of `confidence`: 1.96 at 95%."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """The Wilson score interval of k in n, as scipy's `binomtest(k, n).proportion_ci(method=
    "wilson")` gives it (Newcombe 1998, no continuity correction), to the last few bits
    (tests/scoring/store/test_rates.py compares the two). simrun's one Wilson interval in Python:
    kept by hand because importing scipy.stats costs every run 1.8 s on the reference machine,
    against none for this; `wilson_bounds` is its algebra, for a caller with arrays of counts."""
    if n == 0:
        return None, None
    low, high = wilson_bounds(k, n, z_score(confidence))
    return (0.0 if k == 0 else low), (1.0 if k == n else high)


def wilson_bounds(k: Count, n: Count, z: float) -> tuple[Count, Count]:
    """The interval's two bounds for k in n (n > 0), by arithmetic and powers only, so that k and n
    may be numbers or numpy arrays alike."""
    p = k / n
    denom = 2 * (n + z * z)
    centre = (2 * n * p + z * z) / denom
    delta = z / denom * (4 * n * p * (1 - p) + z * z) ** 0.5
    return centre - delta, centre + delta


def wilson_sql(k: str, n: str, confidence: float = 0.95) -> tuple[str, str]:
    """`wilson` as two DuckDB expressions over the columns `k` and `n` (NULL when n is 0), so
    that the intervals of thousands of rates come out of the query that counts them."""
    z = z_score(confidence)
    p, z2 = f"({k})::DOUBLE / ({n})", z * z
    centre = f"({p} + {z2!r} / (2 * ({n})))"
    half = f"({z!r} * sqrt({p} * (1 - {p}) / ({n}) + {z2!r} / (4 * ({n}) * ({n}))))"
    scale = f"(1 + {z2!r} / ({n}))"
    return (f"CASE WHEN ({n}) > 0 THEN greatest(0.0, ({centre} - {half}) / {scale}) END",
            f"CASE WHEN ({n}) > 0 THEN least(1.0, ({centre} + {half}) / {scale}) END")


# The undecided share from which a headline rate is shown with its bounds (issue 38, rule 2): below
# it the bounds sit inside the interval's width on the run sizes simrun recommends, and the rate
# over the decided conversations reads as it is; from it on, that rate could be far from the truth.
BOUNDS_SHOWN_FROM = 0.1


def bounds(k: int, n: int, undecided: int) -> tuple[float, float] | None:
    """The lowest and the highest rate the undecided conversations allow: each counted as not
    having the class, then each as having it, over every conversation (k of the n decided had
    it). None with no conversation at all. A rate over the decided ones alone is the truth only if
    the undecided are like them, and nothing says they are: which conversations a check cannot
    decide may depend on their outcome (a write read from a trace without its arguments)."""
    total = n + undecided
    return (k / total, (k + undecided) / total) if total else None


def bounds_text(k: int, n: int, undecided: int) -> str:
    """"between 2.9% and 22.9% (14 UNVERIFIABLE counted either way)", or "" when nothing is undecided."""
    low_high = bounds(k, n, undecided)
    if not undecided or low_high is None:
        return ""
    low, high = low_high
    return f"between {100 * low:.1f}% and {100 * high:.1f}% ({undecided} UNVERIFIABLE counted either way)"


def bounds_shown(n: int, undecided: int) -> bool:
    """Whether a headline shows a rate's bounds: its undecided share is large (BOUNDS_SHOWN_FROM)."""
    return bool(undecided) and undecided / (n + undecided) >= BOUNDS_SHOWN_FROM


@dataclass(frozen=True)
class Rate:
    cls: str
    kind: str                   # progress | guarantee | simulator | outcome
    occurrences: int            # conversations with at least one
    scored: int                 # conversations where the class could be decided
    unverifiable: int           # conversations where it could not
    turn_occurrences: int
    turn_checked: int

    @property
    def rate(self) -> float | None:
        return self.occurrences / self.scored if self.scored else None

    @property
    def interval(self) -> tuple[float | None, float | None]:
        return wilson(self.occurrences, self.scored)

    @property
    def bounds(self) -> tuple[float, float] | None:
        return bounds(self.occurrences, self.scored, self.unverifiable)

    @property
    def turn_rate(self) -> float | None:
        return self.turn_occurrences / self.turn_checked if self.turn_checked else None


def class_rates(store: Store, run_id: str) -> list[Rate]:
    rows = store.con.execute(f"""
        SELECT k.class,
               count(*) FILTER (WHERE k.status = 'fired') AS fired,
               count(*) FILTER (WHERE k.status = 'clean') AS clean,
               count(*) FILTER (WHERE k.status = 'unverifiable') AS unverifiable,
               sum(k.occurrences) AS turn_occ,
               sum(k.checked_turns) AS turn_checked
        FROM checks k JOIN conversations c USING (run_id, conversation_id)
        WHERE k.run_id = ?
          AND (k.kind <> 'progress' OR c.end_reason NOT IN ({EXCLUDED_ENDS}))
        GROUP BY k.class""", [run_id]).fetchall()
    by_class = {r[0]: r for r in rows}
    rates = []
    for cls in ALL_CLASSES:
        _, fired, clean, unver, occ, checked = by_class.get(cls, (cls, 0, 0, 0, 0, 0))
        rates.append(Rate(cls, kind_of(cls), int(fired), int(fired + clean), int(unver),
                          int(occ or 0), int(checked or 0)))
    return rates


@dataclass(frozen=True)
class Outcome:
    conversations: int
    counted: int                # conversations that count for the runtime
    ends: dict[str, int]
    goal_reached: int
    goal_scored: int
    goal_unverifiable: int
    runtime_errors: int
    mean_turns: float | None
    mean_turns_to_goal: float | None
    cost_usd: float

    @property
    def goal_rate(self) -> float | None:
        return self.goal_reached / self.goal_scored if self.goal_scored else None

    @property
    def goal_interval(self) -> tuple[float | None, float | None]:
        return wilson(self.goal_reached, self.goal_scored)

    @property
    def goal_bounds(self) -> tuple[float, float] | None:
        return bounds(self.goal_reached, self.goal_scored, self.goal_unverifiable)

    @property
    def runtime_error_rate(self) -> Rate:
        return Rate("runtime_error", "outcome", self.runtime_errors, self.counted, 0, 0, 0)


def outcome(store: Store, run_id: str) -> Outcome:
    ends = dict(store.con.execute(
        "SELECT end_reason, count(*) FROM conversations WHERE run_id = ? GROUP BY 1 ORDER BY 2 DESC",
        [run_id]).fetchall())
    row = one_row(store.con.execute(f"""
        SELECT count(*),
               count(*) FILTER (WHERE goal_reached),
               count(*) FILTER (WHERE goal_reached IS NOT NULL),
               count(*) FILTER (WHERE goal_reached IS NULL),
               count(*) FILTER (WHERE end_reason = 'runtime_error'),
               avg(turns),
               avg(turns) FILTER (WHERE goal_reached)
        FROM conversations WHERE run_id = ? AND end_reason NOT IN ({EXCLUDED_ENDS})""", [run_id]))
    cost = one_row(store.con.execute("SELECT coalesce(sum(cost_usd), 0) FROM conversations WHERE run_id = ?",
                                     [run_id]))[0]
    counted, reached, scored, unver, rt_err, mean_turns, mean_goal = row
    return Outcome(sum(ends.values()), counted, ends, reached, scored, unver, rt_err, mean_turns,
                   mean_goal, float(cost))


def guarantee_violations(rates: list[Rate]) -> dict[str, int]:
    return {r.cls: r.turn_occurrences for r in rates if r.cls in GUARANTEES and r.turn_occurrences}


def cells(store: Store, run_id: str) -> list[NamedRow]:
    """Persona x goal: conversations, goal reached, and conversations with each class."""
    cur = store.con.execute(f"""
        SELECT c.persona, c.goal, count(DISTINCT c.conversation_id) AS n,
               count(DISTINCT c.conversation_id) FILTER (WHERE c.goal_reached) AS reached,
               count(DISTINCT c.conversation_id) FILTER (WHERE c.end_reason IN ({EXCLUDED_ENDS})) AS excluded,
               list(DISTINCT k.class ORDER BY k.class) FILTER (WHERE k.status = 'fired') AS classes,
               list(DISTINCT c.end_reason ORDER BY c.end_reason)
                   FILTER (WHERE c.end_reason IN ('runtime_error', {EXCLUDED_ENDS})) AS failures
        FROM conversations c LEFT JOIN checks k USING (run_id, conversation_id)
        WHERE c.run_id = ? GROUP BY ALL ORDER BY c.persona, c.goal""", [run_id])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


SEVERITY = ("Conversations are ranked by: guarantee violations (most first); then goal not "
            "reached (a runtime error counts as not reached); then the number of progress "
            "findings (most first); then turns taken (most first).")


def worst(store: Store, run_id: str, limit: int = 20, cls: str | None = None) -> list[NamedRow]:
    """The worst conversations by SEVERITY; with `cls`, only those where that class fired."""
    only = "AND c.conversation_id IN (SELECT conversation_id FROM checks " \
           "WHERE run_id = c.run_id AND class = ? AND status = 'fired')" if cls else ""
    cur = store.con.execute(f"""
        SELECT c.conversation_id, c.persona, c.goal, c.end_reason, c.goal_reached, c.goal_detail, c.turns,
               count(f.class) FILTER (WHERE f.kind = 'guarantee') AS guarantee_findings,
               count(f.class) FILTER (WHERE f.kind = 'progress') AS progress_findings,
               count(f.class) FILTER (WHERE f.kind = 'simulator') AS simulator_findings,
               list(DISTINCT f.class ORDER BY f.class) FILTER (WHERE f.class IS NOT NULL) AS classes
        FROM conversations c LEFT JOIN findings f USING (run_id, conversation_id)
        WHERE c.run_id = ? {only}
        GROUP BY c.conversation_id, c.persona, c.goal, c.end_reason, c.goal_reached, c.goal_detail, c.turns
        HAVING guarantee_findings > 0 OR progress_findings > 0 OR simulator_findings > 0
               OR NOT coalesce(c.goal_reached, false)
        ORDER BY guarantee_findings DESC, coalesce(c.goal_reached, false) ASC,
                 progress_findings DESC, c.turns DESC, c.conversation_id
        LIMIT ?""", [run_id, *([cls] if cls else []), limit])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def conversations_with(store: Store, run_id: str, cls: str, limit: int | None = None) -> list[str]:
    return [r[0] for r in store.con.execute(
        "SELECT conversation_id FROM checks WHERE run_id = ? AND class = ? AND status = 'fired' "
        "ORDER BY conversation_id LIMIT ?", [run_id, cls, limit]).fetchall()]


# --- per cell, for the gate -------------------------------------------------------------------

# The gate compares these besides the scorer's classes: a crash counts against the runtime, and
# a goal not reached is the outcome every class is meant to explain.
OUTCOME_CLASSES = ("runtime_error", "goal_not_reached")


def cell_counts(store: Store, run_id: str) -> dict[tuple[str, str], dict[str, tuple[int, int, int]]]:
    """Persona x goal -> class -> (fired, scored, unverifiable), counted as `class_rates` counts.

    Summed over the cells, a class's counts are exactly its `class_rates` occurrences, scored and
    UNVERIFIABLE conversations (runtime_error and goal_not_reached: those of `outcome`).
    """
    counts: dict[tuple[str, str], dict[str, tuple[int, int, int]]] = {}
    for persona, goal, rt_fired, counted, not_reached, goal_scored, goal_unver in store.con.execute(f"""
            SELECT persona, goal,
                   count(*) FILTER (WHERE end_reason = 'runtime_error'),
                   count(*) FILTER (WHERE end_reason NOT IN ({EXCLUDED_ENDS})),
                   count(*) FILTER (WHERE end_reason NOT IN ({EXCLUDED_ENDS}) AND goal_reached = false),
                   count(*) FILTER (WHERE end_reason NOT IN ({EXCLUDED_ENDS}) AND goal_reached IS NOT NULL),
                   count(*) FILTER (WHERE end_reason NOT IN ({EXCLUDED_ENDS}) AND goal_reached IS NULL)
            FROM conversations WHERE run_id = ? GROUP BY persona, goal""", [run_id]).fetchall():
        cell = counts[(persona, goal)] = {cls: (0, 0, 0) for cls in ALL_CLASSES}
        cell["runtime_error"] = (int(rt_fired), int(counted), 0)
        cell["goal_not_reached"] = (int(not_reached), int(goal_scored), int(goal_unver))
    for persona, goal, cls, fired, clean, unver in store.con.execute(f"""
            SELECT c.persona, c.goal, k.class,
                   count(*) FILTER (WHERE k.status = 'fired'),
                   count(*) FILTER (WHERE k.status = 'clean'),
                   count(*) FILTER (WHERE k.status = 'unverifiable')
            FROM checks k JOIN conversations c USING (run_id, conversation_id)
            WHERE k.run_id = ?
              AND (k.kind <> 'progress' OR c.end_reason NOT IN ({EXCLUDED_ENDS}))
            GROUP BY ALL""", [run_id]).fetchall():
        if cls in ALL_CLASSES:
            counts[(persona, goal)][cls] = (int(fired), int(fired + clean), int(unver))
    return counts


def cell_repetitions(store: Store, run_id: str) -> list[tuple[str, str, int, str, str | None, str]]:
    """Every conversation's repetition and each class's status in it, as `cell_counts` counts:
    (persona, goal, repetition, conversation_id, class, status), with class None for a row that
    only says the conversation exists, and status 'fired' or 'unscored' (UNVERIFIABLE, or not
    counted because the conversation ended for a reason that is not the runtime's). A class a
    conversation has no such row for was clean in it.
    """
    rows: list[tuple[str, str, int, str, str | None, str]] = []
    for persona, goal, rep, cid, end, reached in store.con.execute(
            "SELECT persona, goal, repetition, conversation_id, end_reason, goal_reached FROM conversations "
            "WHERE run_id = ? ORDER BY persona, goal, repetition", [run_id]).fetchall():
        rows.append((persona, goal, rep, cid, None, "held"))
        if end in NOT_THE_RUNTIME:
            rows += [(persona, goal, rep, cid, cls, "unscored") for cls in OUTCOME_CLASSES]
            continue
        if end == "runtime_error":
            rows.append((persona, goal, rep, cid, "runtime_error", "fired"))
        if reached is None or reached is False:
            rows.append((persona, goal, rep, cid, "goal_not_reached", "unscored" if reached is None else "fired"))
    rows += store.con.execute(f"""
        SELECT c.persona, c.goal, c.repetition, c.conversation_id, k.class,
               CASE WHEN k.status = 'fired' AND NOT (k.kind = 'progress' AND c.end_reason IN ({EXCLUDED_ENDS}))
                    THEN 'fired' ELSE 'unscored' END
        FROM checks k JOIN conversations c USING (run_id, conversation_id)
        WHERE k.run_id = ? AND (k.status <> 'clean' OR (k.kind = 'progress' AND c.end_reason IN ({EXCLUDED_ENDS})))
        ORDER BY ALL""", [run_id]).fetchall()
    return rows


def set_aside(store: Store, run_id: str) -> list[NamedRow]:
    """Conversations kept out of the runtime's rates (simulator_error, provider_error, budget_cut)."""
    cur = store.con.execute(f"""
        SELECT conversation_id, end_reason, turns, error->>'message' AS why
        FROM conversations WHERE run_id = ? AND end_reason IN ({EXCLUDED_ENDS})
        ORDER BY end_reason, conversation_id""", [run_id])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def fired_counts(store: Store, run_id: str) -> dict[str, int]:
    """Conversations in which each class fired (whatever their end): the lists behind the rates."""
    return dict(store.con.execute("SELECT class, count(*) FROM checks WHERE run_id = ? AND status = 'fired' "
                                  "GROUP BY class", [run_id]).fetchall())


class PassK(TypedDict):
    """A goal's pass^1 and pass^k over its cells (`pass_k`)."""

    goal: str
    k: int
    cells: int
    pass1: float
    passk: float


def pass_k(store: Store, run_id: str) -> list[PassK]:
    """Per goal, the chance that every one of k repetitions of a cell reaches the goal.

    pass^k of a cell with c successes in n tries is C(c, k) / C(n, k) (an unbiased estimate);
    a goal's is the mean over its cells. pass^1 is the plain success rate; pass^k for the full
    number of repetitions says how often the goal is reached *every* time.
    """
    rows = store.con.execute(f"""
        SELECT goal, persona, count(*) AS n, count(*) FILTER (WHERE goal_reached) AS c
        FROM conversations WHERE run_id = ? AND end_reason NOT IN ({EXCLUDED_ENDS}) AND goal_reached IS NOT NULL
        GROUP BY goal, persona ORDER BY goal""", [run_id]).fetchall()
    by_goal: dict[str, list[tuple[int, int]]] = {}
    for goal, _, n, c in rows:
        by_goal.setdefault(goal, []).append((n, c))
    out: list[PassK] = []
    for goal, cells in by_goal.items():
        k = min(n for n, _ in cells)
        out.append({"goal": goal, "k": k, "cells": len(cells),
                    "pass1": sum(c / n for n, c in cells) / len(cells),
                    "passk": sum(math.comb(c, k) / math.comb(n, k) for n, c in cells) / len(cells)})
    return out


def cell_shares(store: Store, run_id: str) -> dict[str, dict[tuple[str, str], tuple[int, int]]]:
    """goal_reached and every class, per (persona, goal): (occurrences, conversations decided)."""
    shares: dict[str, dict[tuple[str, str], tuple[int, int]]] = {}
    for persona, goal, reached, scored in store.con.execute(f"""
            SELECT persona, goal, count(*) FILTER (WHERE goal_reached), count(*) FILTER (WHERE goal_reached IS NOT NULL)
            FROM conversations WHERE run_id = ? AND end_reason NOT IN ({EXCLUDED_ENDS}) GROUP BY ALL""",
                                                 [run_id]).fetchall():
        shares.setdefault("goal_reached", {})[(persona, goal)] = (reached, scored)
    for cls, persona, goal, fired, scored in store.con.execute(f"""
            SELECT k.class, c.persona, c.goal, count(*) FILTER (WHERE k.status = 'fired'),
                   count(*) FILTER (WHERE k.status <> 'unverifiable')
            FROM checks k JOIN conversations c USING (run_id, conversation_id)
            WHERE k.run_id = ? AND (k.kind <> 'progress' OR c.end_reason NOT IN ({EXCLUDED_ENDS}))
            GROUP BY ALL""", [run_id]).fetchall():
        shares.setdefault(cls, {})[(persona, goal)] = (fired, scored)
    return shares


def distributions(store: Store, run_id: str) -> dict[str, list[tuple[str, int]]]:
    """Turns to the goal, cost and duration per conversation, as histogram bins."""
    turns = store.con.execute("SELECT turns, count(*) FROM conversations WHERE run_id = ? AND goal_reached "
                              "GROUP BY 1 ORDER BY 1", [run_id]).fetchall()
    out = {"turns": [(str(t), n) for t, n in turns]}
    for name, column in (("cost", "cost_usd"), ("duration", "duration_ms")):
        low, high = one_row(store.con.execute(f"SELECT min({column}), max({column}) FROM conversations "
                                              "WHERE run_id = ?", [run_id]))
        if low is None:
            out[name] = []
            continue
        low, high = float(low), float(high)
        width = (high - low) / 12 or 1.0
        rows = dict(store.con.execute(
            f"SELECT least(floor(({column} - ?) / ?), 11)::INTEGER, count(*) FROM conversations "
            "WHERE run_id = ? GROUP BY 1", [low, width, run_id]).fetchall())
        places = 4 if name == "cost" else 1 if width < 10 else 0    # decimal places of a bucket's label
        out[name] = [(f"{low + i * width:.{places}f}", rows.get(i, 0)) for i in range(12 if high > low else 1)]
    return out


class Costs(TypedDict):
    """What a run's model calls cost (`costs`)."""

    calls: int
    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    spent_usd: Decimal
    cache_status: dict[str, int]
    per_conversation: Decimal | None


def costs(store: Store, run_id: str) -> Costs:
    """What the simulated user's model calls cost: calls, tokens, cache statuses, cost per
    conversation (the probe's calls count in the total, not per conversation)."""
    calls, uncached, cached, written, output, spent = one_row(store.con.execute(
        "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(cached_input_tokens), 0), "
        "coalesce(sum(cache_write_tokens), 0), coalesce(sum(output_tokens), 0), coalesce(sum(cost_usd), 0) "
        "FROM model_calls WHERE run_id = ?", [run_id]))
    statuses = dict(store.con.execute("SELECT cache_status, count(*) FROM model_calls WHERE run_id = ? "
                                      "GROUP BY 1 ORDER BY 2 DESC", [run_id]).fetchall())
    conversations, conversation_cost = one_row(store.con.execute(
        "SELECT count(*), coalesce(sum(cost_usd), 0) FROM conversations WHERE run_id = ?", [run_id]))
    return {"calls": calls, "input_tokens": uncached, "cached_input_tokens": cached, "cache_write_tokens": written,
            "output_tokens": output, "spent_usd": spent, "cache_status": statuses,
            "per_conversation": conversation_cost / conversations if conversations else None}


def significant(value: Decimal | float, digits: int = 4) -> str:
    """A decimal amount with `digits` significant digits, never in exponent form: 0.0001234."""
    amount = Decimal(str(value))
    if not amount:
        return "0"
    places = max(0, digits - 1 - amount.adjusted())
    return f"{amount:.{places}f}"
