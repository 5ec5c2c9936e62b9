"""A user played by a model (`openai:<model>`, `anthropic:<model>`), paid for under a hard budget.

Each turn: the request is built (stable prefix + the conversation as the user saw it) and keyed
by everything that makes it what it is (request, persona, goal, seed, repetition). A replay
cache hit answers for free. Otherwise the ledger first holds the call's worst case (no number
of concurrent conversations can overshoot the budget), the call runs under the retry policy,
and the ledger settles the exact cost of its usage. Every call is recorded with its tokens,
cost, latency and cache status, and with its request and answer for later replay; the ledger
keeps each record until the runner stores it, whatever becomes of the conversation.

Before the first conversation, `start` settles the output form (`run.user_output`): "auto"
sends one cheap probe per form, in the order of `provider.forms`, and keeps the first form the
server both accepts and honours. An answer that cannot be read is re-asked once, quoting the
parse error (the repair step); an answer cut off at max_tokens is not, since it would be cut
again. The same provider failure in `STOP_AFTER` conversations in a row, with no call answered
in between, stops the run: a refused request is refused for the whole matrix.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from simrun import _secrets as secrets
from simrun._errors import BudgetCut, ProviderFailure, UserModelUnavailable
from simrun._settings import Price
from simrun._transcript import TurnRecord, UserTurn
from simrun.scoring.dataset import Goal, Persona, canonical_json
from simrun.scoring.store import JsonText
from simrun.simulator._ledger import CallLedger, Reservation
from simrun.simulator._limits import RateLimiter
from simrun.simulator._pricing import Usage, cost, worst_case
from simrun.simulator.users._prompt import OPENING, REPAIR, action_schema, parse_action, render_result, stable_prefix
from simrun.simulator.users._providers import Completion, MalformedResponse, Provider, redact
from simrun.simulator.users._retry import RetryPolicy

STOP_AFTER = 3      # conversations failed the same way in a row before the run stops
PROBE = "(output probe)"    # the conversation id the probe's calls are stored under
PROBE_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                "additionalProperties": False}
PROBE_PROMPT = 'Reply with the JSON object {"ok": true} and nothing else.'
PROBE_TOKENS = 32


class ReplayCache:
    """Recorded answers by request key, each with whether it was cut off: from a stored run, for
    `--replay`. `output` is the recorded run's output form, so that requests are built the same."""

    def __init__(self, answers: dict[str, Any] | None = None, *, only: bool = False,
                 output: str | None = None) -> None:
        self.answers = {k: v if isinstance(v, tuple) else (v, False) for k, v in (answers or {}).items()}
        self.only = only
        self.output = output
        self.hits = self.misses = 0


@dataclass
class Tab:
    """What one conversation (or the output probe) has spent, and the records of its calls."""

    conversation_id: str
    spent: Decimal = Decimal(0)
    calls: list[dict[str, Any]] = field(default_factory=list)


