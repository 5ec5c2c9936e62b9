"""Report at scale: build time and size over a synthetic store of 1,000,000 turns.

The store is filled by SQL (generate_series), shaped like a real run: ~3 turns per conversation,
every class checked per conversation, a few percent of conversations with findings. Then the
report is built from it as `simrun report` builds it.

    .venv/bin/python benchmarks/report_scale.py [--turns 1000000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simrun.scoring.checks._scorer import ALL_CLASSES, kind_of  # noqa: E402
from simrun.scoring.pages._report import build_report  # noqa: E402
from simrun.scoring.store._database import Store  # noqa: E402


def fill(store: Store, turns: int) -> int:
    conversations = turns // 3
    con = store.con
    con.execute("""INSERT INTO runs (run_id, started_at, status, config, dataset_hash, dataset, scorer_version,
                   simrun_version, user_backend, runtime, seed, repetitions, budget_usd)
                   VALUES ('r20260101-000000-5e7e71', now(), 'finished', '{}', 'd', '{}', '1', '0', 'scripted', 'x',
                           1, 1, 5)""")
    con.execute(f"""
        INSERT INTO conversations
        SELECT 'r20260101-000000-5e7e71', 'p' || (i % 7) || '/g' || (i % 10) || '/' || (i // 70),
               'p' || (i % 7), 'g' || (i % 10),
               i // 70, i, CASE WHEN i % 50 = 0 THEN 'user_stopped' ELSE 'goal_reached' END,
               i % 50 <> 0, 'synthetic', 3, 0, 10.0, now(), '{{}}', '{{"records": {{}}, "events": []}}',
               '[]', NULL, NULL, NULL, NULL
        FROM range({conversations}) t(i)""")
    con.execute(f"""
        INSERT INTO turns
        SELECT 'r20260101-000000-5e7e71', 'p' || (i % 7) || '/g' || (i % 10) || '/' || (i // 70), k,
               '{{"kind": "message", "text": "Add a bag to my Lisbon trip, please.", "meta": {{}}}}',
               '{{"reply": "Added one bag; Lisbon offsite now has 2 bags. What next?", "understood": true,
                  "ask": null, "next_steps": [], "card": null, "mentions": [], "receipts": ["e-1"],
                  "answer": null, "verdicts": {{"refusal_emitted": false, "hedge_injected": false}}}}',
               '{{"records": {{}}, "events": []}}', 1.0
        FROM range({conversations}) t(i), range(1, 4) u(k)""")
    classes = ", ".join(f"('{c}', '{kind_of(c)}')" for c in ALL_CLASSES)
    con.execute(f"""
        INSERT INTO checks (run_id, conversation_id, class, kind, status, occurrences, checked_turns,
                            unverifiable_turns)
        SELECT 'r20260101-000000-5e7e71', 'p' || (i % 7) || '/g' || (i % 10) || '/' || (i // 70), c.cls, c.kind,
               CASE WHEN (i + length(c.cls)) % 37 = 0 THEN 'fired' ELSE 'clean' END,
               CASE WHEN (i + length(c.cls)) % 37 = 0 THEN 1 ELSE 0 END, 3, 0
        FROM range({conversations}) t(i), (VALUES {classes}) c(cls, kind)""")
    con.execute("""
        INSERT INTO findings
        SELECT run_id, conversation_id, 2, class, kind, 'synthetic finding', '{}'
        FROM checks WHERE status = 'fired'""")
    return con.execute("SELECT count(*) FROM turns").fetchone()[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with Store(Path(tmp) / "big.duckdb") as store:
            t0 = time.perf_counter()
            turns = fill(store, args.turns)
            filled = time.perf_counter() - t0
            t1 = time.perf_counter()
            path = build_report(store, "r20260101-000000-5e7e71", Path(tmp) / "reports")
            built = time.perf_counter() - t1
            size = path.stat().st_size
    print(f"synthetic store: {turns:,} turns (filled in {filled:.1f} s)")
    print(f"report built in {built:.2f} s; {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
