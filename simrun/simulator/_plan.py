"""`simrun plan`: what the configured matrix will cost with a model-played user, before spending.

Every estimate is a range, p50 to p90 of the matrix's total, and names its basis:

- **history**: the conversations this backend:model played in earlier runs of the database
  (their calls and tokens, priced at today's prices); else the conversations of its latest
  `check-user`. Each cell of the matrix draws a conversation of the same goal where there is
  one (else any), and the total's p50 and p90 come from BOOTSTRAP such draws of the matrix
  (for a matrix of thousands of cells, from the normal law its total then follows).
  Model users take as many turns as they take: only their own history says how many.
- **prior**, with no history: a free dry run in which the scripted user plays the whole matrix
  against the runtime gives the p50 (its conversation lengths and replies); the p90 assumes a
  model user half-way from there to each goal's turn cap. For every turn it builds the request
  a model-played user would send (the same stable prefix and the same rendering of the
  conversation), and counts tokens as characters / 4, the usual rule of thumb for English. From
  the second call of a conversation on, the stable prefix is priced as read from the prompt
  cache (written to it on the first call where the provider bills writes). The output is the
  size of the answers the scripted user gave, in the structured form.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from simrun._settings import Budgets, Price
from simrun.scoring.dataset import Dataset, canonical_json
from simrun.scoring.store import Store, conversation_costs, user_check
from simrun.simulator._conversation import converse
from simrun.simulator._pricing import Usage, cost
from simrun.simulator._runner import matrix
from simrun.simulator.adapters import RuntimeAdapter
from simrun.simulator.users import OPENING, ScriptedUser, action_json, action_schema, render_result, stable_prefix

BOOTSTRAP = 2000
MAX_DRAWS = 500_000   # cells x BOOTSTRAP past which the total is taken as normal instead


def estimate_tokens(text_chars: int) -> int:
    return math.ceil(text_chars / 4)


@dataclass(frozen=True)
class CallShape:
    prefix_chars: int      # the stable prefix (cacheable)
    rest_chars: int        # the conversation so far and the answer schema
    output_chars: int


@dataclass(frozen=True)
class Estimate:
    backend: str
    conversations: int
    calls: int
    usage: Usage
    cost_usd: Decimal            # p50 of the matrix's total
    budget_usd: Decimal
    high_usd: Decimal | None = None   # p90
    basis: str = "prior"              # where the estimate comes from, in a line
    source: str = "prior"             # history | check-user | prior

    @property
    def range_text(self) -> str:
        return f"${self.cost_usd:.4f}–${(self.high_usd or self.cost_usd):.4f}"

    @property
    def per_conversation(self) -> Decimal:
        return self.cost_usd / self.conversations if self.conversations else Decimal(0)

    @property
    def affordable(self) -> int:
        """How many conversations the budget buys, at the estimated mean cost."""
        if not self.per_conversation:
            return self.conversations
        return min(self.conversations, int(self.budget_usd / self.per_conversation))


async def call_shapes(dataset: Dataset, runtime: RuntimeAdapter, repetitions: int, seed: int) -> list[list[CallShape]]:
    """The model calls each conversation of the matrix would make, from a scripted dry run."""
    user = ScriptedUser()
    shapes = []
    try:
        await runtime.health()
        for cell in matrix(dataset, repetitions, seed):
            conv = await converse(cell, user, runtime)
            prefix = stable_prefix(cell.persona, cell.goal)
            history = len(OPENING)
            calls = []
            answers = [t.user for t in conv.transcript.turns]
            if conv.transcript.stop is not None:
                answers.append(conv.transcript.stop)   # the model is asked once more, and stops
            schema = len(canonical_json(action_schema(cell.goal)))
            for n, answer in enumerate(answers):
                if n:
                    history += (len(action_json(answers[n - 1]))
                                + len(render_result(conv.transcript.turns[n - 1].result)))
                calls.append(CallShape(len(prefix), history + schema, len(action_json(answer))))
            shapes.append(calls)
    finally:
        await runtime.aclose()
    return shapes


def stretched(calls: list[CallShape], max_turns: int) -> list[CallShape]:
    """A conversation that goes on half-way to the turn cap, each extra turn as long as its
    average turn was."""
    if not calls:
        return calls
    target = max(len(calls), (len(calls) + max_turns + 1) // 2)
    step = (calls[-1].rest_chars - calls[0].rest_chars) // max(1, len(calls) - 1) or calls[0].rest_chars // 2
    out = list(calls)
    while len(out) < target:
        last = out[-1]
        out.append(CallShape(last.prefix_chars, last.rest_chars + step, last.output_chars))
    return out


def price_shapes(backend: str, price: Price, shapes: list[list[CallShape]], budget: Decimal) -> Estimate:
    uncached = cached = written = output = 0
    writes_billed = backend.startswith("anthropic:")
    for calls in shapes:
        for n, call in enumerate(calls):
            prefix = estimate_tokens(call.prefix_chars)
            if n == 0:
                written += prefix if writes_billed else 0
                uncached += 0 if writes_billed else prefix
            else:
                cached += prefix
            uncached += estimate_tokens(call.rest_chars)
            output += estimate_tokens(call.output_chars)
    usage = Usage(uncached, cached, written, output)
    return Estimate(backend, len(shapes), sum(len(c) for c in shapes), usage, cost(price, usage), budget)


def from_history(backend: str, price: Price, samples: list[dict[str, Any]], dataset: Dataset, repetitions: int,
                 budget: Decimal, basis: str, source: str = "history", seed: int = 0) -> Estimate:
    """The matrix priced from conversations this backend played before (see the module doc)."""
    def priced(sample: dict[str, Any]) -> Decimal:
        usage = Usage(int(sample["input_tokens"]), int(sample["cached_input_tokens"]),
                      int(sample["cache_write_tokens"]), int(sample["output_tokens"]))
        return cost(price, usage) + Decimal(str(sample.get("unpriced_usd") or 0))

    by_goal: dict[str | None, list[dict[str, Any]]] = {}
    for sample in samples:
        by_goal.setdefault(sample.get("goal"), []).append(sample)
    # Each cell draws from its goal's conversations, or from all of them for a goal never played.
    pools = {goal.id: by_goal.get(goal.id) or samples for goal in dataset.goals}
    cells = {gid: repetitions * len(dataset.personas) for gid in pools}
    costs = {gid: [priced(s) for s in pool] for gid, pool in pools.items()}
    n = sum(cells.values())
    if n * BOOTSTRAP <= MAX_DRAWS:
        rng = random.Random(seed)
        draws = [costs[gid] for gid, count in cells.items() for _ in range(count)]
        totals = sorted(sum((rng.choice(c) for c in draws), Decimal(0)) for _ in range(BOOTSTRAP))
        p50, p90 = totals[len(totals) // 2], totals[int(len(totals) * 0.9)]
    else:
        # Many cells: their total is as good as normal (the central limit theorem), and drawing
        # it thousands of times would take longer than the run.
        means = {gid: sum(c, Decimal(0)) / len(c) for gid, c in costs.items()}
        variance = sum((cells[gid] * sum(((x - means[gid]) ** 2 for x in c), Decimal(0)) / len(c)
                        for gid, c in costs.items()), Decimal(0))
        p50 = sum((cells[gid] * m for gid, m in means.items()), Decimal(0))
        p90 = p50 + Decimal("1.2816") * variance.sqrt()

    def total(name: str) -> int:
        return round(sum(cells[gid] * sum(int(s[name]) for s in pool) / len(pool) for gid, pool in pools.items()))

    usage = Usage(*(total(name) for name in ("input_tokens", "cached_input_tokens", "cache_write_tokens",
                                             "output_tokens")))
    return Estimate(backend, n, total("calls"), usage, p50, budget, high_usd=p90, basis=basis, source=source)


def history(store: Store | None, backend: str) -> tuple[list[dict[str, Any]], str, str] | None:
    """The conversations `backend` played before, a line naming where they come from, and its kind."""
    if store is None:
        return None
    played = conversation_costs(store, backend)
    if played:
        return played, f"history: {len(played)} conversations of {backend} in earlier runs", "history"
    check = user_check(store, backend)
    if check and check["conversation_costs"]:
        return (check["conversation_costs"], f"check-user of {str(check['checked_at'])[:16]}: "
                f"{len(check['conversation_costs'])} conversations of {backend} on the reference runtime",
                "check-user")
    return None


async def estimate(dataset: Dataset, runtime: RuntimeAdapter, budgets: Budgets, budget: Decimal, *, repetitions: int,
                   seed: int, backends: list[str] | None = None, store: Store | None = None) -> list[Estimate]:
    """Each backend's estimate: from its history in `store` where it has one, else the prior
    (one scripted dry run of the matrix, which closes `runtime`)."""
    chosen = [b for b in (backends or sorted(budgets.prices)) if b in budgets.prices]
    estimates: list[Estimate] = []
    shapes: list[list[CallShape]] | None = None     # the scripted dry run's, made once if any backend needs it
    high: list[list[CallShape]] = []
    for backend in chosen:
        price = budgets.prices[backend]
        found = history(store, backend)
        if found is not None:
            samples, basis, source = found
            estimates.append(from_history(backend, price, samples, dataset, repetitions, budget, basis, source, seed))
            continue
        if shapes is None:
            shapes = await call_shapes(dataset, runtime, repetitions, seed)
            caps = [cell.goal.max_turns for cell in matrix(dataset, repetitions, seed)]
            high = [stretched(calls, cap) for calls, cap in zip(shapes, caps)]
        p50 = price_shapes(backend, price, shapes, budget)
        p90 = price_shapes(backend, price, high, budget).cost_usd
        estimates.append(Estimate(backend, p50.conversations, p50.calls, p50.usage, p50.cost_usd, budget,
                                  high_usd=p90, basis="prior: no history for this model; p50 from the scripted "
                                  "user's conversation lengths, p90 half-way to each goal's turn cap"))
    if shapes is None:
        await runtime.aclose()   # every backend had history: the runtime was never asked
    return estimates
