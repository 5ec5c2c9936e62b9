"""The openai SDK's own client for OpenAI-compatible calls: kept for comparison only.

simrun's product has one path for OpenAI-compatible servers (simulator/users/_wire.py: plain HTTP,
simrun's own errors). This is the SDK's path for the same calls, for `benchmarks/call_cpu.py
--client sdk` (what the light path saves) and for tests/simulator/users/test_wire.py (the light path
fails as the SDK does, so that retries cannot tell them apart). It posts the finished request
through the SDK's `post`, answered as bytes, on the SDK's aiohttp client (`openai.DefaultAioHttpClient`),
and raises the SDK's own exceptions, which `simrun.simulator.users._retry` classifies by their documented types.
"""

from __future__ import annotations

import os
from typing import Any

from simrun.simulator.users._providers import Completion, OpenAIProvider, _json_object


class SdkOpenAIProvider(OpenAIProvider):
    def __init__(self, model: str, *, base_url: str | None = None, timeout_s: float = 60.0,
                 http_client: Any = None, **options: Any) -> None:
        super().__init__(model, base_url=base_url, timeout_s=timeout_s, **options)
        import openai

        self.client = openai.AsyncOpenAI(  # type: ignore[assignment]
            api_key=self.key, base_url=base_url or os.environ.get("OPENAI_BASE_URL"), max_retries=0,
            timeout=timeout_s, http_client=http_client or openai.DefaultAioHttpClient(timeout=timeout_s))

    async def complete(self, request: dict[str, Any], body: str | None = None) -> Completion:
        # The SDK's `post` with the request, answered as bytes: without `create`'s walk over the
        # parameters' type hints, or response models built only to be dumped again.
        raw = await self.client.post("/chat/completions", cast_to=bytes, body=request)  # type: ignore[call-arg]
        return self.completion(_json_object(raw))
