"""Gate calibration when runs differ as a whole: A/A with a run x cell effect, and power beside it.

The demo's runs seed every conversation by session, so two of them never differ as a whole; real
runs do (a model-played user's provider that day, state a runtime shares across sessions). Here
each run's cell rate is drawn around the cell's base rate with a chosen intra-class correlation
rho (a Beta draw of variance rho p (1 - p); at rho 0.02 a 10% cell moves about 4 points from run to
run), and each conversation fires each tested class with its run's cell rate. The base rates are
the demo's (per cell and class, from a pilot of the bundled demo, 7 personas x 10 goals), or a
synthetic profile with `--synthetic` (no demo run: seconds).

Modes, per rho in `--rho` (0 included as a check):

- one: the baseline is one run. The gate cannot see the variation (its null assumes runs do
  not differ): the false-alarm rate it reaches is what a one-run baseline risks.
- runs: the baseline is `--runs` runs blessed together (`merge_runs`); the gate measures the
  variation and widens its null. A/A false alarms (required: its 95% interval reaches 5% or
  below), and the power for +5 points in every cell of dead_end beside it.
- user: a run-level effect for a model-played user: every cell of a run moves together (a logit
  shift of sd `--user-shift` for simulator_error and goal_not_reached, drawn per run; a list
  gives a line each), beside a run x cell effect of `--user-rho`; the baseline is `--runs` runs.
- sequential: the sequential gate's A/A where its pass side can hardly stop early (`--cells 10`,
  `--beta 0.001`, 20 rounds of one repetition), against a baseline of `--seq-runs` runs of
  `--baseline-reps` repetitions each: with `--seq-runs 1` and no effect the runs are
  exchangeable by construction; with `--seq-shift` (and `--seq-rho`) every run, the candidate's
  20 rounds included, carries its own whole-run (and run x cell) effect, so that the alpha spent
  over the recalculated looks is measured where runs differ.

    .venv/bin/python benchmarks/gate_runs.py [--pairs 200] [--rho 0,0.005,0.02,0.05]
        [--modes one,runs,user] [--runs 3] [--repetitions 5] [--user-shift 0.5,1.0]
        [--permutations 2000] [--workers 2]

A pair is a baseline and a candidate drawn from one null (A/A), or with the candidate's
dead_end raised by `--rise` in every cell (power; runs and user modes). It exits 1 when a
requirement is not met, judging each by its 95% interval, never by the point estimate alone: NOT
MET only when the interval's lower end is above 5%.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy import stats as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simrun._settings import load_budgets  # noqa: E402
from simrun.scoring.gate._compare import gate_verdict  # noqa: E402
from simrun.scoring.gate._summary import (  # noqa: E402
    GATE_CLASSES,
    TESTED,
    Counts,
    RunSummary,
    merge_runs,
    summary_from_counts,
)

HASH = "0123456789abcdef"
PERSONAS, GOALS = 7, 10
MAX_AA = 0.05
USER_CLASSES = ("simulator_error", "goal_not_reached")


def synthetic_rates(seed: int = 7) -> np.ndarray:
    """Cells x tested classes: demo-like base rates (each class 2-10% on average, cells uneven,
    some never firing)."""
    rng = np.random.default_rng(seed)
    means = np.array([0.06, 0.08, 0.05, 0.06, 0.08, 0.03, 0.02, 0.10])[:len(TESTED)]
    rates = rng.beta(1.2, 1.2 * (1 / means - 1), size=(PERSONAS * GOALS, len(TESTED)))
    rates[rng.random(rates.shape) < 0.2] = 0.0
    return rates


def demo_rates(repetitions: int = 20, seed: int = 99) -> np.ndarray:
    """Cells x tested classes: the demo's rates, from one long run (its faults as in gate_demo.py)."""
    from benchmarks.gate_demo import demo_run

    run = demo_run(seed, repetitions)
    cells = sorted({(p, g) for p, g, _, _ in run.conversations})
    fired = np.zeros((len(cells), len(TESTED)))
    scored = np.zeros_like(fired)
    index = {c: i for i, c in enumerate(cells)}
    for p, g, _, counts in run.conversations:
        for k, cls in enumerate(TESTED):
            fired[index[(p, g)], k] += counts[cls].fired
            scored[index[(p, g)], k] += counts[cls].scored
    return fired / np.maximum(scored, 1)


