"""A user played by a model (`openai:<model>`, `anthropic:<model>`), paid for under a hard budget.

Each turn: the request is built (stable prefix + the conversation as the user saw it) and keyed
by everything that makes it what it is (request, persona, goal, seed, repetition). A replay
cache hit answers for free. Otherwise the ledger first holds the call's worst case (no number
of concurrent conversations can overshoot the budget), the call runs under the retry policy,
and the ledger settles the exact cost of its usage. Every call is recorded with its tokens,
cost, latency and cache status, and with its request and answer for later replay.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from decimal import Decimal
from typing import Any

from scoring.transcript import TurnRecord, UserTurn
from simulator.config import Price
from scoring.dataset import Goal, Persona, canonical_json
from scoring.errors import BudgetCut, ProviderFailure
from simulator.ledger import Ledger
from simulator.limits import RateLimiter
from simulator.pricing import Usage, cost, worst_case
from simulator.retry import RetryPolicy
from simulator.users.prompt import OPENING, parse_action, render_result, stable_prefix
from simulator.users.providers import MalformedResponse, redact


class ReplayCache:
    """Recorded answers by request key: from a stored run, for `--replay`."""

    def __init__(self, answers: dict[str, Any] | None = None, *, only: bool = False) -> None:
        self.answers = dict(answers or {})
        self.only = only
        self.hits = self.misses = 0


class ModelUser:
    paid = True

    def __init__(self, spec: str, provider, price: Price, ledger: Ledger, *, max_tokens: int = 300,
                 per_conversation: Decimal | None = None, retry: RetryPolicy | None = None,
                 replay: ReplayCache | None = None, limiter: RateLimiter | None = None) -> None:
        self.name = spec
        self.provider = provider
        self.price = price
        self.ledger = ledger
        self.max_tokens = max_tokens
        self.per_conversation = per_conversation
        self.retry = retry or RetryPolicy()
        self.replay = replay
        self.limiter = limiter

    async def aclose(self) -> None:
        await self.provider.client.close()

    def session(self, persona: Persona, goal: Goal, seed: int, repetition: int) -> "ModelSession":
        return ModelSession(self, persona, goal, seed, repetition)


class ModelSession:
    def __init__(self, backend: ModelUser, persona: Persona, goal: Goal, seed: int, repetition: int) -> None:
        self.backend = backend
        self.identity = {"persona": persona.id, "goal": goal.id, "seed": seed, "repetition": repetition}
        self.prefix = stable_prefix(persona, goal)
        self.messages: list[dict[str, str]] = [{"role": "user", "content": OPENING}]
        self.calls: list[dict[str, Any]] = []
        self.spent = Decimal(0)

    async def next_turn(self, turns: tuple[TurnRecord, ...]) -> UserTurn:
        if turns:
            self.messages.append({"role": "user", "content": render_result(turns[-1].result)})
        b = self.backend
        request = b.provider.request(self.prefix, self.messages, b.max_tokens)
        body = canonical_json(request)   # serialised once, for the worst case and the rate limiter
        key = hashlib.sha256(canonical_json({"request": request, **self.identity}).encode()).hexdigest()
        if b.replay is not None and key in b.replay.answers:
            b.replay.hits += 1
            answer = b.replay.answers[key]
            self._record(len(turns) + 1, key, request, answer, None, Usage(0, 0, 0, 0), Decimal(0), 0.0, "replay")
        elif b.replay is not None and b.replay.only:
            b.replay.misses += 1
            raise ProviderFailure("replay_miss", "--replay-only: this request is not in the replay cache "
                                  "(the runtime answered differently from the recorded run)", request_hash=key)
        else:
            if b.replay is not None:
                b.replay.misses += 1
            answer = await self._call(len(turns) + 1, key, request, body)
        # What the model said goes back into its conversation as it said it.
        self.messages.append({"role": "assistant", "content": answer if isinstance(answer, str)
                              else json.dumps(answer, sort_keys=True)})
        return parse_action(answer)

    async def _call(self, index: int, key: str, request: dict[str, Any], body: str) -> Any:
        b = self.backend
        worst = worst_case(b.price, len(body.encode()), b.max_tokens)
        if b.per_conversation is not None and self.spent + worst > b.per_conversation:
            raise BudgetCut(f"this conversation's budget ({b.per_conversation} USD) cannot cover its next call")
        held = self._hold(worst)
        started = time.perf_counter()

        async def attempt():
            nonlocal held, started
            try:
                return await b.provider.complete(request)
            except MalformedResponse:
                # A 2xx answer that cannot be read was most likely billed: it is charged at its
                # worst case, and the next attempt holds a worst case of its own.
                b.ledger.settle(held, worst)
                held = None
                self.spent += worst
                self._record(index, key, request, None, None, Usage(0, 0, 0, 0), worst,
                             (time.perf_counter() - started) * 1000, "unreadable")
                held, started = self._hold(worst), time.perf_counter()
                raise

        try:
            if b.limiter is not None:
                await b.limiter.acquire(math.ceil(len(body) / 4) + b.max_tokens)
            completion = await b.retry.call(attempt)
        except ProviderFailure as failure:
            if held is not None:
                b.ledger.release(held)
            failure.evidence["message"] = redact(failure.evidence["message"], b.provider.key)
            raise
        except BaseException:
            if held is not None:
                b.ledger.release(held)
            raise
        # Without the usage the exact cost is unknown: the budget is held to the worst case.
        price = cost(b.price, completion.usage) if completion.usage_reported else worst
        b.ledger.settle(held, price)
        self.spent += price
        self._record(index, key, request, completion.answer, completion.response, completion.usage, price,
                     (time.perf_counter() - started) * 1000, completion.cache_status)
        return completion.answer

    def _hold(self, worst: Decimal):
        held = self.backend.ledger.reserve(worst)
        if held is None:
            raise BudgetCut(f"what is left of the run's budget ({self.backend.ledger.remaining:.6f} USD) cannot "
                            f"cover the next call's worst case ({worst:.6f} USD)")
        return held

    def _record(self, turn: int, key: str, request: dict, answer: Any, response: dict | None, usage: Usage,
                price: Decimal, latency_ms: float, cache_status: str) -> None:
        self.calls.append({
            "turn": turn, "backend": self.backend.name, "model": request.get("model"),
            "input_tokens": usage.input_tokens, "cached_input_tokens": usage.cached_input_tokens,
            "cache_write_tokens": usage.cache_write_tokens, "output_tokens": usage.output_tokens,
            "cost_usd": price, "latency_ms": round(latency_ms, 3), "cache_status": cache_status,
            "request_hash": key, "request": request, "answer": answer, "response": response,
        })
