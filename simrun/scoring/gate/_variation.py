"""Run-to-run variation: how far a cell's rate moves between runs of an unchanged runtime.

The permutation test (`simrun.scoring.gate._stats`) is exact under one null: a cell's
conversations are exchangeable across the two runs. Runs can differ as a whole: a model-played
user's provider that day, time-dependent behaviour, state a runtime shares across a run's
sessions, the conversations a budget cut drops. Then each run's cell rate moves by a run x cell
effect, and a test that reassigns conversations alone takes that movement for a regression.

A baseline blessed from several runs (`simrun baseline bless RUN RUN ...`,
`simrun.scoring.gate._summary.merge_runs`) measures it. Per class, the between-run variance of
each cell's rate beyond what its binomial sampling explains is estimated by one-way analysis of
variance (runs within the cell: (MSB - MSW) / n0), and pooled over cells as an intra-class
correlation, rho = sum of those variances / sum of p (1 - p): the share of a conversation's
variance owed to which run it was in. A run x cell effect then adds rho p (1 - p) (1 + 1/K) to
the variance of a cell's rate difference between a candidate (one run) and a baseline of K runs
(the baseline's rate averages K run effects), p the cell's rate over both runs.

The estimate is taken at an upper confidence bound (`BOUND`), not at its value: with three runs,
its sampling error would otherwise give back the false alarms it is there to remove. The
statistic divides by the larger standard error, and its null distribution adds a normal run x cell
effect of that variance to every cell in each reassignment (`simrun.scoring.gate._stats.compare`).

**A whole-run effect** is one shift shared by every cell of a run: a model-played user's provider
or model version that day moves every cell's rate together. A run x cell model treats cells as
independent, so it cannot see it (summed over 70 cells, a shared shift does not average out;
independent effects do). It is modelled on the logit scale: run j moves cell c's rate by
u_j p_c (1 - p_c), u_j ~ N(0, tau^2) per class (tau is the sd of a run's logit shift). Each
baseline run's shift is read off as S_j = sum_c w_c r_jc (w_c = p_c (1 - p_c), r_jc the run's
cell rate; the cells scored in every run), whose spread between runs, s^2 with K - 1 degrees of
freedom, estimates tau^2 (sum w^2)^2 plus a part binomial sampling and the run x cell effect
explain, sum_c w_c^2 (p_c (1 - p_c) / n_jc + rho w_c), known from the rates and rho. With
K = 3 runs s^2 is a guess; a fixed bound on tau^2 (a chi-square bound at `BOUND`) costs most of
the power, so the gate carries the uncertainty of s^2 into the null instead (`WholeRun.draw`):
every reassignment draws a variance from s^2's fiducial distribution, (K - 1) s^2 / X with
X ~ chi-square(K - 1), less the sampling part, and one normal shift of that variance, shared by
every cell of the class. Where the shift dominates, that is exactly the t reference with K - 1
degrees of freedom of a candidate run against K baseline runs (a prediction interval); where it
is small the reassignments' own sampling dominates and the draw adds little. The candidate is one
run and the baseline the mean of K, so the difference's shift has variance tau^2 (1 + 1/K). The
run x cell estimate above is measured net of each run's fitted shift (u_j p_c (1 - p_c)), so that
a whole-run effect is not counted twice; rho's point estimate (at least 0) then gives the run x
cell part of s^2. `benchmarks/gate_runs.py --modes user` measures it; the shift is modelled to
first order on the logit scale, and a large one is not exactly a multiple of p (1 - p).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simrun.scoring.gate._summary import Cell, RunSummary, run_of

# The one-sided confidence of the bound on rho the gate uses (see the module docstring).
BOUND = 0.90


@dataclass(frozen=True)
class RunVariation:
    """What a baseline of several runs says about how runs differ, per tested class."""

    runs: int                       # runs in the baseline
    classes: tuple[str, ...]
    rho: tuple[float, ...]          # the estimate (may be negative: no variation beyond sampling)
    bound: tuple[float, ...]        # its upper bound, clipped at 0: what the gate uses
    cells: tuple[int, ...]          # cells the estimate of each class is pooled over
    spread: tuple[float, ...]       # run-to-run standard deviation of a typical cell's rate (at the bound)
    # The whole-run effect, per class, in units of tau^2 (a run's logit shift squared): the spread
    # of the runs' estimated shifts (s^2 / (sum w^2)^2, K - 1 degrees of freedom) and the part of
    # it sampling and the run x cell effect explain. Zero where no cell could tell.
    whole: tuple[float, ...] = ()
    whole_noise: tuple[float, ...] = ()

    def of(self, cls: str) -> float:
        return self.bound[self.classes.index(cls)] if cls in self.classes else 0.0

    def shift(self, cls: str) -> float:
        """The estimated sd of a run's whole-run logit shift in `cls` (0 where sampling explains the spread)."""
        if cls not in self.classes or not self.whole:
            return 0.0
        k = self.classes.index(cls)
        return math.sqrt(max(0.0, self.whole[k] - self.whole_noise[k]))

    def whole_run(self, fired: np.ndarray, scored: np.ndarray) -> WholeRun | None:
        """The whole-run effect of a comparison, from both runs' pooled fired and scored counts
        (cells x classes, the tested classes in order); None where no class's runs could show one."""
        if not self.whole or not any(self.whole):
            return None
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(scored > 0, fired / np.where(scored > 0, scored, 1), 0.0)
        weights = p * (1 - p) * math.sqrt(1 + 1 / self.runs)
        return WholeRun(weights, self.runs, np.asarray(self.whole, float), np.asarray(self.whole_noise, float))

    def extra_variance(self, fired: np.ndarray, scored: np.ndarray) -> np.ndarray:
        """Cells x classes (the tested classes, in order): the variance a run x cell effect adds to
        a cell's rate difference, from both runs' pooled fired and scored counts."""
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(scored > 0, fired / np.where(scored > 0, scored, 1), 0.0)
        extra: np.ndarray = np.asarray(self.bound)[None, :] * p * (1 - p) * (1 + 1 / self.runs)
        return extra