def one_run(rng: np.random.Generator, rates: np.ndarray, rho: float, repetitions: int, name: str,
            user_shift: float = 0.0, rise: float = 0.0) -> RunSummary:
    """A run: each cell's rate drawn for this run (run x cell effect rho), then its conversations."""
    p = rates.copy()
    if rise:
        p[:, TESTED.index("dead_end")] = np.minimum(1.0, p[:, TESTED.index("dead_end")] + rise)
    if user_shift:
        shift = rng.normal(0, user_shift)
        for cls in USER_CLASSES:
            k = TESTED.index(cls)
            inside = (p[:, k] > 0) & (p[:, k] < 1)
            logit = np.log(p[inside, k] / (1 - p[inside, k])) + shift
            p[inside, k] = 1 / (1 + np.exp(-logit))
    if rho > 0:
        inside = (p > 0) & (p < 1)
        a = p[inside] * (1 / rho - 1)
        b = (1 - p[inside]) * (1 / rho - 1)
        p[inside] = rng.beta(a, b)
    fired = rng.random((repetitions, *p.shape)) < p[None]
    conversations = []
    goals = GOALS if len(p) == PERSONAS * GOALS else 5          # a small matrix: personas of 5 goals
    cells = [(f"p{c // goals}", f"g{c % goals}") for c in range(len(p))]
    zero = Counts(0, 1, 0)
    for c, (persona, goal) in enumerate(cells):
        for r in range(repetitions):
            counts = {cls: zero for cls in GATE_CLASSES}
            for k, cls in enumerate(TESTED):
                counts[cls] = Counts(int(fired[r, c, k]), 1, 0)
            conversations.append((persona, goal, r, counts))
    return summary_from_counts(name, HASH, repetitions, conversations)


def pair(args: tuple) -> dict:
    """One pair of each mode: (A/A failed?, power pair caught dead_end over all cells?)."""
    i, rates, rho, mode, runs, repetitions, settings, user_shift, rise, seed, bound = args
    from simrun.scoring.gate import _variation

    _variation.BOUND = bound
    # The mode's index, not hash(mode): a str's hash changes from one interpreter to the next.
    rng = np.random.default_rng([seed, i, int(rho * 1e6), ("one", "runs", "user").index(mode),
                                 int(user_shift * 1000)])
    shift = user_shift if mode == "user" else 0.0
    k = runs if mode in ("runs", "user") else 1
    base_runs = [one_run(rng, rates, rho, repetitions, f"b{j}", shift) for j in range(k)]
    base = merge_runs(base_runs) if k > 1 else base_runs[0]
    cand = one_run(rng, rates, rho, repetitions, "c", shift)
    aa = gate_verdict(base, cand, settings)
    out = {"aa": not aa.passed, "where": aa.regressions()[:1]}
    if aa.variation is not None:
        out["rho"] = dict(zip(aa.variation.classes, aa.variation.rho))
        out["bound"] = dict(zip(aa.variation.classes, aa.variation.bound))
        out["shift"] = {cls: aa.variation.shift(cls) for cls in aa.variation.classes}
    if rise:
        broken = one_run(rng, rates, rho, repetitions, "d", shift, rise=rise)
        result = gate_verdict(base, broken, settings)
        verdict = next(c for c in result.classes if c.cls == "dead_end")
        out["power"] = verdict.regressed_overall
    return out


