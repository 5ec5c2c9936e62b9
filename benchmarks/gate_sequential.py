"""The sequential gate's calibration, and part 2's fixed-design A/A over many pairs, on pools of
real conversations.

Running the demo matrix for every pair costs about 6 s a run, so 1,000 A/A pairs of a gate that
looks up to 20 times would take hours. Instead this benchmark runs the real demo (scripted user,
TripDesk, 7 personas x 10 goals, the faults of `gate_demo.py`) once into three pools of
conversations per cell, and draws every pair's runs from them:

- `normal`: the runtime as it is, `--pool-normal` repetitions of every cell;
- `broad`: dead_end raised by 5 points in every cell (its fault raised as the pilot's rate per
  unit of fault says), `--pool-changed` repetitions;
- `local`: dead_end raised by 60 points, also `--pool-changed` repetitions; a one-goal break
  takes its candidate's conversations of one goal from here, the rest from `normal`.

A pair draws its baseline and its candidate from a cell's pool without replacement, in a random
order, so within a pair the conversations of a cell are exchangeable exactly when the pools are
the same: an A/A pair is one by construction. Given the pools, pairs are independent draws, so
each rate's binomial interval is the interval of the rate on these pools. `gate_calibration.py`
(real runs for every pair) is the check that this agrees with the runner (see
benchmarks/README.md).

Parts: `fixed-aa` (the fixed gate at the default 5 repetitions each, slices on), `aa`, `local`,
`broad` (the sequential gate against a baseline of `--baseline-reps`, with the fixed gate's
power at a few sizes beside it, against the same baseline).

    .venv/bin/python benchmarks/gate_sequential.py [--pairs 1000] [--power-pairs 200] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gate_demo import BROAD_RISE, LOCAL_RISE, PLANTED, RUNTIME_FAULTS, demo_dataset, demo_run, wilson  # noqa: E402
from simrun._settings import GateSection, SequentialSection, load_budgets  # noqa: E402
from simrun.scoring.gate._compare import gate_verdict  # noqa: E402
from simrun.scoring.gate._sequential import sequential_gate  # noqa: E402
from simrun.scoring.gate._summary import summary_from_counts  # noqa: E402

PARTS = ("fixed-aa", "aa", "local", "broad")
FIXED_SIZES = {"local": (1, 2, 3, 5), "broad": (5, 10, 15, 20)}
CHUNK = 10                               # repetitions per pool run (pool runs go to the workers)


# --- the pools -----------------------------------------------------------------------------------

def _pool_run(args):
    seed, reps, faults = args
    return demo_run(seed, reps, faults=faults).conversations


def _chunks(reps: int) -> list[int]:
    return [min(CHUNK, reps - i) for i in range(0, reps, CHUNK)]


def build_pools(normal: int, changed: int, workers: int, seed: int = 90_000, steps: int = 4) -> dict:
    """Cell -> list of conversation counts, per pool; the changed faults from the normal pool's rate."""
    jobs = [(seed + i, n, None) for i, n in enumerate(_chunks(normal))]
    with ProcessPoolExecutor(workers) as pool:
        runs = list(pool.map(_pool_run, jobs))
    pools = {"normal": _by_cell(runs)}
    faults = {}
    for name, rise in (("broad", BROAD_RISE), ("local", LOCAL_RISE)):
        pools[name], faults[name] = changed_pool(pools["normal"], rise, changed, workers,
                                                 seed + 1000 * (2 + len(faults)), steps)
    pools["faults"] = faults
    return pools


def changed_pool(normal: dict, rise: float, reps: int, workers: int, seed: int, steps: int = 4
                 ) -> tuple[dict, dict]:
    """A pool with the planted class raised by `rise`: the class's rate is not linear in its
    fault's, so the fault is found by secant steps until the pool's rise is within 10% of it."""
    fault, cls = PLANTED
    base_rate, base_fault = _rate(normal, cls), RUNTIME_FAULTS[fault]
    points = [(base_fault, 0.0)]
    planted = base_fault + rise * base_fault / base_rate
    for attempt in range(steps):
        jobs = [(seed + 100 * attempt + i, n, {**RUNTIME_FAULTS, fault: planted}) for i, n in enumerate(_chunks(reps))]
        with ProcessPoolExecutor(workers) as pool:
            got_pool = _by_cell(list(pool.map(_pool_run, jobs)))
        got = _rate(got_pool, cls) - base_rate
        if abs(got - rise) <= 0.1 * rise:
            break
        points.append((planted, got))
        (f0, r0), (f1, r1) = points[-2], points[-1]
        slope = (r1 - r0) / (f1 - f0) if f1 != f0 and r1 != r0 else got / max(planted - base_fault, 1e-3)
        planted = min(1.0, max(base_fault, f1 + (rise - r1) / max(slope, 1e-3)))
    return got_pool, {"fault": planted, "rise": got}


