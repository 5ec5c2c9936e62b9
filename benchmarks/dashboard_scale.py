"""Dashboard at scale: size and build time of reports/index.html over 1,000 synthetic runs.

The store is filled by SQL, shaped like a team's history of demo-sized runs: 7 personas x 10
goals x 5 repetitions per run (350 conversations, every class checked in each, 1% set aside as
simulator_error and 0.5% runtime_error), three datasets one after the other (a goal edited, then
a goal added), a scripted and a model-played user, every run labelled, a runtime version and a
commit per run, class rates that drift and now and then regress, and a report file beside the
page for every run (so every point is a link).

The page is then built as every run builds it: the first build judges every run against the
one before it with the gate (a verdict is remembered by both runs' scores, in the database and
beside the page, so it is judged once); the builds after it, including the one each new run
makes, judge only what is new. Last, the database is read as a CI artifact would be: read-only,
into a fresh folder, with its verdicts read from it.

    .venv/bin/python benchmarks/dashboard_scale.py [--runs 1000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simrun._settings import Budgets  # noqa: E402
from simrun.scoring.checks._scorer import ALL_CLASSES, kind_of  # noqa: E402
from simrun.scoring.pages import _dashboard as dashboard  # noqa: E402
from simrun.scoring.store._database import Store, reading  # noqa: E402
from simrun.scoring.store._duck import insert_rows  # noqa: E402

PERSONAS, GOALS, REPETITIONS = 7, 10, 5
START = dt.datetime(2026, 1, 1)


def dataset(group: int) -> tuple[str, dict[str, str], int]:
    """(hash, items, goals) of the three datasets: the demo's shape, then a goal edited, then one added."""
    goals = GOALS + (group == 2)
    items = {f"persona:p{p}": f"{p:016x}" for p in range(PERSONAS)}
    items |= {f"goal:g{g}": f"{g + (100 if group >= 1 and g == 4 else 0):016x}" for g in range(goals)}
    return hashlib.sha256(repr(sorted(items.items())).encode()).hexdigest()[:16], items, goals


