"""Throughput: conversations per hour as a fraction of the latency-bound ideal.

A model-played user (the real openai SDK) talks to a local fake of the API that takes a fixed
latency per answer (its own process), and the reference runtime runs over HTTP (its own process,
started by simrun). With C conversations in flight, each making T model calls of latency L, the
ideal is C x 3600 / (T x L) conversations an hour; the harness's share is what is lost to it.

Columns: "of ideal" is that steady-state ratio over the whole run, ramp-up and tail included;
"of makespan" compares the wall time with the same conversations scheduled on C slots with
every model call taking exactly L and nothing else taking any time, so it counts only what the
harness, the runtime and the fake add. "call ms" and "turn ms" are the mean model call (L plus
overhead) and the mean runtime turn (turn and state requests); CPU is per model call, by process.

    .venv/bin/python benchmarks/throughput.py [--latency 1.0] [--concurrency 16 64 256] [--waves 20]
"""

from __future__ import annotations

import argparse
import heapq
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

from simrun._settings import load_budgets  # noqa: E402
from simrun.scoring.store._database import Store  # noqa: E402
from simrun.simulator import _eventloop as eventloop  # noqa: E402
from simrun.simulator import load_dataset, run_matrix  # noqa: E402
from simrun.simulator._ledger import Ledger  # noqa: E402
from simrun.simulator.adapters._http import HttpRuntime  # noqa: E402
from simrun.simulator.adapters._process import free_port  # noqa: E402
from simrun.simulator.users._model import ModelUser  # noqa: E402
from simrun.simulator.users._providers import OpenAIProvider  # noqa: E402

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


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(group: int) -> float:
    """CPU time of every live process in a process group: the server runs under simrun's
    supervisor (simulator/adapters/_supervisor.py), a child of it in the same group."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


class MeteredRuntime(HttpRuntime):
    """The HTTP runtime, reading its server's CPU time just before simrun stops it."""

    cpu_s = 0.0

    async def aclose(self) -> None:
        if self.process is not None and self.process.alive:
            self.cpu_s = group_cpu_seconds(self.process.proc.pid)
        await super().aclose()


def ideal_makespan(calls_in_start_order: list[int], concurrency: int, latency: float) -> float:
    """How long the same conversations take if every model call takes exactly `latency` and
    nothing else takes any time: each starts on the first free slot, in the order they started.
    This is the ideal with the run's own ramp-up and tail, which the steady-state formula leaves out."""
    slots = [0.0] * concurrency
    for calls in calls_in_start_order:
        heapq.heapreplace(slots, slots[0] + calls * latency)
    return max(slots)


async def measure(concurrency: int, base_url: str, latency: float, repetitions: int, api_pid: int) -> dict:
    dataset = load_dataset(ROOT / "personas", ROOT / "goals")
    ledger = Ledger(Decimal(1000))
    price = load_budgets(ROOT / "budgets.toml").prices[SPEC]
    provider = OpenAIProvider("gpt-4.1-mini", base_url=base_url, timeout_s=60)
    user = ModelUser(SPEC, provider, price, ledger)
    runtime = MeteredRuntime(command=[sys.executable, "-m", "simrun.examples.tripdesk.server", "--port", "{port}"],
                             concurrency=concurrency)
    await runtime.health()
    with Store(":memory:") as store:   # run_matrix closes the runtime and the user's clients
        api_cpu, own_cpu, started = cpu_seconds(api_pid), time.process_time(), time.perf_counter()
        result = await run_matrix(dataset, runtime, user, store, repetitions=repetitions, seed=1,
                                  budget=ledger.budget, concurrency=concurrency, ledger=ledger)
        wall = time.perf_counter() - started
        own_cpu, api_cpu = time.process_time() - own_cpu, cpu_seconds(api_pid) - api_cpu
        calls = [n for (n,) in store.con.execute(
            "SELECT count(m.conversation_id) FROM conversations c LEFT JOIN model_calls m "
            "USING (run_id, conversation_id) GROUP BY c.conversation_id, c.started_at "
            "ORDER BY c.started_at").fetchall()]
        model_ms, runtime_ms = store.con.execute(
            "SELECT (SELECT avg(latency_ms) FROM model_calls), (SELECT avg(latency_ms) FROM turns)").fetchone()
    per_conversation = sum(calls) / len(calls)
    return {"conversations": result.conversations, "wall": wall,
            "actual": result.conversations / wall * 3600,
            "ideal": concurrency * 3600 / (per_conversation * latency),
            "model_ms": model_ms, "runtime_ms": runtime_ms, "makespan": ideal_makespan(calls, concurrency, latency),
            "cpu_ms": {name: 1000 * seconds / sum(calls) for name, seconds in
                       (("harness", own_cpu), ("runtime", runtime.cpu_s), ("fake API", api_cpu))}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--waves", type=int, default=20,
                        help="conversations per slot: enough that ramp-up and tail are a small part")
    args = parser.parse_args()
    # The store's first write imports pandas: half a second of CPU once per run, on the writer
    # thread and holding the GIL, which the first figure would otherwise charge to its model
    # calls (and its event loop would wait through). call_cpu.py and harness.py do the same.
    import pandas  # noqa: F401
    fake, base_url = start_fake_api(args.latency)
    try:
        print(f"model latency {args.latency} s per call; reference runtime over HTTP; "
              f"{args.waves} conversations per slot")
        print(f"{'concurrency':>12}{'conversations':>15}{'per hour':>11}{'ideal':>11}{'of ideal':>10}"
              f"{'of makespan':>13}{'call ms':>9}{'turn ms':>9}   CPU ms per model call: harness / runtime / fake API")
        for c in args.concurrency:
            repetitions = max(1, -(-c * args.waves // 70))
            m = eventloop.run(measure(c, base_url, args.latency, repetitions, fake.pid))
            cpu = " / ".join(f"{v:.2f}" for v in m["cpu_ms"].values())
            print(f"{c:>12}{m['conversations']:>15}{m['actual']:>11,.0f}{m['ideal']:>11,.0f}"
                  f"{m['actual'] / m['ideal']:>10.1%}{m['makespan'] / m['wall']:>13.1%}{m['model_ms']:>9.0f}"
                  f"{m['runtime_ms']:>9.1f}   {cpu}")
    finally:
        fake.terminate()
        fake.wait()


if __name__ == "__main__":
    main()