def _rate(pool: dict, cls: str) -> float:
    fired = sum(c[cls].fired for convs in pool.values() for c in convs)
    return fired / max(1, sum(c[cls].scored for convs in pool.values() for c in convs))


def _by_cell(runs) -> dict:
    cells: dict = {}
    for conversations in runs:
        for persona, goal, _, counts in conversations:
            cells.setdefault((persona, goal), []).append(counts)
    return cells


def _summary(name: str, drawn: dict) -> object:
    """A run of the drawn conversations, numbered 0.. in the order drawn."""
    rows = [(p, g, r, counts) for (p, g), convs in drawn.items() for r, counts in enumerate(convs)]
    return summary_from_counts(name, demo_dataset().hash, max(len(c) for c in drawn.values()), rows)


def draw_pair(pools: dict, rng: np.random.Generator, base_reps: int, cand_reps: int, changed: str | None = None,
              goal: str | None = None):
    """A baseline and a candidate; the candidate from the `changed` pool (in `goal` only, if given)."""
    base, cand = {}, {}
    for cell, convs in pools["normal"].items():
        order = rng.permutation(len(convs))
        base[cell] = [convs[i] for i in order[:base_reps]]
        if changed is not None and (goal is None or cell[1] == goal):
            other = pools[changed][cell]
            cand[cell] = [other[i] for i in rng.permutation(len(other))[:cand_reps]]
        else:
            if base_reps + cand_reps > len(convs):
                raise SystemExit(f"the normal pool holds {len(convs)} repetitions per cell; a pair needs "
                                 f"{base_reps + cand_reps}: raise --pool-normal")
            cand[cell] = [convs[i] for i in order[base_reps:base_reps + cand_reps]]
    return _summary("baseline", base), _summary("candidate", cand)


# --- one pair ---

SCREEN, SCREEN_P = 200, 0.15


def screened(base, cand, settings, seq):
    """The sequential gate's outcome, first with SCREEN reassignments per look: where no
    hypothesis's corrected p comes below SCREEN_P at any look, no look can fail (a look fails
    below its level, at most alpha = 0.05, and p estimated from SCREEN draws stays at or above
    SCREEN_P when it truly is below 0.05 with chance 1e-7), and the pass side does not depend
    on the reassignments: the outcome is the full test's. Otherwise the full test is run. A
    benchmark-only shortcut: the gate itself always draws its `permutations`."""
    # model_copy does not validate: SCREEN is below the settings' floor of 1,000 on purpose.
    quick = sequential_gate(base, cand, settings.model_copy(update={"permutations": SCREEN}), seq)
    lowest = min((look.gate.lowest_p() for look in quick.looks), default=1.0)
    return quick if lowest >= SCREEN_P else sequential_gate(base, cand, settings, seq)


def rules_fired(result) -> list[str]:
    """Which rule failed a gate: a guarantee broken (the zero rule, no test), a class over all
    cells, or a class in one goal or persona (both by the max-T permutation test)."""
    out = []
    for c in result.failures:
        if c.verdict == "violated":
            out.append(f"guarantee {c.cls}")
        if c.regressed_overall:
            out.append(f"overall {c.cls} (corrected p {c.p_adjusted:.4f})")
        out += [f"slice {c.cls} in {s.dimension} {s.name}: {s.baseline} -> {s.candidate} (corrected p "
                f"{s.p_adjusted:.4f})" for s in c.slice_failures]
    return out


_pools: dict = {}


def _load_pools(path: str) -> None:
    _pools.update(pickle.loads(Path(path).read_bytes()))


