"""Throughput: conversations per hour as a fraction of the latency-bound ideal.

A model-played user (the real openai SDK) talks to a local fake of the API that takes a fixed
latency per answer (its own process), and the reference runtime runs over HTTP (its own process,
started by simrun). With C conversations in flight, each making T model calls of latency L, the
ideal is C x 3600 / (T x L) conversations an hour; the harness's share is what is lost to it.

    .venv/bin/python benchmarks/throughput.py [--latency 1.0] [--concurrency 16 64 256]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OPENAI_API_KEY", "benchmark-key-not-sent-anywhere")

import httpx  # noqa: E402

from scoring.store import Store  # noqa: E402
from simulator import load_dataset, run_matrix  # noqa: E402
from simulator.adapters.http import HttpRuntime  # noqa: E402
from simulator.adapters.process import free_port  # noqa: E402
from simulator.config import load_budgets  # noqa: E402
from simulator.ledger import Ledger  # noqa: E402
from simulator.users.model import ModelUser  # noqa: E402
from simulator.users.providers import OpenAIProvider  # noqa: E402

SPEC = "openai:gpt-4.1-mini"


def start_fake_api(latency: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fixtures" / "model_api.py"), "--port", str(port),
                             "--latency", str(latency)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=0.2)
            return proc, f"http://127.0.0.1:{port}/v1"
        except httpx.TransportError:
            time.sleep(0.05)
    raise SystemExit("the fake API did not start")


async def measure(concurrency: int, base_url: str, latency: float, repetitions: int) -> tuple[float, float, int]:
    dataset = load_dataset(ROOT / "personas", ROOT / "goals")
    ledger = Ledger(Decimal(1000))
    price = load_budgets(ROOT / "budgets.toml").prices[SPEC]
    provider = OpenAIProvider("gpt-4.1-mini", base_url=base_url, timeout_s=60)
    user = ModelUser(SPEC, provider, price, ledger)
    runtime = HttpRuntime(command=[sys.executable, "-m", "tripdesk.server", "--port", "{port}"],
                          concurrency=concurrency)
    await runtime.health()
    try:
        with Store(":memory:") as store:
            started = time.perf_counter()
            result = await run_matrix(dataset, runtime, user, store, repetitions=repetitions, seed=1,
                                      budget=ledger.budget, concurrency=concurrency, ledger=ledger)
            wall = time.perf_counter() - started
            calls = store.con.execute("SELECT count(*) FROM model_calls").fetchone()[0]
    finally:
        await provider.pool.close()
    per_conversation = calls / result.conversations
    actual = result.conversations / wall * 3600
    ideal = concurrency * 3600 / (per_conversation * latency)
    return actual, ideal, result.conversations


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64, 256])
    args = parser.parse_args()
    fake, base_url = start_fake_api(args.latency)
    try:
        print(f"model latency {args.latency} s per call; reference runtime over HTTP")
        print(f"{'concurrency':>12}{'conversations':>15}{'per hour':>12}{'ideal':>12}{'of ideal':>10}")
        for c in args.concurrency:
            # Enough conversations that start and end are a small part of the run.
            repetitions = max(2, -(-c * 6 // 70))
            actual, ideal, n = asyncio.run(measure(c, base_url, args.latency, repetitions))
            print(f"{c:>12}{n:>15}{actual:>12,.0f}{ideal:>12,.0f}{actual / ideal:>10.1%}")
    finally:
        fake.terminate()
        fake.wait()


if __name__ == "__main__":
    main()
