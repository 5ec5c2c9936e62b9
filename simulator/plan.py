"""`simrun plan`: what the configured matrix will cost with a model-played user, before spending.

The estimate rests on a free dry run: the scripted user plays the whole matrix against the
runtime, which gives realistic conversation lengths and replies. For every turn of those
conversations it builds the request a model-played user would send (the same stable prefix and
the same rendering of the conversation), and counts tokens as characters / 4, the usual rule of
thumb for English. From the second call of a conversation on, the stable prefix is priced as
read from the prompt cache (written to it on the first call where the provider bills writes).
The output is the size of the answers the scripted user gave, in the structured form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from simulator.config import Budgets, Price
from simulator.conversation import converse
from scoring.dataset import Dataset, canonical_json
from simulator.pricing import Usage, cost
from simulator.runner import matrix
from simulator.users.prompt import ACTION_SCHEMA, OPENING, action_json, render_result, stable_prefix
from simulator.users.scripted import ScriptedUser

SCHEMA_CHARS = len(canonical_json(ACTION_SCHEMA))


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
    cost_usd: Decimal
    budget_usd: Decimal

    @property
    def per_conversation(self) -> Decimal:
        return self.cost_usd / self.conversations if self.conversations else Decimal(0)

    @property
    def affordable(self) -> int:
        """How many conversations the budget buys, at the estimated mean cost."""
        if not self.per_conversation:
            return self.conversations
        return min(self.conversations, int(self.budget_usd / self.per_conversation))


async def call_shapes(dataset: Dataset, runtime, repetitions: int, seed: int) -> list[list[CallShape]]:
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
            for n, answer in enumerate(answers):
                if n:
                    history += len(action_json(answers[n - 1])) + len(render_result(conv.transcript.turns[n - 1].result))
                calls.append(CallShape(len(prefix), history + SCHEMA_CHARS, len(action_json(answer))))
            shapes.append(calls)
    finally:
        await runtime.aclose()
    return shapes


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


async def estimate(dataset: Dataset, runtime, budgets: Budgets, budget: Decimal, *, repetitions: int,
                   seed: int, backends: list[str] | None = None) -> list[Estimate]:
    shapes = await call_shapes(dataset, runtime, repetitions, seed)
    chosen = backends or sorted(budgets.prices)
    return [price_shapes(b, budgets.prices[b], shapes, budget) for b in chosen if b in budgets.prices]
