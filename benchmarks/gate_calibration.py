"""Gate calibration: the A/A false-alarm rate and the power to catch a planted regression.

Both figures come from repeated in-process runs of the bundled demo matrix (scripted user,
TripDesk), each summarised and judged by the same `gate_verdict` that `simrun gate` calls:

(a) A/A: pairs of runs that differ only in their seed (so in every fault draw and every
    manner draw), with progress faults and a simulator fault planted at moderate rates in
    both, so that every tested class has a non-zero base rate. A failed gate is a false alarm.
    Guarantee faults are left out: one violation fails the gate by design, not by chance.
(b) Power: the same baselines against candidates whose `dead_end` fault (one that can show in
    almost every conversation) is raised so that the class rate rises by `--rise` (10 points).
(c) Sample-size advice: the smallest rise caught with 80% power at this matrix, by repetitions
    and base rate (`scoring.stats.minimum_detectable_effect`), and the power predicted for (b).
(d) Why a t-test: the per-class false-positive rate of the paired t-test and of the Wilcoxon
    signed-rank test on simulated binomial cells, uncorrected, at alpha.

    .venv/bin/python benchmarks/gate_calibration.py [--pairs 200] [--repetitions N] [--workers N] [--seed 1]

It exits 1 if the false-alarm rate is above 5% or the power below 80%.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scoring.baseline import RunSummary, summary_from_scorecards  # noqa: E402
from scoring.gate import GateResult, gate_verdict  # noqa: E402
from scoring.stats import minimum_detectable_effect, power_of_rise  # noqa: E402
from simulator.config import GateSection, load_budgets, load_project  # noqa: E402
from scoring.dataset import Dataset, load_dataset  # noqa: E402

# Moderate rates: each class fires in roughly 5-10% of the demo's conversations.
RUNTIME_FAULTS = {"dead_end": 0.10, "not_understood": 0.10, "loop": 0.30, "refused_offer": 0.20,
                  "unanswered": 0.30, "crash": 0.02}
USER_FAULTS = {"early_stop": 0.02, "role_leak": 0.02}
PLANTED = ("dead_end", "dead_end")      # (fault, the class it raises)
MAX_AA_FAILS, MIN_POWER = 0.05, 0.80

_dataset: Dataset | None = None


def demo_dataset() -> Dataset:
    global _dataset
    if _dataset is None:
        _dataset = load_dataset(ROOT / "personas", ROOT / "goals")
    return _dataset


@dataclass(frozen=True)
class DemoRun:
    summary: RunSummary
    eligible: dict[str, int]        # conversations where each fault could show
    conversations: int


def demo_run(seed: int, repetitions: int, faults: dict[str, float] | None = None,
             user_faults: dict[str, float] | None = None) -> DemoRun:
    """One run of the demo matrix in process, summarised as the store would summarise it."""
    from simulator import PythonRuntime, ScriptedUser, converse, matrix
    from tripdesk import TripDesk

    dataset = demo_dataset()
    faults = RUNTIME_FAULTS if faults is None else faults
    user_faults = USER_FAULTS if user_faults is None else user_faults
    runtime = TripDesk(faults=faults, fault_seed=seed)
    user = ScriptedUser(faults=user_faults, fault_seed=seed)
    adapter = PythonRuntime(runtime)

    async def go():
        return [await converse(cell, user, adapter) for cell in matrix(dataset, repetitions, seed)]

    conversations = asyncio.run(go())
    summary = summary_from_scorecards(f"seed-{seed}", dataset.hash, repetitions,
                                      [(c.cell.persona.id, c.cell.goal.id, c.scorecard) for c in conversations])
    eligible = {name: len(runtime.fault_log.keys(name, "eligible")) for name in faults}
    return DemoRun(summary, eligible, len(conversations))


def _job(args: tuple) -> DemoRun:
    return demo_run(*args)


def run_many(jobs: list[tuple], workers: int) -> list[DemoRun]:
    if workers <= 1:
        return [demo_run(*job) for job in jobs]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(_job, jobs, chunksize=4))


def raised_faults(eligible_share: float, rise: float) -> dict[str, float]:
    """The candidate's faults: the planted one raised so that its class rate rises by `rise`."""
    fault = PLANTED[0]
    return {**RUNTIME_FAULTS, fault: min(1.0, RUNTIME_FAULTS[fault] + rise / eligible_share)}


