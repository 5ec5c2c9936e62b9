"""Where a model call's CPU goes: the harness's CPU per model call, by part, at a fast model.

A model-played user (simrun's light path for OpenAI-compatible servers, the product's one, or
with `--client sdk` the openai SDK's own client, kept in benchmarks/sdk_client.py for this
comparison) talks to the fake API in a process of its own, answering every call after `--latency`
(50 ms), with `--in-flight` conversations at once against the reference runtime over HTTP (a
process of its own, started by simrun). Each process's CPU is read apart, so the harness's
figure is the harness's only: this process's main thread (the event loop) and its writer thread
(DuckDB), the runtime's server, and the fake API.

The run is made twice: once plain, for the CPU per model call and the throughput; once under
cProfile with the main thread's CPU clock as its timer, for the parts (a profiler slows every
function call, so the parts are given as shares of the profiled main thread, and as those shares
of the plain run's main-thread CPU):

- prompt: building the request from the conversation (rendering the runtime's reply, the
  request body, its key), and reading the model's answer as a user turn;
- model client: the HTTP call to the model API and reading its answer (the light path or the SDK);
- ledger, limiter, retry: holding the worst case, booking the rate window, the retry policy, settling;
- runtime client: the requests to the runtime (start, turn, state, audit, close) and checking them;
- checks: the per-turn checks (the user's turn, whether the goal is reached) and the scoring at the end;
- the rest: the event loop, the runner, the conversation loop.
The store's encoding and writes run on the writer thread, reported apart.

    .venv/bin/python benchmarks/call_cpu.py [--latency 0.05] [--in-flight 64] [--waves 5] [--client light|sdk]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OPENAI_API_KEY", "benchmark-key-not-sent-anywhere")

from benchmarks.sdk_client import SdkOpenAIProvider  # noqa: E402
from benchmarks.throughput import MeteredRuntime, cpu_seconds, start_fake_api  # noqa: E402
from simrun._settings import load_budgets  # noqa: E402
from simrun.scoring.store._database import Store  # noqa: E402
from simrun.simulator import _eventloop as eventloop  # noqa: E402
from simrun.simulator import load_dataset, run_matrix  # noqa: E402
from simrun.simulator._ledger import Ledger  # noqa: E402
from simrun.simulator.users._model import ModelUser  # noqa: E402
from simrun.simulator.users._providers import OpenAIProvider  # noqa: E402

SPEC = "openai:gpt-4.1-mini"

# Each part: functions whose cumulative time counts for it, less those of the parts it contains.
PARTS = {
    "prompt": (["simulator/users/_model.py:next_turn"], ["simulator/users/_model.py:paid_call"]),
    "model client": (["simulator/users/_providers.py:complete", "benchmarks/sdk_client.py:complete"], []),
    "ledger, limiter, retry": (["simulator/users/_model.py:paid_call"],
                               ["simulator/users/_providers.py:complete", "benchmarks/sdk_client.py:complete"]),
    "runtime client": ([f"simulator/adapters/_http.py:{op}" for op in ("start", "turn", "state", "audit", "close")],
                       []),
    "checks": (["scoring/checks/_simulated_user.py:user_turn_fault", "simulator/_conversation.py:_reached",
                "simulator/_conversation.py:_stop_reason", "scoring/checks/_scorer.py:score"], []),
}


def cumulative(stats: pstats.Stats, names: list[str]) -> float:
    total = 0.0
    for (path, _, function), (_, _, _, cum, _) in stats.stats.items():
        if any(path.endswith(name.split(":")[0]) and function == name.split(":")[1] for name in names):
            total += cum
    return total


async def one_run(base_url: str, in_flight: int, repetitions: int, api_pid: int, client: str,
                  profile: cProfile.Profile | None = None) -> dict:
    dataset = load_dataset(ROOT / "personas", ROOT / "goals")
    ledger = Ledger(Decimal(1000))
    price = load_budgets(ROOT / "budgets.toml").prices[SPEC]
    provider = (SdkOpenAIProvider if client == "sdk" else OpenAIProvider)("gpt-4.1-mini", base_url=base_url,
                                                                          timeout_s=60)
    user = ModelUser(SPEC, provider, price, ledger)
    runtime = MeteredRuntime(command=[sys.executable, "-m", "simrun.examples.tripdesk.server", "--port", "{port}"],
                             concurrency=in_flight)
    await runtime.health()
    with Store(":memory:") as store:
        api, process, main = cpu_seconds(api_pid), time.process_time(), time.thread_time()
        started = time.perf_counter()
        if profile is not None:
            profile.enable()
        result = await run_matrix(dataset, runtime, user, store, repetitions=repetitions, seed=1,
                                  budget=ledger.budget, concurrency=in_flight, ledger=ledger)
        if profile is not None:
            profile.disable()
        wall = time.perf_counter() - started
        main, process, api = time.thread_time() - main, time.process_time() - process, cpu_seconds(api_pid) - api
        (calls,) = store.con.execute("SELECT count(*) FROM model_calls").fetchone()
    return {"conversations": result.conversations, "calls": calls, "wall": wall, "main": main,
            "writer": process - main, "runtime": runtime.cpu_s, "api": api}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--waves", type=int, default=5, help="conversations per slot")
    parser.add_argument("--client", choices=("light", "sdk"), default="light",
                        help="the model client: simrun's light path (the product's one), or the openai SDK's "
                             "(benchmarks/sdk_client.py, for comparison)")
    args = parser.parse_args()
    repetitions = max(1, -(-args.in_flight * args.waves // 70))
    import pandas  # noqa: F401  (the store's first write imports it: half a second once per run, not per call)
    fake, base_url = start_fake_api(args.latency)
    try:
        plain = eventloop.run(one_run(base_url, args.in_flight, repetitions, fake.pid, args.client))
        profile = cProfile.Profile(time.thread_time)
        eventloop.run(one_run(base_url, args.in_flight, repetitions, fake.pid, args.client, profile))
        if os.environ.get("CALL_CPU_DUMP"):
            profile.dump_stats(os.environ["CALL_CPU_DUMP"])
    finally:
        fake.terminate()
        fake.wait()
    stats = pstats.Stats(profile)
    total = stats.total_tt
    per_call = lambda seconds: 1000 * seconds / plain["calls"]   # noqa: E731
    print(f"model latency {args.latency * 1000:.0f} ms, {args.in_flight} in flight, client {args.client}: "
          f"{plain['conversations']} conversations, {plain['calls']} model calls in {plain['wall']:.1f} s; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"CPU ms per model call: harness {per_call(plain['main'] + plain['writer']):.2f} (event loop "
          f"{per_call(plain['main']):.2f}, writer thread {per_call(plain['writer']):.2f}); runtime server "
          f"{per_call(plain['runtime']):.2f}; fake API {per_call(plain['api']):.2f}")
    shares = {}
    for part, (counted, less) in PARTS.items():
        shares[part] = (cumulative(stats, counted) - cumulative(stats, less)) / total
    shares["the rest (event loop, runner, conversation loop)"] = 1 - sum(shares.values())
    print("the event loop's CPU by part (shares under cProfile; ms per call as those shares of the plain run):")
    for part, share in shares.items():
        print(f"  {part:<50}{share:>7.1%}{per_call(plain['main'] * share):>8.2f} ms")


if __name__ == "__main__":
    main()
