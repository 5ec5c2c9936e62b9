"""The model APIs, through their official SDKs: OpenAI (and any compatible base URL) and Anthropic.

Each provider makes one call from (stable prefix, conversation, max_tokens) to a `Completion`:
the model's structured answer, its usage normalised for pricing, and the response as JSON for
the replay cache. SDK retries are off (`max_retries=0`): `simulator.retry` owns retries. The
SDKs are imported here only, and the API key is read from the environment only here; it is
never part of a request record, an error message or anything stored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx

from simulator.errors import ConfigError
from simulator.pricing import Usage
from simulator.users.prompt import ACTION_SCHEMA

KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass(frozen=True)
class Completion:
    answer: str | dict | None     # the structured answer: JSON text (OpenAI) or tool input (Anthropic)
    usage: Usage
    response: dict[str, Any]      # the whole response, for the replay cache

    @property
    def cache_status(self) -> str:
        if self.usage.cached_input_tokens:
            return "hit"
        return "write" if self.usage.cache_write_tokens else "miss"


def api_key(provider: str, offline: bool = False) -> str:
    variable = KEY_VARIABLES[provider]
    key = os.environ.get(variable)
    if not key and offline:
        return "replay-only-no-key"   # --replay-only never calls the API
    if not key:
        raise ConfigError(f"the {provider} user backend needs an API key: set {variable} "
                          "(for an OpenAI-compatible server that needs none, any value will do)", field="--user")
    return key


class ClientPool:
    """A few SDK clients, each with its own connection pool, taken in turn.

    httpcore scans its whole pool for every request; at hundreds of conversations in flight,
    one large pool costs more CPU than the calls. Tests hand in one client (`http_client`).
    """

    SIZE = 8

    def __init__(self, make, http_client=None) -> None:
        self.clients = [make(http_client)] if http_client is not None else [make(None) for _ in range(self.SIZE)]
        self._turn = 0

    def next(self):
        self._turn = (self._turn + 1) % len(self.clients)
        return self.clients[self._turn]

    async def close(self) -> None:
        for client in self.clients:
            await client.close()


def redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "[redacted]") if secret else text


class OpenAIProvider:
    name = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, timeout_s: float = 60.0,
                 http_client: httpx.AsyncClient | None = None, offline: bool = False) -> None:
        import openai

        self.model = model
        self.key = api_key("openai", offline)
        self.pool = ClientPool(lambda client: openai.AsyncOpenAI(
            api_key=self.key, base_url=base_url or os.environ.get("OPENAI_BASE_URL"), max_retries=0,
            timeout=timeout_s, http_client=client), http_client)

    def request(self, prefix: str, messages: list[dict], max_tokens: int) -> dict[str, Any]:
        """The exact request body (no credentials): what is cached and replayed by."""
        return {
            "model": self.model, "max_tokens": max_tokens, "temperature": 1.0,
            # The stable prefix goes first, so that automatic prefix caching can reuse it.
            "messages": [{"role": "system", "content": prefix}, *messages],
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "user_turn", "strict": True, "schema": ACTION_SCHEMA}},
        }

    async def complete(self, request: dict[str, Any]) -> Completion:
        from openai.types.chat import ChatCompletion

        # `post` with the finished body: the same SDK request, errors and parsing, without
        # `create`'s per-call walk over the parameters' type hints (milliseconds a call).
        response = await self.pool.next().post("/chat/completions", cast_to=ChatCompletion, body=request)
        usage = response.usage
        prompt = usage.prompt_tokens if usage else 0
        details = getattr(usage, "prompt_tokens_details", None) if usage else None
        cached = (getattr(details, "cached_tokens", 0) or 0) if details else 0
        return Completion(
            answer=response.choices[0].message.content if response.choices else None,
            usage=Usage(input_tokens=prompt - cached, cached_input_tokens=cached, cache_write_tokens=0,
                        output_tokens=usage.completion_tokens if usage else 0),
            response=response.model_dump(mode="json"))


class AnthropicProvider:
    name = "anthropic"
    TOOL = {"name": "act", "description": "Your next move in the conversation.", "input_schema": ACTION_SCHEMA}

    def __init__(self, model: str, *, base_url: str | None = None, timeout_s: float = 60.0,
                 http_client=None, offline: bool = False) -> None:
        import anthropic

        self.model = model
        self.key = api_key("anthropic", offline)
        self.pool = ClientPool(lambda client: anthropic.AsyncAnthropic(
            api_key=self.key, base_url=base_url, max_retries=0, timeout=timeout_s, http_client=client), http_client)

    def request(self, prefix: str, messages: list[dict], max_tokens: int) -> dict[str, Any]:
        return {
            "model": self.model, "max_tokens": max_tokens,
            # The stable prefix is marked for caching; the conversation follows it.
            "system": [{"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}}],
            "messages": _alternating(messages),
            "tools": [self.TOOL], "tool_choice": {"type": "tool", "name": "act"},
        }

    async def complete(self, request: dict[str, Any]) -> Completion:
        from anthropic.types import Message

        response = await self.pool.next().post("/v1/messages", cast_to=Message, body=request)
        answer = next((block.input for block in response.content if block.type == "tool_use"), None)
        if answer is None:
            answer = "".join(getattr(block, "text", "") for block in response.content)
        u = response.usage
        return Completion(
            answer=answer,
            usage=Usage(input_tokens=u.input_tokens, cached_input_tokens=u.cache_read_input_tokens or 0,
                        cache_write_tokens=u.cache_creation_input_tokens or 0, output_tokens=u.output_tokens),
            response=response.model_dump(mode="json"))


def _alternating(messages: list[dict]) -> list[dict]:
    """Anthropic wants user and assistant turns to alternate, starting with the user."""
    out: list[dict] = []
    for message in messages:
        if out and out[-1]["role"] == message["role"]:
            out[-1] = {"role": message["role"], "content": out[-1]["content"] + "\n\n" + message["content"]}
        else:
            out.append(dict(message))
    return out


def provider_for(spec: str, **options: Any):
    kind, _, model = spec.partition(":")
    if kind not in KEY_VARIABLES or not model:
        raise ConfigError(f"unknown user backend {spec!r}; use scripted, openai:<model> or anthropic:<model>",
                          field="--user")
    return (OpenAIProvider if kind == "openai" else AnthropicProvider)(model, **options)