def pair_job(args) -> dict:
    i, part, fixed, seq_gate, seq, base_reps, seed, sizes = args
    pools = _pools
    rng = np.random.default_rng([seed, i, PARTS.index(part)])
    cap = seq.max_rounds * seq.per_round
    if part == "fixed-aa":
        base, cand = draw_pair(pools, rng, 5, 5)
        # Screened as the sequential looks are: a pair whose corrected p-values all stay at or above
        # 0.15 over 500 reassignments cannot fail at 0.05 (chance below 1e-6 that its true p is below).
        quick = gate_verdict(base, cand, fixed.model_copy(update={"permutations": 500}))
        if quick.lowest_p() >= 0.15:
            return {"failed": False, "rules": []}
        result = gate_verdict(base, cand, fixed)
        return {"failed": not result.passed, "rules": rules_fired(result)}
    goals = sorted({g for _, g in pools["normal"]})
    goal = goals[i % len(goals)] if part == "local" else None
    changed = {"aa": None, "local": "local", "broad": "broad"}[part]
    base, cand = draw_pair(pools, rng, base_reps, cap, changed, goal)
    outcome = screened(base, cand, seq_gate, seq)
    last = outcome.gate
    named = None
    if part == "local":
        named = any(s.dimension == "goal" and s.name == goal and s.failed
                    for c in last.classes if c.cls == PLANTED[1] for s in c.slices)
    out = {"decision": outcome.decision, "conversations": outcome.conversations,
           "rounds": outcome.looks[-1].round, "named": named, "fixed": {}}
    if part in sizes:
        from simrun.scoring.gate._summary import first_repetitions

        for n in sizes[part]:
            result = gate_verdict(base, first_repetitions(cand, n), seq_gate)
            verdict = next(c for c in result.classes if c.cls == PLANTED[1])
            out["fixed"][n] = (any(s.dimension == "goal" and s.name == goal and s.failed for s in verdict.slices)
                               if part == "local" else verdict.regressed_overall)
    return out


# --- the figures ---------------------------------------------------------------------------------

def meets(k: int, n: int, target: float) -> bool:
    """A rate of false alarms meets its target unless the target is below its 95% interval:
    NOT MET only when the interval's lower end exceeds it (an exact test at 5% gives more than
    5% on half its samples)."""
    from scipy import stats as st

    return bool(st.binomtest(k, n).proportion_ci(0.95, method="wilson").low <= target)


