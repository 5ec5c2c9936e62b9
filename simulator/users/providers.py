"""The model APIs, through their official SDKs: OpenAI (and any compatible base URL) and Anthropic.

Each provider makes one call from (stable prefix, conversation, max_tokens) to a `Completion`:
the model's structured answer, its usage normalised for pricing, and the response as JSON for
the replay cache. SDK retries are off (`max_retries=0`): `simulator.retry` owns retries. The
SDKs are imported here only, and the API key is read from the environment only here; it is
never part of a request record, an error message or anything stored.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import httpx

from scoring import secrets
from scoring.errors import ConfigError
from simulator.pricing import Usage
from simulator.users.prompt import ACTION_SCHEMA

KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass(frozen=True)
class Completion:
    answer: str | dict | None     # the structured answer: JSON text (OpenAI) or tool input (Anthropic)
    usage: Usage
    response: dict[str, Any]      # the whole response, for the replay cache
    # Some OpenAI-compatible servers leave usage out, or send it empty: such a call's cost is
    # unknown, and it is billed at its worst case.
    usage_reported: bool = True

    @property
    def cache_status(self) -> str:
        if not self.usage_reported:
            return "no_usage"
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
    secrets.register(key)     # an error body that quotes it must not carry it into the store
    return key


def _aiohttp(sdk, timeout_s: float):
    """The SDK's own aiohttp-backed client. At hundreds of calls in flight, httpx's connection
    pool costs more CPU than the calls themselves (benchmarks/README.md); aiohttp's does not."""
    return sdk.DefaultAioHttpClient(timeout=timeout_s)


def redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "[redacted]") if secret else text


class OpenAIProvider:
    name = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, timeout_s: float = 60.0,
                 http_client: httpx.AsyncClient | None = None, offline: bool = False) -> None:
        import openai

        self.model = model
        self.key = api_key("openai", offline)
        self.client = openai.AsyncOpenAI(
            api_key=self.key, base_url=base_url or os.environ.get("OPENAI_BASE_URL"), max_retries=0,
            timeout=timeout_s, http_client=http_client or _aiohttp(openai, timeout_s))

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
        # `post` with the finished body, answered as bytes: the SDK's request path, errors and
        # status handling, without `create`'s walk over the parameters' type hints or building
        # response models only to turn them back into JSON for the replay cache.
        response = _json_object(await self.client.post("/chat/completions", cast_to=bytes, body=request))
        usage = _field(response, "usage", required=False)
        prompt = usage.get("prompt_tokens") or 0
        cached = _field(usage, "prompt_tokens_details", required=False).get("cached_tokens") or 0
        choices = response.get("choices") or [{}]
        return Completion(
            answer=_field(choices[0], "message").get("content"),
            usage=Usage(input_tokens=prompt - cached, cached_input_tokens=cached, cache_write_tokens=0,
                        output_tokens=usage.get("completion_tokens") or 0),
            response=response, usage_reported=_counted(usage, "prompt_tokens", "completion_tokens"))


class AnthropicProvider:
    name = "anthropic"
    TOOL = {"name": "act", "description": "Your next move in the conversation.", "input_schema": ACTION_SCHEMA}

    def __init__(self, model: str, *, base_url: str | None = None, timeout_s: float = 60.0,
                 http_client=None, offline: bool = False) -> None:
        import anthropic

        self.model = model
        self.key = api_key("anthropic", offline)
        self.client = anthropic.AsyncAnthropic(
            api_key=self.key, base_url=base_url, max_retries=0, timeout=timeout_s,
            http_client=http_client or _aiohttp(anthropic, timeout_s))

    def request(self, prefix: str, messages: list[dict], max_tokens: int) -> dict[str, Any]:
        return {
            "model": self.model, "max_tokens": max_tokens,
            # The stable prefix is marked for caching; the conversation follows it.
            "system": [{"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}}],
            "messages": _alternating(messages),
            "tools": [self.TOOL], "tool_choice": {"type": "tool", "name": "act"},
        }

    async def complete(self, request: dict[str, Any]) -> Completion:
        response = _json_object(await self.client.post("/v1/messages", cast_to=bytes, body=request))
        content = response.get("content")
        if not isinstance(content, list):
            raise MalformedResponse("the API's answer has no 'content' list")
        blocks = [block for block in content if isinstance(block, dict)]
        answer = next((block.get("input") for block in blocks if block.get("type") == "tool_use"), None)
        if answer is None:
            answer = "".join(block.get("text") or "" for block in blocks)
        u = _field(response, "usage", required=False)
        return Completion(
            answer=answer,
            usage=Usage(input_tokens=u.get("input_tokens") or 0, cached_input_tokens=u.get("cache_read_input_tokens") or 0,
                        cache_write_tokens=u.get("cache_creation_input_tokens") or 0,
                        output_tokens=u.get("output_tokens") or 0),
            response=response, usage_reported=_counted(u, "input_tokens", "output_tokens"))


class MalformedResponse(ValueError):
    """A 2xx answer that is not the JSON object the API documents: retried, like a 5xx."""


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        raise MalformedResponse(f"the API answered with a body that is not JSON: {raw[:200]!r}") from None
    if not isinstance(value, dict):
        raise MalformedResponse(f"the API answered with JSON that is not an object: {raw[:200]!r}")
    return value


def _counted(usage: dict[str, Any], *counts: str) -> bool:
    return all(isinstance(usage.get(name), int) for name in counts)


def _field(value: Any, name: str, required: bool = True) -> dict[str, Any]:
    field = value.get(name) if isinstance(value, dict) else None
    if field is None and not required:
        return {}
    if not isinstance(field, dict):
        raise MalformedResponse(f"the API's answer has no {name!r} object")
    return field


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