def fill(store: Store, runs: int) -> int:
    rows = []
    for i in range(runs):
        group = 0 if i < 0.4 * runs else 1 if i < 0.8 * runs else 2
        dataset_hash, items, goals = dataset(group)
        user = "openai:gpt-4.1-mini" if i % 3 == 0 else "scripted"
        started = START + dt.timedelta(hours=6 * i)
        labels = [f"nightly-{started:%m-%d}"] + ([f"release-1.{i // 50}"] if i % 50 == 49 else [])
        # Every progress class has a base rate that drifts; every 40th run regresses dead_end and
        # loop; a guarantee breaks in about one run in twelve.
        regressed = i % 40 == 39
        rows.append([f"r{started:%Y%m%d-%H%M%S}-{i:06x}", started, started + dt.timedelta(minutes=5), "finished",
                     "{}", dataset_hash, json.dumps(items), "2", "0.1", user, "bench", 1, REPETITIONS,
                     5, 2.4 + (i % 7) * 0.05 if user != "scripted" else 0, json.dumps(labels), f"1.{i // 50}.{i % 5}",
                     hashlib.sha1(str(i).encode()).hexdigest(), "main", goals, int(regressed), i])
    insert_rows(store.con, "runs (run_id, started_at, finished_at, status, config, dataset_hash, dataset, "
                "scorer_version, simrun_version, user_backend, runtime, seed, repetitions, budget_usd, spent_usd, "
                "labels, runtime_version, git_commit, git_branch)", [r[:19] for r in rows])
    store.con.execute("CREATE TEMP TABLE bench (run_id VARCHAR, goals INTEGER, regressed INTEGER, i INTEGER)")
    insert_rows(store.con, "bench", [[r[0], r[19], r[20], r[21]] for r in rows])
    store.con.execute(f"""
        INSERT INTO conversations (run_id, conversation_id, persona, goal, repetition, seed, end_reason,
                                   goal_reached, goal_detail, turns, cost_usd, duration_ms, started_at)
        SELECT b.run_id, 'p' || p || '/g' || g || '/' || k, 'p' || p, 'g' || g, k, p * 100 + g,
               CASE WHEN hash(b.run_id, p, g, k, 'crash') % 1000 < 5 THEN 'runtime_error'
                    WHEN hash(b.run_id, p, g, k, 'user') % 1000 < 10 THEN 'simulator_error'
                    WHEN hash(b.run_id, p, g, k) % 100 < 6 THEN 'turn_cap' ELSE 'goal_reached' END,
               NOT (hash(b.run_id, p, g, k, 'crash') % 1000 < 5 OR hash(b.run_id, p, g, k) % 100 < 6),
               'synthetic', 4, 0, 900.0, now()
        FROM bench b, range({PERSONAS}) t(p), range({GOALS + 1}) u(g), range({REPETITIONS}) v(k)
        WHERE g < b.goals""")
    classes = ", ".join(f"('{c}', '{kind_of(c)}', {n})" for n, c in enumerate(ALL_CLASSES))
    store.con.execute(f"""
        INSERT INTO checks (run_id, conversation_id, class, kind, status, occurrences, checked_turns,
                            unverifiable_turns)
        SELECT c.run_id, c.conversation_id, x.cls, x.kind,
               CASE WHEN x.kind = 'guarantee' AND hash(c.conversation_id, c.run_id, x.cls) % 100000 < 3
                         THEN 'fired'
                    WHEN x.kind <> 'guarantee' AND hash(c.conversation_id, c.run_id, x.cls) % 10000
                         < 100 + 60 * x.n + 40 * (b.i % 25)
                           + CASE WHEN b.regressed = 1 AND x.cls IN ('dead_end', 'loop') THEN 1500 ELSE 0 END
                         THEN 'fired'
                    WHEN hash(c.conversation_id, x.cls) % 100 = 0 THEN 'unverifiable' ELSE 'clean' END,
               1, 4, 0
        FROM conversations c JOIN bench b USING (run_id), (VALUES {classes}) x(cls, kind, n)""")
    return store.con.execute("SELECT count(*) FROM conversations").fetchone()[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    settings = Budgets().gate
    with tempfile.TemporaryDirectory() as tmp:
        reports = Path(tmp) / "reports"
        reports.mkdir()
        with Store(Path(tmp) / "history.duckdb") as store:
            t0 = time.perf_counter()
            conversations = fill(store, args.runs)
            filled = time.perf_counter() - t0
            for (run_id,) in store.con.execute("SELECT run_id FROM runs").fetchall():
                (reports / f"{run_id}.html").write_text("<!doctype html><title>simrun report</title>")
            out = reports / "index.html"
            t1 = time.perf_counter()
            dashboard.build_dashboard([store], out, gate_settings=settings)
            first = time.perf_counter() - t1
            builds = []
            for _ in range(3):
                t2 = time.perf_counter()
                dashboard.build_dashboard([store], out, gate_settings=settings)
                builds.append(time.perf_counter() - t2)
            t3 = time.perf_counter()
            dashboard.collect(store, 0)
            queried = time.perf_counter() - t3
            size = out.stat().st_size
        # The store as a CI artifact: read-only, in a fresh folder with no memory of verdicts.
        elsewhere = Path(tmp) / "elsewhere"
        elsewhere.mkdir()
        fresh = []
        for attempt in range(3):
            with reading(Path(tmp) / "history.duckdb") as store:
                t4 = time.perf_counter()
                dashboard.build_dashboard([store], elsewhere / f"index{attempt}.html", gate_settings=settings)
                fresh.append(time.perf_counter() - t4)
    pairs = args.runs - 3      # the first run of each of the three datasets is judged against nothing
    print(f"synthetic store: {args.runs:,} runs, {conversations:,} conversations (filled in {filled:.1f} s)")
    print(f"page: {size / 1e6:.2f} MB")
    print(f"built in {min(builds):.2f} s (best of 3; {max(builds):.2f} s at worst), verdicts remembered; "
          f"its DuckDB queries {queried:.2f} s")
    print(f"read-only, in a fresh folder (a CI artifact): built in {min(fresh):.2f} s (best of 3; "
          f"{max(fresh):.2f} s at worst), the verdicts read from the database")
    print(f"first build of a store no page was ever built from: {first:.1f} s, judging {pairs} pairs with the gate "
          f"({1000 * first / max(1, pairs):.0f} ms each, once per pair; a run's own page judges its pair when it "
          "finishes, so a store filled by simrun never needs it)")


if __name__ == "__main__":
    main()
