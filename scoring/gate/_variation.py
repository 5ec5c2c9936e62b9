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

    def of(self, cls: str) -> float:
        return self.bound[self.classes.index(cls)] if cls in self.classes else 0.0

    def extra_variance(self, fired: np.ndarray, scored: np.ndarray) -> np.ndarray:
        """Cells x classes (the tested classes, in order): the variance a run x cell effect adds to
        a cell's rate difference, from both runs' pooled fired and scored counts."""
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(scored > 0, fired / np.where(scored > 0, scored, 1), 0.0)
        return np.asarray(self.bound)[None, :] * p * (1 - p) * (1 + 1 / self.runs)


def run_variation(baseline: RunSummary, cells: Sequence[Cell], classes: Sequence[str]) -> RunVariation | None:
    """The run-to-run variation a baseline of several runs measured on `cells`; None for one run."""
    if len(baseline.runs) < 2:
        return None
    runs = [run_of(baseline, j) for j in range(len(baseline.runs))]
    fired = np.array([[[r.cells[c][cls].fired for cls in classes] for c in cells] for r in runs], float)
    scored = np.array([[[r.cells[c][cls].scored for cls in classes] for c in cells] for r in runs], float)
    rho, bound, used, spread = [], [], [], []
    for k in range(len(classes)):
        est, hi, m, sd = _pooled(fired[:, :, k], scored[:, :, k])
        rho.append(est)
        bound.append(hi)
        used.append(m)
        spread.append(sd)
    return RunVariation(len(runs), tuple(classes), tuple(rho), tuple(bound), tuple(used), tuple(spread))


def _pooled(fired: np.ndarray, scored: np.ndarray) -> tuple[float, float, int, float]:
    """runs x cells of one class -> (rho, its upper bound, cells used, typical spread of a cell's rate).

    Each cell scored in two or more runs, with some but not all of its conversations fired, gives
    (MSB - MSW) / n0, an unbiased estimate of its between-run variance; summed over cells and
    divided by the summed p (1 - p), rho. The bound is a bootstrap over cells (the cells are the
    independent units; a run x cell effect is drawn per cell), at `BOUND`, from a seed of the data."""
    n = scored
    f = fired
    runs_in = (n > 0).sum(0)
    total_n, total_f = n.sum(0), f.sum(0)
    usable = (runs_in >= 2) & (total_f > 0) & (total_f < total_n) & (total_n > runs_in)
    if not usable.any():
        return 0.0, 0.0, 0, 0.0
    n, f = n[:, usable], f[:, usable]
    runs_in, total_n, total_f = runs_in[usable], total_n[usable], total_f[usable]
    p = total_f / total_n
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(n > 0, f / np.where(n > 0, n, 1), 0.0)
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