@dataclass(frozen=True)
class WholeRun:
    """A comparison's whole-run effect: cell c of class k moves by weights[c, k] times one shift
    per class and run pair, of variance tau^2 (see the module docstring)."""

    weights: np.ndarray             # cells x classes: p (1 - p) sqrt(1 + 1/K)
    runs: int                       # K, the baseline's runs
    whole: np.ndarray               # classes: s^2 / (sum w^2)^2
    noise: np.ndarray               # classes: its part sampling and the run x cell effect explain

    @property
    def standard(self) -> np.ndarray:
        """Classes: the shift's sd the statistic is standardised by, tau at the median of its
        fiducial distribution. Only the weighing of cells and hypotheses depends on it: the
        null distribution is drawn, whatever the statistic (`draw`)."""
        from scipy.stats import chi2

        median = float(chi2.ppf(0.5, self.runs - 1))
        standard: np.ndarray = np.sqrt(np.maximum(0.0, (self.runs - 1) * self.whole / median - self.noise))
        return standard

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Reassignments x classes: one shared shift per class and reassignment, of a variance
        drawn from its fiducial distribution given the baseline's runs."""
        classes = len(self.whole)
        x = rng.chisquare(self.runs - 1, size=(size, classes))
        variance = np.maximum(0.0, (self.runs - 1) * self.whole[None] / x - self.noise[None])
        shifts: np.ndarray = rng.standard_normal((size, classes)) * np.sqrt(variance)
        return shifts


def run_variation(baseline: RunSummary, cells: Sequence[Cell], classes: Sequence[str]) -> RunVariation | None:
    """The run-to-run variation a baseline of several runs measured on `cells`; None for one run."""
    if len(baseline.runs) < 2:
        return None
    runs = [run_of(baseline, j) for j in range(len(baseline.runs))]
    fired = np.array([[[r.cells[c][cls].fired for cls in classes] for c in cells] for r in runs], float)
    scored = np.array([[[r.cells[c][cls].scored for cls in classes] for c in cells] for r in runs], float)
    rho, bound, used, spread, whole, noise = [], [], [], [], [], []
    for k in range(len(classes)):
        # The whole-run shifts first: each cell's run-to-run spread is measured net of them, so
        # that the run x cell estimate does not count the whole-run effect a second time.
        w, sampling, per_rho, shifts = _whole(fired[:, :, k], scored[:, :, k])
        est, hi, m, sd = _pooled(fired[:, :, k], scored[:, :, k], shifts)
        rho.append(est)
        bound.append(hi)
        used.append(m)
        spread.append(sd)
        whole.append(w)
        noise.append(sampling + max(est, 0.0) * per_rho)
    return RunVariation(len(runs), tuple(classes), tuple(rho), tuple(bound), tuple(used), tuple(spread),
                        tuple(whole), tuple(noise))