class ModelUser:
    paid = True

    def __init__(self, spec: str, provider: Provider, price: Price, ledger: CallLedger[Any], *, max_tokens: int = 300,
                 per_conversation: Decimal | None = None, retry: RetryPolicy | None = None,
                 replay: ReplayCache | None = None, limiter: RateLimiter | None = None,
                 concurrency: int | None = None, output: str = "auto") -> None:
        self.name = spec
        self.provider = provider
        self.price = price
        self.ledger = ledger
        self.max_tokens = max_tokens
        self.per_conversation = per_conversation
        self.retry = retry or RetryPolicy()
        self.replay = replay
        self.limiter = limiter
        # A single-slot server answers one call at a time: more in flight only queue there,
        # where the timeout runs out on calls the server is still working through.
        self.slots = asyncio.Semaphore(concurrency) if concurrency else None
        self.output = output
        self.refused_forms: list[tuple[str, str]] = []   # (form, why) for the forms auto passed over
        self.stopped: str | None = None                  # why the run must stop, once it must
        self._failing: tuple[Any, set[str]] = (None, set())

    async def aclose(self) -> None:
        await self.provider.client.close()

    def session(self, persona: Persona, goal: Goal, seed: int, repetition: int) -> ModelSession:
        return ModelSession(self, persona, goal, seed, repetition)

    # --- the output form --------------------------------------------------------------------

    async def start(self, recorded: str | None = None) -> str:
        """Settle the output form: the only one the provider has, the one configured, the one a
        replayed or resumed run used, or (auto) the first the server accepts and honours."""
        forms = self.provider.forms
        if len(forms) == 1:
            self.output = forms[0]
        elif self.output == "auto":
            recorded = (self.replay.output if self.replay is not None else None) or recorded
            if recorded is not None and recorded in forms:
                self.output = recorded
            elif self.replay is not None and self.replay.only:
                self.output = forms[0]
            else:
                self.output = await self._probe(forms)
        self.provider.output = self.output
        return self.output

    def describe_output(self) -> str:
        passed = "; ".join(f"{form} refused: {why}" for form, why in self.refused_forms)
        return f"user output form: {self.output}" + (f" ({passed})" if passed else "")

    async def _probe(self, forms: tuple[str, ...]) -> str:
        tab = Tab(PROBE)
        for form in forms:
            request = self.provider.request(PROBE_PROMPT, [{"role": "user", "content": "ok?"}], PROBE_TOKENS,
                                            PROBE_SCHEMA, form)
            key = hashlib.sha256(canonical_json({"request": request, "probe": form}).encode()).hexdigest()
            try:
                completion = await self.paid_call(tab, 0, key, request)
            except ProviderFailure as failure:
                self.refused_forms.append((form, str(failure.evidence.get("server_message") or failure)))
                continue
            except BudgetCut as cut:
                raise UserModelUnavailable(
                    f"the budget cannot cover even the output probe of {self.name}: {cut}") from None
            if form == "prompt" or _honoured(completion.answer):
                return form
            self.refused_forms.append(
                (form, f"answered, but not in that form: {secrets.cut(str(completion.answer), 120)!r}"))
        tried = "; ".join(f"{form}: {why}" for form, why in self.refused_forms)
        # What the probe paid for (answers in the wrong form, unreadable ones charged at their
        # worst case) belongs to no run, since none begins: the message is its only record.
        paid = (f"; the probe's answered calls cost {tab.spent:.6f} USD, which no run records"
                if tab.spent else "")
        raise UserModelUnavailable(f"the user model {self.name} answered no output form ({tried}){paid}; check "
                                   "the model name, run.user_base_url and the server (see docs/how-to/model-users.md, "
                                   "'Local and self-hosted user models')")

    # --- one paid call ----------------------------------------------------------------------

    async def paid_call(self, tab: Tab, index: int, key: str, request: dict[str, Any],
                        body: str | None = None) -> Completion:
        """One call under the budget and the retry policy; its record goes to the ledger. `body`:
        the request as canonical JSON, if it was already made."""
        body = body if body is not None else canonical_json(request)   # for the worst case, the limiter, the store
        max_tokens = request["max_tokens"]
        worst = worst_case(self.price, len(body.encode()), max_tokens)
        if self.per_conversation is not None and tab.spent + worst > self.per_conversation:
            raise BudgetCut(f"this conversation's budget ({self.per_conversation} USD) cannot cover its next call")
        call = self._call(tab, index, key, request)
        held: Reservation | None = await self._hold(worst, call)
        started = time.perf_counter()

        async def attempt() -> Completion:
            nonlocal held, started
            try:
                if self.slots is None:
                    return await self.provider.complete(request, body)
                async with self.slots:
                    started = time.perf_counter()
                    return await self.provider.complete(request, body)
            except MalformedResponse:
                # A 2xx answer that cannot be read was most likely billed: it is charged at its
                # worst case, and the next attempt holds a worst case of its own.
                assert held is not None     # (None only until the hold below returns)
                self._settle(tab, held, worst, self._record(tab, index, key, request, None, None, Usage(0, 0, 0, 0),
                                                            worst, started, "unreadable", body))
                held = None
                held, started = await self._hold(worst, call), time.perf_counter()
                raise

        try:
            if self.limiter is not None:
                await self.limiter.acquire(math.ceil(len(body) / 4) + max_tokens)
            completion = await self.retry.call(attempt)
        except ProviderFailure as failure:
            if held is not None:
                self.ledger.release(held)
            for name in ("message", "server_message"):
                if name in failure.evidence:
                    failure.evidence[name] = redact(str(failure.evidence[name]), self.provider.key)
            self._note_failure(tab.conversation_id, failure)
            raise
        except BaseException:
            if held is not None:
                self.ledger.release(held)
            raise
        self._failing = (None, set())
        # Without the usage the exact cost is unknown: the budget is held to the worst case.
        price = cost(self.price, completion.usage) if completion.usage_reported else worst
        assert held is not None     # (the attempt that answered holds its own)
        self._settle(tab, held, price, self._record(tab, index, key, request, completion.answer, completion.response,
                                                    completion.usage, price, started, completion.cache_status, body))
        return completion

    async def _hold(self, worst: Decimal, call: dict[str, Any]) -> Reservation:
        held: Reservation | None = await self.ledger.hold(worst, call)
        if held is None:
            raise BudgetCut(f"what is left of the run's budget ({self.ledger.remaining:.6f} USD) cannot "
                            f"cover the next call's worst case ({worst:.6f} USD)")
        return held

    def _settle(self, tab: Tab, held: Reservation, price: Decimal, record: dict[str, Any]) -> None:
        self.ledger.settle(held, price, record)
        tab.spent += price

    def _call(self, tab: Tab, turn: int, key: str, request: dict[str, Any]) -> dict[str, Any]:
        """Which call this is: what its hold names (a cluster's ledger records it if the worker
        dies holding it), and what its record begins with."""
        return {"conversation_id": tab.conversation_id, "turn": turn, "backend": self.name,
                "model": request.get("model"), "request_hash": key}

    def _record(self, tab: Tab, turn: int, key: str, request: dict[str, Any], answer: Any,
                response: dict[str, Any] | None,
                usage: Usage, price: Decimal, started: float | None, cache_status: str,
                body: str | None = None) -> dict[str, Any]:
        """`body`: the request as sent, already JSON: stored as it is rather than encoded again."""
        record = {
            **self._call(tab, turn, key, request), "input_tokens": usage.input_tokens,
            "cached_input_tokens": usage.cached_input_tokens, "cache_write_tokens": usage.cache_write_tokens,
            "output_tokens": usage.output_tokens, "cost_usd": price,
            "latency_ms": round((time.perf_counter() - started) * 1000, 3) if started is not None else 0.0,
            "cache_status": cache_status, "request": request if body is None else JsonText(body), "answer": answer,
            "response": response,
        }
        tab.calls.append(record)
        return record

    def _note_failure(self, conversation_id: str, failure: ProviderFailure) -> None:
        """The same failure in STOP_AFTER conversations, no call answered in between: stop."""
        if conversation_id == PROBE or failure.kind in ("replay_miss", "stopped"):
            return
        said = failure.evidence.get("server_message") or failure.evidence["message"]
        signature = (failure.kind, failure.evidence.get("status"), said)
        same, conversations = self._failing
        conversations = conversations if same == signature else set()
        conversations.add(conversation_id)
        self._failing = (signature, conversations)
        if len(conversations) >= STOP_AFTER and self.stopped is None:
            status = failure.evidence.get("status")
            self.stopped = (f"the user model failed the same way in {len(conversations)} conversations in a row, "
                            f"so the run stopped: {f'HTTP {status}: ' if status else ''}{said!r}")