def sequential_pair(args: tuple) -> dict:
    """One sequential A/A pair where the pass side can hardly stop early: exchangeable runs (no
    run effect), a small matrix, a tiny beta. Returns the decision and the rounds it took."""
    from simrun._settings import SequentialSection
    from simrun.scoring.gate._sequential import sequential_gate

    i, rates, baseline_reps, settings, beta, exact, rounds, seed, runs, shift, rho = args
    rng = np.random.default_rng([seed, i, 4242])
    parts = [one_run(rng, rates, rho, baseline_reps, f"b{j}", shift) for j in range(runs)]
    base = merge_runs(parts) if runs > 1 else parts[0]
    cand = one_run(rng, rates, rho, rounds, "c", shift)           # one run: one effect over all its rounds
    seq = SequentialSection(max_rounds=rounds, beta=beta, exact=exact)
    result = sequential_gate(base, cand, settings, seq, finished=True)
    return {"decision": result.decision, "rounds": len(result.looks)}


def sequential_aa(args: argparse.Namespace, settings, rates: np.ndarray) -> list[str]:
    """`--modes sequential`: the sequential gate's A/A where the pass side cannot stop early."""
    small = rates[:args.cells]
    jobs = [(i, small, args.baseline_reps, settings, args.beta, not args.union, 20, args.seed, args.seq_runs,
             args.seq_shift, args.seq_rho) for i in range(args.pairs)]
    if args.workers > 1:
        with ProcessPoolExecutor(args.workers) as pool:
            rows = list(pool.map(sequential_pair, jobs))
    else:
        rows = [sequential_pair(job) for job in jobs]
    n = len(rows)
    failed = sum(r["decision"] == "failed" for r in rows)
    passed = sum(r["decision"] == "passed" for r in rows)
    low, high = wilson(failed, n)
    ok = low <= MAX_AA
    effect = (f"whole-run shift sd {args.seq_shift:g} (logit), rho {args.seq_rho:g}"
              if args.seq_shift or args.seq_rho else "runs exchangeable")
    return [f"sequential A/A, {args.cells} cells, baseline {args.seq_runs} run(s) of {args.baseline_reps} "
            f"repetitions, {effect}, beta {args.beta}, "
            f"{'union bound' if args.union else 'exact levels'}, 20 rounds: failed {failed}/{n} = {failed / n:.1%} "
            f"(95% {100 * low:.1f}%–{100 * high:.1f}%) {'OK' if ok else 'NOT MET'}; passed {passed}, "
            f"undecided {n - failed - passed}; mean looks {np.mean([r['rounds'] for r in rows]):.1f}", ok]