def _whole(fired: np.ndarray, scored: np.ndarray) -> tuple[float, float, float, np.ndarray]:
    """runs x cells of one class -> (s^2 / (sum w^2)^2, its binomial part, the part per unit of
    rho of a run x cell effect, and each run's fitted shift of each cell's rate, runs x cells):
    the spread between runs of S_j = sum_c w_c r_jc over the cells every run scored and some but
    not all of whose conversations fired, in units of tau^2 (see the module docstring)."""
    n, f = scored, fired
    total_n, total_f = n.sum(0), f.sum(0)
    usable = (n > 0).all(0) & (total_f > 0) & (total_f < total_n)
    if len(n) < 2 or not usable.any():
        return 0.0, 0.0, 0.0, np.zeros(n.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        every = np.where(total_n > 0, total_f / np.where(total_n > 0, total_n, 1), 0.0)
    n, f = n[:, usable], f[:, usable]
    p = total_f[usable] / total_n[usable]
    w = p * (1 - p)
    scale = float((w ** 2).sum()) ** 2
    level = (f / n) @ w
    s2 = float(np.var(level, ddof=1))
    # A run's S_j varies by sum_c w_c^2 p_c (1 - p_c) / n_jc from sampling alone (p's pooled
    # estimate made unbiased), averaged over the runs, and by sum_c w_c^2 rho w_c from a run x
    # cell effect.
    share = w * total_n[usable] / np.maximum(total_n[usable] - 1, 1)
    sampling = float(np.mean((w[None] ** 2 * share[None] / n).sum(1)))
    # Run j's shift, u_j = (S_j - mean) / sum w^2, moves every cell's rate by u_j p (1 - p).
    shifts = ((level - level.mean()) / math.sqrt(scale))[:, None] * (every * (1 - every))[None]
    return s2 / scale, sampling / scale, float((w ** 3).sum()) / scale, shifts


def _pooled(fired: np.ndarray, scored: np.ndarray, shifts: np.ndarray) -> tuple[float, float, int, float]:
    """runs x cells of one class -> (rho, its upper bound, cells used, typical spread of a cell's rate).

    Each cell scored in two or more runs, with some but not all of its conversations fired, gives
    (MSB - MSW) / n0, an unbiased estimate of its between-run variance; summed over cells and
    divided by the summed p (1 - p), rho. Each run's rates are taken net of its whole-run shift
    (`shifts`, runs x cells: zero where none was fitted). The bound is a bootstrap over cells (the
    cells are the independent units; a run x cell effect is drawn per cell), at `BOUND`, from a
    seed of the data."""
    n = scored
    f = fired
    runs_in = (n > 0).sum(0)
    total_n, total_f = n.sum(0), f.sum(0)
    usable = (runs_in >= 2) & (total_f > 0) & (total_f < total_n) & (total_n > runs_in)
    if not usable.any():
        return 0.0, 0.0, 0, 0.0
    n, f, shifts = n[:, usable], f[:, usable], shifts[:, usable]
    runs_in, total_n, total_f = runs_in[usable], total_n[usable], total_f[usable]
    p = total_f / total_n
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(n > 0, f / np.where(n > 0, n, 1) - shifts, 0.0)
    between = (n * (rates - p) ** 2).sum(0) / (runs_in - 1)                      # MSB
    within = (f - np.where(n > 0, f ** 2 / np.where(n > 0, n, 1), 0.0)).sum(0) / (total_n - runs_in)   # MSW
    n0 = (total_n - (n ** 2).sum(0) / total_n) / (runs_in - 1)
    var_cell = (between - within) / n0                                          # unbiased, may be < 0
    share = p * (1 - p)
    rho = float(var_cell.sum() / share.sum())
    rng = np.random.default_rng(int(1_000_003 * total_f.sum() + total_n.sum()) % 2**32)
    picks = rng.integers(0, len(p), size=(2_000, len(p)))
    boot = var_cell[picks].sum(1) / share[picks].sum(1)
    hi = max(0.0, float(np.quantile(boot, BOUND)), rho)
    typical = float(np.median(share))
    return rho, hi, int(len(p)), math.sqrt(hi * typical)