def tally(part: str, results: list[dict], seq: SequentialSection, cells: int, alpha: float,
          sizes: dict = FIXED_SIZES) -> list[str]:
    n = len(results)
    if part == "fixed-aa":
        alarms = sum(r["failed"] for r in results)
        rules = [rule for r in results for rule in r["rules"]]
        kinds = {kind: sum(rule.startswith(kind) for rule in rules) for kind in ("guarantee", "overall", "slice")}
        return [f"fixed-aa: the fixed gate (5 repetitions each, slices on) failed {alarms}/{n} A/A pairs = "
                f"{alarms / n:.1%} (95% {wilson(alarms, n)}); required: its interval reaching {alpha:.0%} or below: "
                + ("OK" if meets(alarms, n, alpha) else "NOT MET"),
                "    the rules that fired: " + ", ".join(f"{k} {v}" for k, v in kinds.items()),
                *(f"      {rule}" for rule in rules)]
    counts = {d: sum(r["decision"] == d for r in results) for d in ("failed", "passed", "inconclusive")}
    mean_conv = float(np.mean([r["conversations"] for r in results]))
    lines = [f"{part}: {n} pairs; failed {counts['failed']} ({counts['failed'] / n:.1%}, 95% "
             f"{wilson(counts['failed'], n)}), passed {counts['passed']}, inconclusive {counts['inconclusive']}; "
             f"mean {mean_conv:.0f} candidate conversations ({mean_conv / cells:.1f} rounds), "
             f"median {np.median([r['rounds'] for r in results]):.0f} rounds, cap {seq.max_rounds}"]
    if part == "aa":
        lines[-1] += (f"; false alarms required: their interval reaching {alpha:.0%} or below: "
                      + ("OK" if meets(counts["failed"], n, alpha) else "NOT MET"))
    if part == "local":
        named = sum(bool(r["named"]) for r in results)
        lines.append(f"    the goal named in the deciding look: {named}/{n} = {named / n:.1%} (95% {wilson(named, n)})")
    for size in sizes.get(part, ()):
        caught = sum(r["fixed"][size] for r in results)
        lines.append(f"    the fixed gate at {size} candidate repetitions ({size * cells} conversations), same "
                     f"baseline: caught {caught}/{n} = {caught / n:.1%}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1000, help="A/A pairs (fixed and sequential)")
    parser.add_argument("--power-pairs", type=int, default=200, help="pairs of each planted change")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--baseline-reps", type=int, default=30)
    parser.add_argument("--max-rounds", type=int, default=SequentialSection().max_rounds)
    parser.add_argument("--spending", type=float, default=None, help="alpha spending's rho (budgets.toml's)")
    parser.add_argument("--beta", type=float, default=None, help="the pass side's beta (budgets.toml's)")
    parser.add_argument("--beta-spending", type=float, default=None, help="beta spending's rho (budgets.toml's)")
    parser.add_argument("--fixed-sizes", default="", help="the fixed gate's candidate repetitions to measure "
                        "beside the broad part, e.g. 5,10,15,16,20 "
                        "(default: " + ",".join(map(str, FIXED_SIZES["broad"])) + ")")
    parser.add_argument("--union", action="store_true", help="the fail side by the union bound, not the exact levels")
    parser.add_argument("--permutations", type=int, default=2_000, help="the sequential looks' (the fixed A/A "
                        "uses budgets.toml's)")
    parser.add_argument("--pool-normal", type=int, default=60)
    parser.add_argument("--pool-changed", type=int, default=20)
    parser.add_argument("--pools", default="/tmp/simrun-gate-pools.pkl", help="cache of the pools ('': none)")
    parser.add_argument("--every", type=int, default=50, help="print a running tally every this many pairs")
    parser.add_argument("--secant-steps", type=int, default=4, help="pool runs to find the changed faults")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rebuild", default="", help="pools to build again in the cache (broad, local)")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    t0 = time.perf_counter()
    # No --pools: the pools live in a temporary file for this run only (the workers read them there).
    cache = Path(args.pools) if args.pools else Path(tempfile.mkdtemp(prefix="simrun-pools-")) / "pools.pkl"
    key = (args.pool_normal, args.pool_changed)
    pools = pickle.loads(cache.read_bytes()) if cache.exists() else None
    if pools is None or pools.get("key") != key:
        pools = {**build_pools(args.pool_normal, args.pool_changed, args.workers, steps=args.secant_steps), "key": key}
        cache.write_bytes(pickle.dumps(pools))
    for name in filter(None, args.rebuild.split(",")):
        rise = {"broad": BROAD_RISE, "local": LOCAL_RISE}[name]
        pools[name], pools["faults"][name] = changed_pool(pools["normal"], rise, args.pool_changed, args.workers,
                                                          90_000 + 7_000 + 100 * len(name))
        cache.write_bytes(pickle.dumps(pools))
    print(f"pools: {len(pools['normal'])} cells; normal {args.pool_normal}, broad and local {args.pool_changed} "
          f"repetitions each ({time.perf_counter() - t0:.0f} s); {PLANTED[1]} in the normal pool "
          f"{100 * _rate(pools['normal'], PLANTED[1]):.1f}%; " + "; ".join(
              f"{name}: its fault at {v['fault']:.3f}, the class {100 * v['rise']:+.1f} pts"
              for name, v in pools["faults"].items()), flush=True)
    fixed = load_budgets(ROOT / "budgets.toml").gate
    seq_gate = GateSection(**{**fixed.model_dump(), "permutations": args.permutations})
    given = {"max_rounds": args.max_rounds, "spending": args.spending, "beta": args.beta,
             "beta_spending": args.beta_spending, "exact": False if args.union else None}
    seq = SequentialSection(**{**fixed.sequential.model_dump(), **{k: v for k, v in given.items() if v is not None}})
    cells = len(pools["normal"])
    print(f"sequential: baseline {args.baseline_reps} repetitions per cell, rounds of 1, cap {seq.max_rounds}, "
          f"spending alpha * t^{seq.spending} ({'exact levels' if seq.exact else 'union bound'}), "
          f"pass side beta {seq.beta} spent as beta * t^{seq.beta_spending}, "
          f"{args.permutations} permutations per look; alpha {fixed.alpha}, "
          f"min effect {fixed.min_effect}", flush=True)
    broad_sizes = {"broad": tuple(int(n) for n in args.fixed_sizes.split(","))} if args.fixed_sizes else {}
    sizes = {**FIXED_SIZES, **broad_sizes}
    unmet = []
    for part in parts:
        n = args.pairs if part in ("fixed-aa", "aa") else args.power_pairs
        jobs = [(i, part, fixed, seq_gate, seq, args.baseline_reps, args.seed, sizes) for i in range(n)]
        t = time.perf_counter()
        with ProcessPoolExecutor(args.workers, initializer=_load_pools, initargs=(str(cache),)) as pool:
            results = []
            for result in pool.map(pair_job, jobs, chunksize=4):
                results.append(result)
                if len(results) % args.every == 0 and len(results) < n:     # a running tally: usable if stopped
                    print(f"    after {len(results)} pairs ({time.perf_counter() - t:.0f} s): "
                          + tally(part, results, seq, cells, fixed.alpha, sizes)[0], flush=True)
        for line in tally(part, results, seq, cells, fixed.alpha, sizes):
            print(line, flush=True)
            unmet += [part] if "NOT MET" in line else []
        print(f"    ({time.perf_counter() - t:.0f} s)", flush=True)
    if not args.pools:
        shutil.rmtree(cache.parent, ignore_errors=True)
    print(f"{time.perf_counter() - t0:.0f} s; " + ("every requirement met" if not unmet else f"NOT MET: {unmet}"))
    return 0 if not unmet else 1


if __name__ == "__main__":
    raise SystemExit(main())