def wilson(k: int, n: int) -> tuple[float, float]:
    ci = st.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return ci.low, ci.high


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--rho", default="0,0.005,0.02,0.05")
    parser.add_argument("--modes", default="one,runs,user")
    parser.add_argument("--runs", type=int, default=3, help="runs blessed together in the baseline")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--permutations", type=int, default=2_000)
    parser.add_argument("--rise", type=float, default=0.05, help="power: dead_end raised by this in every cell")
    parser.add_argument("--user-shift", default="0.5,1.0", help="user mode: sd of a run's logit shift (a list: "
                        "a line each)")
    parser.add_argument("--user-rho", type=float, default=0.02, help="user mode: the run x cell effect beside it")
    parser.add_argument("--synthetic", action="store_true", help="synthetic base rates (no demo pilot)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cells", type=int, default=10, help="sequential mode: cells of the matrix")
    parser.add_argument("--beta", type=float, default=0.001, help="sequential mode: the pass side's beta")
    parser.add_argument("--baseline-reps", type=int, default=5, help="sequential mode: the baseline's repetitions")
    parser.add_argument("--union", action="store_true", help="sequential mode: the union bound, not exact levels")
    parser.add_argument("--seq-runs", type=int, default=1, help="sequential mode: runs blessed in the baseline")
    parser.add_argument("--seq-shift", type=float, default=0.0, help="sequential mode: sd of a run's logit shift")
    parser.add_argument("--seq-rho", type=float, default=0.0, help="sequential mode: the run x cell effect")
    parser.add_argument("--bound", type=float, default=None,
                        help="the confidence of the bound on rho the gate uses (default: the gate's own)")
    args = parser.parse_args(argv)
    settings = load_budgets(ROOT / "budgets.toml").gate.model_copy(update={"permutations": args.permutations})
    rates = synthetic_rates() if args.synthetic else demo_rates()
    from simrun.scoring.gate._variation import BOUND

    bound = BOUND if args.bound is None else args.bound
    t0 = time.perf_counter()
    print(f"gate with run effects: {PERSONAS * GOALS} cells, {args.repetitions} repetitions, "
          f"{'synthetic' if args.synthetic else 'demo'} base rates (mean per class: "
          + ", ".join(f"{c} {100 * rates[:, k].mean():.1f}%" for k, c in enumerate(TESTED)) + f"); alpha "
          f"{settings.alpha}, {settings.correction}, {settings.permutations} permutations; "
          f"rho taken at its {bound:.0%} bound; "
          f"{args.pairs} pairs each",
          flush=True)
    unmet = []
    for mode in args.modes.split(","):
        if mode == "sequential":
            line, ok = sequential_aa(args, settings, rates)
            print(line, flush=True)
            unmet += [] if ok else ["sequential A/A"]
            continue
        cases = ([(args.user_rho, float(x)) for x in args.user_shift.split(",")] if mode == "user"
                 else [(float(x), 0.0) for x in args.rho.split(",")])
        for rho, shift in cases:
            jobs = [(i, rates, rho, mode, args.runs, args.repetitions, settings, shift,
                     args.rise if mode != "one" else 0.0, args.seed, bound) for i in range(args.pairs)]
            if args.workers > 1:
                with ProcessPoolExecutor(args.workers) as pool:
                    rows = list(pool.map(pair, jobs))
            else:
                rows = [pair(job) for job in jobs]
            n, alarms = len(rows), sum(r["aa"] for r in rows)
            low, high = wilson(alarms, n)
            base = "1 run" if mode == "one" else f"{args.runs} runs"
            line = (f"{mode:4s} rho {rho:<6g}{f' shift sd {shift:g}' if mode == 'user' else ''} baseline {base}: "
                    f"A/A failed {alarms}/{n} = {alarms / n:.1%} "
                    f"(95% {100 * low:.1f}%–{100 * high:.1f}%)")
            if mode != "one":
                ok = low <= MAX_AA
                unmet += [] if ok else [f"A/A {mode} rho {rho} shift {shift}"]
                line += f" {'OK' if ok else 'NOT MET'}"
            if "power" in rows[0]:
                caught = sum(r["power"] for r in rows)
                plow, phigh = wilson(caught, n)
                line += (f"; +{100 * args.rise:.0f} pts dead_end caught {caught}/{n} = {caught / n:.1%} "
                         f"(95% {100 * plow:.1f}%–{100 * phigh:.1f}%)")
            if "rho" in rows[0]:
                measured = np.mean([r["rho"]["dead_end"] for r in rows])
                line += (f"; rho measured (mean over pairs, dead_end) {measured:.4f}"
                         f", bound {np.mean([r['bound']['dead_end'] for r in rows]):.4f}")
                line += ("; whole-run logit shift sd measured (mean over pairs) "
                         + ", ".join(f"{cls} {np.mean([r['shift'][cls] for r in rows]):.2f}"
                                     for cls in ("dead_end", *USER_CLASSES)))
            print(line, flush=True)
            for r in rows:
                if r["aa"] and r["where"]:
                    print(f"      false alarm: {r['where'][0]}")
                    break
    print(f"{time.perf_counter() - t0:.0f} s; "
          + ("every requirement met" if not unmet else "NOT MET: " + ", ".join(unmet)))
    return 0 if not unmet else 1


if __name__ == "__main__":
    raise SystemExit(main())