class ModelSession:
    def __init__(self, backend: ModelUser, persona: Persona, goal: Goal, seed: int, repetition: int) -> None:
        self.backend = backend
        self.identity = {"persona": persona.id, "goal": goal.id, "seed": seed, "repetition": repetition}
        self.key_around = key_around(self.identity)
        self.tab = Tab(f"{persona.id}/{goal.id}/{repetition}")
        self.prefix = stable_prefix(persona, goal)
        self.schema = action_schema(goal)
        self.step_ids = tuple(goal.step_id(i) for i in range(len(goal.steps)))
        self.messages: list[dict[str, str]] = [{"role": "user", "content": OPENING}]

    @property
    def calls(self) -> list[dict[str, Any]]:
        return self.tab.calls

    @property
    def spent(self) -> Decimal:
        return self.tab.spent

    async def next_turn(self, turns: tuple[TurnRecord, ...]) -> UserTurn:
        if self.backend.stopped:
            raise ProviderFailure("stopped", self.backend.stopped)
        if turns:
            self.messages.append({"role": "user", "content": render_result(turns[-1].result)})
        index = len(turns) + 1
        answer, cut = await self._ask(index)
        turn = parse_action(answer, self.step_ids)
        if "parse_error" in turn.meta and not cut:
            # The repair step: the model is told once what could not be read, and answers again.
            self.messages += [{"role": "assistant", "content": _text(answer)},
                              {"role": "user", "content": REPAIR.format(error=turn.meta["parse_error"])}]
            answer, cut = await self._ask(index)
            turn = parse_action(answer, self.step_ids)
            if "parse_error" in turn.meta:
                turn = UserTurn("message", "", meta={**turn.meta, "repaired": True})
        if "parse_error" in turn.meta and cut:
            turn = UserTurn("message", "", meta={**turn.meta, "cut_off": self.backend.max_tokens})
        # What the model said goes back into its conversation as it said it.
        self.messages.append({"role": "assistant", "content": _text(answer)})
        return turn

    async def _ask(self, index: int) -> tuple[Any, bool]:
        """The model's answer to the conversation so far, and whether it was cut off."""
        b = self.backend
        request = b.provider.request(self.prefix, self.messages, b.max_tokens, self.schema)
        body = canonical_json(request)      # serialised once: for its key, the call, and the store
        key = request_key(body, self.key_around)
        if b.replay is not None and key in b.replay.answers:
            b.replay.hits += 1
            answer, cut = b.replay.answers[key]
            b.ledger.log(b._record(self.tab, index, key, request, answer, None, Usage(0, 0, 0, 0), Decimal(0),
                                   None, "replay"))
            return answer, cut
        if b.replay is not None and b.replay.only:
            b.replay.misses += 1
            raise ProviderFailure("replay_miss", "--replay-only: this request is not in the replay cache "
                                  "(the runtime answered differently from the recorded run)", request_hash=key)
        if b.replay is not None:
            b.replay.misses += 1
        completion = await b.paid_call(self.tab, index, key, request, body)
        return completion.answer, completion.cut_off


