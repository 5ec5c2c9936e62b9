"""The model APIs, through their official SDKs: OpenAI (and any compatible base URL) and Anthropic.

Each provider makes one call from (stable prefix, conversation, max_tokens, answer schema) to a
`Completion`: the model's structured answer, its usage normalised for pricing, whether it was cut
off at max_tokens, and the response as JSON for the replay cache.

OpenAI-compatible servers disagree on how structured output is asked for; the provider speaks
each form (`OUTPUT_FORMS`, in the order `run.user_output = "auto"` tries them):
- `json_schema`: OpenAI's strict `response_format` (OpenAI, recent vLLM, Ollama);
- `json_object`: `{"type": "json_object", "schema": ...}`, llama.cpp's server's own form;
- `guided_json`: vLLM's extra request field;
- `tools`: a forced function call, whose arguments are the answer;
- `prompt`: nothing but the prompt; the answer's JSON is read out of whatever text comes back.
Anthropic has one form, a forced tool, and is called through the official SDK, given an HTTP
client built from its public parameters (`simrun.simulator.users._bounded`: answers bounded, the
environment's proxy); SDK retries are off (`max_retries=0`): `simrun.simulator.users._retry` owns retries.
OpenAI-compatible calls go through simrun's one light path (`simrun.simulator.users._wire`: plain
HTTP, simrun's own errors), kept because the openai SDK's request path costs ten times its CPU per
call at a fast model (benchmarks/call_cpu.py --client sdk, which keeps the SDK's path for that
comparison). Both honour the environment's proxy alike. The API key is read from the environment
only here; it is never part of a request record, an error message or anything stored.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from simrun import _secrets as secrets
from simrun._errors import ConfigError
from simrun._storable import JsonObject
from simrun.scoring.dataset import canonical_json
from simrun.simulator._pricing import Usage
from simrun.simulator.users._wire import LightClient, Sender

if TYPE_CHECKING:
    from simrun.simulator.users._bounded import SdkClient

KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
OUTPUT_FORMS = ("json_schema", "json_object", "guided_json", "tools", "prompt")
TOOL_NAME, TOOL_DESCRIPTION = "act", "Your next move in the conversation."


@dataclass(frozen=True)
class Completion:
    answer: str | JsonObject | None     # the structured answer: JSON text (OpenAI) or tool input (Anthropic)
    usage: Usage
    response: dict[str, Any]      # the whole response, for the replay cache
    # Some OpenAI-compatible servers leave usage out, or send it empty: such a call's cost is
    # unknown, and it is billed at its worst case.
    usage_reported: bool = True
    cut_off: bool = False         # the answer stopped at max_tokens (finish_reason length / max_tokens)

    @property
    def cache_status(self) -> str:
        if not self.usage_reported:
            return "no_usage"
        if self.usage.cached_input_tokens:
            return "hit"
        return "write" if self.usage.cache_write_tokens else "miss"


class _Client(Protocol):
    async def close(self) -> None: ...


class Provider(Protocol):
    """What a model-played user (`simrun.simulator.users._model.ModelUser`) asks of a model API."""

    name: str           # the API's name: openai, anthropic
    key: str            # its API key, cut out of whatever a failure says
    output: str         # the output form its requests ask for: `ModelUser.start` settles it

    @property
    def forms(self) -> tuple[str, ...]:
        """The output forms it speaks, in the order `run.user_output = "auto"` tries them."""

    @property
    def client(self) -> _Client:
        """The HTTP client its calls go through; the user closes it when the run is over."""

    def request(self, prefix: str, messages: list[dict[str, str]], max_tokens: int, schema: dict[str, Any],
                form: str | None = None) -> dict[str, Any]:
        """The exact request body (no credentials) in `form` (default: `output`): what is cached and replayed by."""

    async def complete(self, request: dict[str, Any], body: str | None = None) -> Completion:
        """The call; `body` is the request as JSON text, when the caller has it already."""


def api_key(provider: str, offline: bool = False) -> str:
    variable = KEY_VARIABLES[provider]
    key = os.environ.get(variable)
    if not key and offline:
        return "replay-only-no-key"   # a replay-only run never calls the API
    if not key:
        raise ConfigError(f"the {provider} user backend needs an API key: set {variable} "
                          "(for an OpenAI-compatible server that needs none, any value will do)", field="user")
    secrets.register(key)     # an error body that quotes it must not carry it into the store
    return key


def redact(text: str, secret: str | None) -> str:
    # A placeholder key for a local server ("x", "none") is no secret, and replacing it would
    # mangle every word it occurs in; real keys are far longer.
    return text.replace(secret, "[redacted]") if secret and len(secret) >= 8 else text


class OpenAIProvider:
    name = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, timeout_s: float = 60.0,
                 temperature: float = 1.0, output: str = "json_schema",
                 http_client: Sender | None = None, offline: bool = False) -> None:
        """`http_client`: a sender with the one client's interface to post through instead of
        simrun's pool (tests answer through an in-process fake API): the same path, the same errors."""
        self.model, self.temperature, self.output = model, temperature, output
        self.key = api_key("openai", offline)
        # A server's address may carry user:password@, sent as Basic auth: an error body that
        # echoes the header must not carry it into the store.
        secrets.register_url(base_url or os.environ.get("OPENAI_BASE_URL"))
        self.client = LightClient(base_url, self.key, timeout_s, http_client=http_client)

    @property
    def forms(self) -> tuple[str, ...]:
        return OUTPUT_FORMS

    def request(self, prefix: str, messages: list[dict[str, str]], max_tokens: int, schema: dict[str, Any],
                form: str | None = None) -> dict[str, Any]:
        """The exact request body (no credentials): what is cached and replayed by."""
        body: dict[str, Any] = {
            "model": self.model, "max_tokens": max_tokens, "temperature": self.temperature,
            # The stable prefix goes first, so that automatic prefix caching can reuse it.
            "messages": [{"role": "system", "content": prefix}, *messages],
        }
        form = form or self.output
        if form == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "user_turn", "strict": True, "schema": schema}}
        elif form == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        elif form == "guided_json":
            body["guided_json"] = schema
        elif form == "tools":
            body["tools"] = [{"type": "function", "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION,
                                                               "parameters": schema}}]
            body["tool_choice"] = {"type": "function", "function": {"name": TOOL_NAME}}
        elif form != "prompt":
            raise ValueError(f"unknown output form {form!r}")
        return body

    async def complete(self, request: dict[str, Any], body: str | None = None) -> Completion:
        """The call; `body` is the request as JSON text, when the caller has it already."""
        raw = await self.client.post("/chat/completions", body if body is not None else canonical_json(request))
        return self.completion(_json_object(raw))

    @staticmethod
    def completion(response: dict[str, Any]) -> Completion:
        """What a chat completion's JSON says: the answer, the usage, whether it was cut off."""
        usage = _field(response, "usage", required=False)
        prompt = usage.get("prompt_tokens") or 0
        cached = _field(usage, "prompt_tokens_details", required=False).get("cached_tokens") or 0
        choices = response.get("choices") or [{}]
        message = _field(choices[0], "message")
        answer = message.get("content")
        calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        if calls:   # a function call's arguments are the answer, as JSON text
            answer = (calls[0].get("function") or {}).get("arguments")
        return Completion(
            answer=answer,
            usage=Usage(input_tokens=prompt - cached, cached_input_tokens=cached, cache_write_tokens=0,
                        output_tokens=usage.get("completion_tokens") or 0),
            response=response, usage_reported=_counted(usage, "prompt_tokens", "completion_tokens"),
            cut_off=choices[0].get("finish_reason") == "length")