@dataclass(frozen=True)
class Calibration:
    aa: list[GateResult]
    power: list[GateResult]
    planted_rate: float
    eligible_share: float

    @property
    def false_alarms(self) -> int:
        return sum(not r.passed for r in self.aa)

    @property
    def caught(self) -> int:
        """Candidates failed by the gate because the planted class was flagged as a regression."""
        cls = PLANTED[1]
        return sum(any(c.cls == cls and c.verdict == "regression" for c in r.classes) for r in self.power)

    @property
    def failed(self) -> int:
        return sum(not r.passed for r in self.power)

    def mean_rise(self) -> float:
        cls = PLANTED[1]
        return float(np.mean([next(c.delta for c in r.classes if c.cls == cls) for r in self.power]))


def calibrate(pairs: int, repetitions: int, settings: GateSection, *, rise: float = 0.10,
              workers: int = 1, seed0: int = 1) -> Calibration:
    """`pairs` A/A pairs and `pairs` planted-regression pairs, sharing their baselines."""
    base_jobs = [(seed0 + 2 * i, repetitions) for i in range(pairs)]
    aa_jobs = [(seed0 + 2 * i + 1, repetitions) for i in range(pairs)]
    runs = run_many(base_jobs + aa_jobs, workers)
    baselines, aa_candidates = runs[:pairs], runs[pairs:]
    fault = PLANTED[0]
    share = sum(r.eligible[fault] for r in baselines) / sum(r.conversations for r in baselines)
    raised = raised_faults(share, rise)
    power_jobs = [(seed0 + 100_000 + i, repetitions, raised) for i in range(pairs)]
    power_candidates = run_many(power_jobs, workers)
    aa = [gate_verdict(b.summary, c.summary, settings) for b, c in zip(baselines, aa_candidates)]
    power = [gate_verdict(b.summary, c.summary, settings) for b, c in zip(baselines, power_candidates)]
    return Calibration(aa, power, raised[fault], share)


def wilson(k: int, n: int) -> str:
    ci = st.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return f"{100 * ci.low:.1f}%–{100 * ci.high:.1f}%"