def key_around(identity: dict[str, Any]) -> tuple[str, str]:
    """The text of canonical_json({"request": ..., **identity}) before and after the request's
    JSON: a conversation's identity is the same for each of its calls, so it is written once.
    (Canonical JSON is the JSON of each value in turn, keys sorted.)"""
    fields = {**{name: canonical_json(value) for name, value in identity.items()}, "request": "\0"}
    text = "{" + ",".join(f"{json.dumps(name)}:{fields[name]}" for name in sorted(fields)) + "}"
    before, after = text.split(":\0", 1)
    return before + ":", after


def request_key(body: str, around: tuple[str, str]) -> str:
    """A request's key in the replay cache: the hash of canonical_json({"request": request,
    **identity}), composed from the request's JSON already made and the identity's text around it
    (`key_around`), so the text, and the key, are those of earlier runs."""
    return hashlib.sha256((around[0] + body + around[1]).encode()).hexdigest()


def _text(answer: Any) -> str:
    if answer is None:
        return ""
    return answer if isinstance(answer, str) else json.dumps(answer, sort_keys=True)


def _honoured(answer: Any) -> bool:
    """A probe answered in the form asked for: exactly a JSON object with its field, no prose."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return False
    return isinstance(answer, dict) and isinstance(answer.get("ok"), bool)
