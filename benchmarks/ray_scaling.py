"""Ray workers against one in-process run, in one sitting: harness turns/s, and throughput where
one process is the limit.

**Harness** (`--part harness`): the bundled demo matrix, the scripted user and the in-process
reference runtime (TripDesk in each worker), every conversation stored in DuckDB by the driver,
as `simrun` runs it. Both executors run the same matrix alternately, `--rounds` times each. The
figure is turns/s from the first conversation stored to the last (the steady rate: the Ray
workers' start, processes, imports and runtime, is printed apart, since a run pays it once
whatever its size), with the CPU each process spent per turn over the same stretch.

**Throughput** (`--part throughput`): a model-played user (the real openai SDK) talks to the
local fake of the API (its own process), which answers every call after `--latency` (50 ms):
one simrun process is CPU-bound long before it has that many calls in flight (a few ms of
CPU per model call: benchmarks/README.md). The reference runtime runs over HTTP, started by
simrun: one server in-process, one per worker on Ray. Both keep `--in-flight` conversations in
flight (on Ray, shared out among the workers), so both have the same latency-bound ideal,
C x 3600 / (T x L) conversations an hour; each figure comes with its share of it, and of the
makespan of the same conversations on C slots at exactly L per call (as benchmarks/throughput.py),
over the time from the first conversation's start to the last one's end.

The cluster is local, started once on this machine's cores before the first round.

    .venv/bin/python benchmarks/ray_scaling.py [--part both] [--rounds 5] [--workers 2]
        [--repetitions 30] [--latency 0.05] [--in-flight 64] [--waves 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OPENAI_API_KEY", "benchmark-key-not-sent-anywhere")

from benchmarks.throughput import cpu_seconds, ideal_makespan, start_fake_api  # noqa: E402
from simrun.scoring.dataset._goal_sql import forget_answers  # noqa: E402
from simrun.scoring.store._database import Store  # noqa: E402
from simrun.simulator import _eventloop as eventloop  # noqa: E402
from simrun.simulator import execute, load_plan  # noqa: E402

SPEC = "openai:gpt-4.1-mini"
CPU_EVERY = 100       # conversations between two reads of the processes' CPU


def harness_run(plan, executor, folder: Path) -> dict:
    """Turns/s between the first and the last conversation stored, the time to the first, and
    the CPU per turn: this process's, and the workers' together. The CPU is read every
    CPU_EVERY conversations at most (reading it costs this process a few hundred microseconds: read at
    every conversation, it was a tenth of the driver's CPU), over the turns between the reads."""
    forget_answers()      # the same seeds give the same stores: each run starts cold
    stamps: list[tuple[float, int]] = []
    reads: list[tuple[int, list[float]]] = []     # (turns stored so far, CPU seconds per process)
    every = max(1, min(CPU_EVERY, plan.conversations // 10))

    def stored(conversation) -> None:
        stamps.append((time.perf_counter(), len(conversation.transcript.turns)))
        if (len(stamps) - 1) % every == 0:
            reads.append((sum(n for _, n in stamps),
                          [time.process_time(), *(cpu_seconds(p) for p in getattr(executor, "pids", []))]))

    with Store(folder / f"{time.monotonic_ns()}.duckdb") as store:
        started = time.perf_counter()
        eventloop.run(execute(plan, store, executor=executor, resume=False, on_conversation=stored))
    turns = sum(n for _, n in stamps[1:])
    (first_turns, first), (last_turns, last) = reads[0], reads[-1]
    spent = [b - a for a, b in zip(first, last)]
    per_turn = 1000 / (last_turns - first_turns)
    return {"steady": turns / (stamps[-1][0] - stamps[0][0]), "first_s": stamps[0][0] - started,
            "cpu_ms": (per_turn * spent[0], per_turn * sum(spent[1:]))}


def harness(args, folder: Path, RayExecutor) -> None:
    plan = load_plan(config=ROOT / "simrun.toml", budgets=ROOT / "budgets.toml", repetitions=args.repetitions)
    runs: dict[str, list[dict]] = {"in-process": [], "ray": []}
    for _ in range(args.rounds):
        runs["in-process"].append(harness_run(plan, None, folder))
        runs["ray"].append(harness_run(plan, RayExecutor(plan, workers=args.workers), folder))
    print(f"harness: {plan.conversations} conversations a run, concurrency {plan.concurrency} per process, "
          f"{args.workers} Ray workers; load average now {os.getloadavg()[0]:.1f}")
    for name, measured in runs.items():
        steady = [r["steady"] for r in measured]
        own, workers = (statistics.median(r["cpu_ms"][i] for r in measured) for i in (0, 1))
        print(f"{name:>11}: turns/s {', '.join(f'{s:,.0f}' for s in steady)} (median {statistics.median(steady):,.0f});"
              f" first conversation after {statistics.median(r['first_s'] for r in measured):.2f} s;"
              f" CPU ms per turn: this process {own:.2f}" + (f", the workers {workers:.2f}" if workers else ""))
    ratio = (statistics.median(r["steady"] for r in runs["ray"])
             / statistics.median(r["steady"] for r in runs["in-process"]))
    print(f"harness ratio, Ray / in-process (medians): {ratio:.2f}x")


def project(folder: Path, concurrency: int, repetitions: int) -> Path:
    """The demo's personas and goals against TripDesk over HTTP; no rate limit (the fake has
    none) and no output probe."""
    folder.mkdir()
    (folder / "simrun.toml").write_text(f"""
[run]
personas = "{ROOT / 'personas'}"
goals = "{ROOT / 'goals'}"
repetitions = {repetitions}
concurrency = {concurrency}
user = "{SPEC}"
user_output = "json_schema"

[runtime]
transport = "http"
command = "{sys.executable} -m simrun.examples.tripdesk.server --port {{port}}"
""")
    (folder / "budgets.toml").write_text(f"""
[budget]
default = "1000usd"

[prices."{SPEC}"]
input_per_mtok = 0.40
cached_input_per_mtok = 0.10
output_per_mtok = 1.60
""")
    return folder / "simrun.toml"


def throughput_run(config: Path, executor_for, in_flight: int, latency: float, db: Path) -> dict:
    plan = load_plan(config=config, budgets=config.with_name("budgets.toml"))
    executor = executor_for(plan)
    with Store(db) as store:
        result = eventloop.run(execute(plan, store, executor=executor, resume=False))
        # From the first conversation's start to the last one's end: what starting the runtime
        # (and on Ray the workers) takes is left out of both, as benchmarks/throughput.py does.
        (wall,) = store.con.execute(
            "SELECT epoch(max(started_at + to_milliseconds(duration_ms)) - min(started_at)) FROM conversations "
            "WHERE run_id = ?", [result.run_id]).fetchone()
        calls = [n for (n,) in store.con.execute(
            "SELECT count(m.conversation_id) FROM conversations c LEFT JOIN model_calls m "
            "USING (run_id, conversation_id) WHERE c.run_id = ? GROUP BY c.conversation_id, c.started_at "
            "ORDER BY c.started_at", [result.run_id]).fetchall()]
        (call_ms,) = store.con.execute("SELECT avg(latency_ms) FROM model_calls WHERE run_id = ?",
                                       [result.run_id]).fetchone()
    actual = result.conversations / wall * 3600
    ideal = in_flight * 3600 / (sum(calls) / len(calls) * latency)
    workers = getattr(executor, "workers", None)
    draws = (f"{executor.draws / workers / wall:.1f}" if getattr(executor, "draws", None) is not None
             else "") if workers else ""
    return {"actual": actual, "ideal": ideal, "of_ideal": actual / ideal,
            "of_makespan": ideal_makespan(calls, in_flight, latency) / wall, "call_ms": call_ms, "draws": draws}


def throughput(args, folder: Path, RayExecutor) -> None:
    repetitions = max(1, -(-args.in_flight * args.waves // 70))
    fake, base_url = start_fake_api(args.latency)
    os.environ["OPENAI_BASE_URL"] = base_url
    try:
        local = project(folder / "local", args.in_flight, repetitions)
        spread = project(folder / "ray", -(-args.in_flight // args.workers), repetitions)   # per worker
        executors = {"in-process": (local, lambda plan: None),
                     f"Ray, {args.workers} workers": (spread, lambda plan: RayExecutor(plan, workers=args.workers))}
        print(f"throughput: model latency {args.latency * 1000:.0f} ms per call; {args.in_flight} conversations in "
              f"flight; {repetitions * 70} conversations a run")
        print(f"{'':>24}{'per hour':>11}{'ideal':>11}{'of ideal':>10}{'of makespan':>13}{'call ms':>9}"
              "   budget actor calls per worker per second")
        shares: dict[str, list[float]] = {name: [] for name in executors}
        for round_ in range(args.rounds):
            for name, (config, executor_for) in executors.items():
                m = throughput_run(config, executor_for, args.in_flight, args.latency,
                                   folder / f"{round_}-{len(shares[name])}-{name[:3]}.duckdb")
                shares[name].append(m["of_ideal"])
                print(f"{name:>24}{m['actual']:>11,.0f}{m['ideal']:>11,.0f}{m['of_ideal']:>10.1%}"
                      f"{m['of_makespan']:>13.1%}{m['call_ms']:>9.0f}   {m['draws']}", flush=True)
        medians = {name: statistics.median(s) for name, s in shares.items()}
        (local_share, ray_share) = medians.values()
        print(f"throughput, share of ideal (medians): in-process {local_share:.1%}, Ray {ray_share:.1%} "
              f"({ray_share / local_share:.2f}x); load average now {os.getloadavg()[0]:.1f}")
    finally:
        fake.terminate()
        fake.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=("harness", "throughput", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repetitions", type=int, default=30, help="harness: 2,100 conversations a run")
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--in-flight", type=int, default=64, help="throughput: conversations in flight, in all")
    parser.add_argument("--waves", type=int, default=10, help="throughput: conversations per slot")
    parser.add_argument("--ray-address", default="auto", help="auto, local (a cluster of its own) or HOST:PORT")
    args = parser.parse_args()
    from simrun.simulator.cluster._connect import connect
    from simrun.simulator.cluster._executor import RayExecutor

    print(f"{connect(args.ray_address)}; load average {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.part in ("harness", "both"):
            harness(args, Path(tmp), RayExecutor)
        if args.part in ("throughput", "both"):
            throughput(args, Path(tmp), RayExecutor)


if __name__ == "__main__":
    main()