def test_choice(cells: int, repetitions: int, alpha: float, sims: int = 4000, seed: int = 0) -> list[str]:
    """(d): uncorrected false-positive rates of the two paired tests on simulated A/A cells."""
    rng = np.random.default_rng(seed)
    lines = []
    for label, base in (("every cell at 2%", np.full(cells, 0.02)), ("every cell at 10%", np.full(cells, 0.10)),
                        ("a seventh of the cells at 30%, the rest 0", np.where(np.arange(cells) % 7 == 0, 0.3, 0.0))):
        a = rng.binomial(repetitions, base, size=(sims, cells)) / repetitions
        b = rng.binomial(repetitions, base, size=(sims, cells)) / repetitions
        with np.errstate(all="ignore"):
            p_t = np.nan_to_num(st.ttest_rel(b, a, axis=1, alternative="greater").pvalue, nan=1.0)
        d = b - a
        p_w = np.ones(sims)
        for i in range(sims):
            if np.any(d[i] != 0):
                p_w[i] = st.wilcoxon(d[i], alternative="greater", zero_method="zsplit").pvalue
        lines.append(f"    {label:44s} t-test {np.mean(p_t < alpha):6.1%}   Wilcoxon {np.mean(p_w < alpha):6.1%}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--repetitions", type=int, default=None, help="default: simrun.toml's run.repetitions")
    parser.add_argument("--rise", type=float, default=0.10)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=1, help="first run seed; pairs use the seeds after it")
    args = parser.parse_args()
    repetitions = args.repetitions or load_project(ROOT / "simrun.toml").run.repetitions
    settings = load_budgets(ROOT / "budgets.toml").gate
    dataset = demo_dataset()
    cells = len(dataset.personas) * len(dataset.goals)

    t0 = time.perf_counter()
    cal = calibrate(args.pairs, repetitions, settings, rise=args.rise, workers=args.workers, seed0=args.seed)
    wall = time.perf_counter() - t0
    n = args.pairs
    print(f"gate calibration: demo matrix {len(dataset.personas)} personas x {len(dataset.goals)} goals = {cells} "
          f"cells x {repetitions} repetitions ({cells * repetitions} conversations a run); {3 * n} runs in {wall:.0f} s")
    print(f"gate: alpha {settings.alpha}, min effect {settings.min_effect}, {settings.correction} over "
          f"{cal.aa[0].tests} classes; faults in every run: "
          + ", ".join(f"{k}={v}" for k, v in RUNTIME_FAULTS.items()) + "; user: "
          + ", ".join(f"{k}={v}" for k, v in USER_FAULTS.items()))
    base_rates = ", ".join(f"{c.cls} {100 * np.mean([next(x.baseline_rate for x in r.classes if x.cls == c.cls) for r in cal.aa]):.1f}%"
                           for c in cal.aa[0].classes if c.kind != "guarantee")
    print(f"mean base rates: {base_rates}")

    fa = cal.false_alarms
    ok_a = fa / n <= MAX_AA_FAILS
    print(f"\n(a) A/A false-alarm rate: {fa}/{n} = {fa / n:.1%} (95% {wilson(fa, n)}); "
          f"required <= {MAX_AA_FAILS:.0%}: {'OK' if ok_a else 'NOT MET'}")
    raw = {c.cls: 0 for c in cal.aa[0].classes if c.p is not None and c.kind != "guarantee"}
    for r in cal.aa:
        for c in r.classes:
            if c.cls in raw and c.p < settings.alpha:
                raw[c.cls] += 1
    print("    per class, uncorrected one-sided p < alpha (the test alone, no correction, no min effect): "
          + ", ".join(f"{k} {v / n:.1%}" for k, v in raw.items()))

    caught, power = cal.caught, cal.caught / n
    ok_b = power >= MIN_POWER
    fault, cls = PLANTED
    base_c = np.mean([[c.baseline_rate for c in r.classes if c.cls == cls][0] for r in cal.power])
    predicted = power_of_rise(cal.mean_rise(), [base_c] * cells, repetitions, alpha=settings.alpha,
                              tests=cal.power[0].tests, min_effect=settings.min_effect)
    print(f"\n(b) planted regression: fault {fault} raised from {RUNTIME_FAULTS[fault]:.2f} to {cal.planted_rate:.3f} "
          f"(it can show in {cal.eligible_share:.0%} of conversations); {cls} rose {100 * cal.mean_rise():.1f} pts "
          f"on average")
    print(f"    power: {cls} flagged as a regression in {caught}/{n} = {power:.1%} (95% {wilson(caught, n)}); "
          f"the gate failed in {cal.failed}/{n}; required >= {MIN_POWER:.0%}: {'OK' if ok_b else 'NOT MET'}")
    print(f"    predicted by scoring.stats.power_of_rise at base rate {100 * base_c:.1f}%: {predicted:.1%}")

    print(f"\n(c) sample-size advice: the smallest rise caught with 80% power, {cells} cells, alpha "
          f"{settings.alpha}, {settings.correction} over {cal.aa[0].tests} classes, min effect {settings.min_effect}")
    rates = (0.0, 0.02, 0.05, 0.10, 0.20)
    print("    repetitions " + "".join(f"  base {100 * p:4.0f}%" for p in rates))
    for reps in (3, 5, 10, 20):
        row = [minimum_detectable_effect(cells, reps, p, alpha=settings.alpha, tests=cal.aa[0].tests,
                                         min_effect=settings.min_effect) for p in rates]
        print(f"    {reps:11d} " + "".join(f"  {'–' if m is None else f'{100 * m:5.1f} pts':>10s}" for m in row))

    print(f"\n(d) one-sided paired tests over {cells} simulated cells x {repetitions} repetitions, A/A, "
          f"uncorrected, share with p < {settings.alpha}:")
    for line in test_choice(cells, repetitions, settings.alpha):
        print(line)
    return 0 if ok_a and ok_b else 1


if __name__ == "__main__":
    raise SystemExit(main())
