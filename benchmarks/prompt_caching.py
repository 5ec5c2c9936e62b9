"""Prompt caching: billed input tokens per conversation, with and without the provider's cache.

The model-played user puts a stable prefix (rules, persona, goal) first, so that from a
conversation's second call on the provider can read it from its prompt cache. This runs the
demo matrix with an OpenAI-played user against a local fake of the API that reports cached
tokens as prefix caching does (tests/fixtures/model_api.py; tokens = characters / 4), once with
the cache and once without, and prints the input tokens billed at the full rate, the tokens read
from the cache, and the cost per conversation at budgets.toml's price.

    .venv/bin/python benchmarks/prompt_caching.py [--repetitions N] [--backend openai|anthropic]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OPENAI_API_KEY", "benchmark-key-not-sent-anywhere")
os.environ.setdefault("ANTHROPIC_API_KEY", "benchmark-key-not-sent-anywhere")

import httpx  # noqa: E402
import httpx2  # noqa: E402

from simrun._settings import load_budgets  # noqa: E402
from simrun.examples.tripdesk import TripDesk  # noqa: E402
from simrun.scoring.store._database import Store  # noqa: E402
from simrun.simulator import PythonRuntime, load_dataset, run_matrix  # noqa: E402
from simrun.simulator._ledger import Ledger  # noqa: E402
from simrun.simulator.users._model import ModelUser  # noqa: E402
from simrun.simulator.users._providers import AnthropicProvider, OpenAIProvider  # noqa: E402
from tests.fixtures.model_api import FakeModelAPI  # noqa: E402

SPECS = {"openai": ("openai:gpt-4.1-mini", OpenAIProvider, httpx),
         "anthropic": ("anthropic:claude-haiku-4-5", AnthropicProvider, httpx2)}


def measure(backend: str, cache: bool, repetitions: int) -> tuple[float, float, Decimal, int]:
    spec, provider_cls, http = SPECS[backend]
    price = load_budgets(ROOT / "budgets.toml").prices[spec]
    api = FakeModelAPI(cache=cache)
    ledger = Ledger(Decimal(100))
    user = ModelUser(spec, provider_cls("m", http_client=api.client(http)), price, ledger)
    dataset = load_dataset(ROOT / "personas", ROOT / "goals")
    with Store(":memory:") as store:
        run_id = asyncio.run(run_matrix(dataset, PythonRuntime(TripDesk()), user, store, repetitions=repetitions,
                                        seed=1, budget=ledger.budget, ledger=ledger)).run_id
        full, cached, n = store.con.execute(
            "SELECT sum(input_tokens + cache_write_tokens), sum(cached_input_tokens), "
            "count(DISTINCT conversation_id) FROM model_calls WHERE run_id = ?", [run_id]).fetchone()
    return full / n, cached / n, ledger.spent / n, n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=2)
    parser.add_argument("--backend", choices=list(SPECS), default="openai")
    args = parser.parse_args()
    rows = {cache: measure(args.backend, cache, args.repetitions) for cache in (False, True)}
    print(f"{args.backend}, {rows[True][3]} conversations of the demo matrix")
    print(f"{'':22}{'full-rate input':>16}{'read from cache':>17}{'cost/conversation':>19}")
    for cache in (False, True):
        full, cached, per, _ = rows[cache]
        label = "with caching" if cache else "without caching"
        print(f"{label:22}{full:16.0f}{cached:17.0f}{'$' + format(per, '.6f'):>19}")
    saved = 1 - float(rows[True][2] / rows[False][2])
    print(f"caching bills {rows[True][0] / rows[False][0]:.0%} of the full-rate input tokens, "
          f"and saves {saved:.0%} of the cost")


if __name__ == "__main__":
    main()