class AnthropicProvider:
    name = "anthropic"
    forms = ("tools",)

    def __init__(self, model: str, *, base_url: str | None = None, timeout_s: float = 60.0,
                 temperature: float = 1.0, output: str = "tools", http_client: SdkClient | None = None,
                 offline: bool = False) -> None:
        import anthropic

        from simrun.simulator.users._bounded import bounded_client

        if output not in ("auto", "tools"):
            raise ConfigError(f"the anthropic backend answers through a tool only; {output!r} is an OpenAI-"
                              "compatible form (set run.user_output to auto or tools)", field="run.user_output")
        self.model, self.temperature, self.output = model, temperature, "tools"
        self.key = api_key("anthropic", offline)
        secrets.register_url(base_url or os.environ.get("ANTHROPIC_BASE_URL"))
        self.client = anthropic.AsyncAnthropic(
            api_key=self.key, base_url=base_url, max_retries=0, timeout=timeout_s,
            # (A client given is used as it is: tests answer through httpx2's MockTransport.)
            http_client=http_client or bounded_client(anthropic, base_url, timeout_s))

    def request(self, prefix: str, messages: list[dict[str, str]], max_tokens: int, schema: dict[str, Any],
                form: str | None = None) -> dict[str, Any]:
        return {
            "model": self.model, "max_tokens": max_tokens, "temperature": self.temperature,
            # The stable prefix is marked for caching; the conversation follows it.
            "system": [{"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}}],
            "messages": _alternating(messages),
            "tools": [{"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "input_schema": schema}],
            "tool_choice": {"type": "tool", "name": TOOL_NAME},
        }

    async def complete(self, request: dict[str, Any], body: str | None = None) -> Completion:
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
            usage=Usage(input_tokens=u.get("input_tokens") or 0,
                        cached_input_tokens=u.get("cache_read_input_tokens") or 0,
                        cache_write_tokens=u.get("cache_creation_input_tokens") or 0,
                        output_tokens=u.get("output_tokens") or 0),
            response=response, usage_reported=_counted(u, "input_tokens", "output_tokens"),
            cut_off=response.get("stop_reason") == "max_tokens")


class MalformedResponse(ValueError):
    """A 2xx answer that is not the JSON object the API documents: retried, like a 5xx."""


def _shown(raw: bytes) -> str:
    """The start of an API's answer, for an error: redacted whole, then cut."""
    return repr(secrets.cut(raw.decode("utf-8", "replace"), 200))


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        raise MalformedResponse(f"the API answered with a body that is not JSON: {_shown(raw)}") from None
    if not isinstance(value, dict):
        raise MalformedResponse(f"the API answered with JSON that is not an object: {_shown(raw)}")
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


def _alternating(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Anthropic wants user and assistant turns to alternate, starting with the user."""
    out: list[dict[str, str]] = []
    for message in messages:
        if out and out[-1]["role"] == message["role"]:
            out[-1] = {"role": message["role"], "content": out[-1]["content"] + "\n\n" + message["content"]}
        else:
            out.append(dict(message))
    return out


def provider_for(spec: str, **options: Any) -> Provider:
    kind, _, model = spec.partition(":")
    if kind not in KEY_VARIABLES or not model:
        raise ConfigError(f"unknown user backend {spec!r}; use scripted, openai:<model> or anthropic:<model>",
                          field="user")
    return (OpenAIProvider if kind == "openai" else AnthropicProvider)(model, **options)
