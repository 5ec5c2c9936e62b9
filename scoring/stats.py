"""Cell-level statistics for comparing two runs: the paired test, the correction, the power.

**The unit of inference is the cell** (persona x goal), not the conversation. The repetitions
of one cell share a persona, a goal and its fixtures, so they fail together: counting them as
independent samples fakes significance. Each run gives every cell one number per class, the
share of the cell's scored conversations where the class fired, and two runs are compared on
the cells they share: cell by cell, candidate minus baseline.

**The test is a one-sided paired t-test over cells** (`scipy.stats.ttest_rel`, alternative
"greater"): is the mean of the cell differences above zero? Why this one:

- Its estimand is the mean cell difference, which is exactly the rise the gate reports and
  holds to the minimum effect. The Wilcoxon signed-rank test asks about a pseudo-median, and
  with most cells at zero difference (ties, dropped or split) it is badly conservative: in a
  simulation of 70 cells x 5 repetitions at a 2% base rate it rejected 0.7% of A/A pairs at
  alpha 0.05, where the t-test rejected 5.0%.
- A cell rate is a mean of repetitions, and the mean over tens of cells of their differences
  is close to normal even when each cell is coarse (0%, 20%, 40%...). Pairing removes the
  between-cell spread of base rates (some goals are hard), which is most of the variance.
- It is deterministic and gives an interval for the delta from the same distribution.

Its weak spot is a matrix of very few cells, where normality is a stretch: the gate says how
small a rise it can see (`detectable_rise`), and `benchmarks/gate_calibration.py` measures the
false-alarm rate and the power on the demo matrix. When every cell moved by the same amount the
t statistic is undefined; the p-value is then the exact sign-flip one, 2**-cells for a rise.

**Many classes are tested at once**, so the p-values are corrected (Holm's step-down by
default, or Bonferroni): the chance that *any* class raises a false alarm stays at alpha.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy import stats as st

CONFIDENCE = 0.95
POWER = 0.80


@dataclass(frozen=True)
class PairedRise:
    """One class compared over the cells two runs share."""

    cells: int
    baseline_rate: float | None         # mean of the baseline's cell rates
    candidate_rate: float | None
    delta: float | None                 # mean of (candidate - baseline) cell rates
    low: float | None                   # two-sided CONFIDENCE interval of delta
    high: float | None
    p: float | None                     # one-sided, uncorrected; None: nothing to test


def paired_rise(baseline: Sequence[float], candidate: Sequence[float],
                confidence: float = CONFIDENCE) -> PairedRise:
    """The one-sided paired t-test of candidate > baseline over cells, with the delta's interval."""
    base, cand = np.asarray(baseline, float), np.asarray(candidate, float)
    if base.shape != cand.shape:
        raise ValueError("baseline and candidate must hold the same cells")
    cells = len(base)
    if cells == 0:
        return PairedRise(0, None, None, None, None, None, None)
    diff = cand - base
    delta = float(diff.mean())
    if np.ptp(diff) <= 1e-12:
        # Every cell moved alike: the t statistic is 0/0 or x/0. Of the 2**cells ways to swap
        # baseline and candidate within cells, only the observed one gives a rise this large.
        p = 0.5 ** cells if delta > 0 else 1.0
        low, high = (delta, delta) if cells > 1 else (None, None)
        return PairedRise(cells, float(base.mean()), float(cand.mean()), delta, low, high, p)
    p = float(st.ttest_rel(cand, base, alternative="greater").pvalue)
    low, high = st.t.interval(confidence, cells - 1, loc=delta, scale=st.sem(diff))
    return PairedRise(cells, float(base.mean()), float(cand.mean()), delta, float(low), float(high), p)


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm's step-down: the i-th smallest of m p-values times (m - i + 1), kept monotone, capped at 1."""
    m = len(pvalues)
    adjusted: dict[str, float] = {}
    running = 0.0
    for i, (name, p) in enumerate(sorted(pvalues.items(), key=lambda kv: kv[1])):
        running = max(running, min(1.0, (m - i) * p))
        adjusted[name] = running
    return adjusted


def bonferroni(pvalues: Mapping[str, float]) -> dict[str, float]:
    m = len(pvalues)
    return {name: min(1.0, m * p) for name, p in pvalues.items()}


CORRECTIONS = {"holm": holm, "bonferroni": bonferroni}


def correct(pvalues: Mapping[str, float], method: str) -> dict[str, float]:
    """Adjusted p-values: compare each with alpha and the family's error rate stays at alpha."""
    return CORRECTIONS[method](pvalues)


def _sd(base_rates: np.ndarray, n_base: np.ndarray, n_cand: np.ndarray, rise: float) -> float:
    """Standard deviation of one cell's difference when every cell's rate rises by `rise`."""
    cand = np.clip(base_rates + rise, 0.0, 1.0)
    var = base_rates * (1 - base_rates) / n_base + cand * (1 - cand) / n_cand
    return float(math.sqrt(var.mean()))


def power_of_rise(rise: float, base_rates: Sequence[float], n_base: Sequence[int] | int,
                  n_cand: Sequence[int] | int | None = None, *, alpha: float, tests: int,
                  min_effect: float) -> float:
    """The chance that the gate flags a class whose rate rises by `rise` in every cell.

    Cells are binomial at their base rate (baseline) and at base + rise (candidate), with the
    given scored conversations per cell. The gate flags when the t statistic passes the
    one-sided critical value at alpha / tests (Holm's first step, Bonferroni's only one: the
    case of one class regressing alone) and the observed rise reaches min_effect; the second
    condition is put on the t scale with the true spread, so the figure is an approximation,
    which `benchmarks/gate_calibration.py` checks against repeated runs.
    """
    base = np.asarray(base_rates, float)
    cells = len(base)
    if cells < 2 or rise <= 0:
        return 0.0
    nb = np.broadcast_to(np.asarray(n_base, float), base.shape)
    nc = nb if n_cand is None else np.broadcast_to(np.asarray(n_cand, float), base.shape)
    sd = _sd(base, nb, nc, rise)
    if sd == 0:
        return 1.0
    df = cells - 1
    scale = math.sqrt(cells) / sd
    threshold = max(float(st.t.ppf(1 - alpha / tests, df)), min_effect * scale)
    return float(st.nct.sf(threshold, df, rise * scale))


def detectable_rise(base_rates: Sequence[float], n_base: Sequence[int] | int,
                    n_cand: Sequence[int] | int | None = None, *, alpha: float, tests: int,
                    min_effect: float, power: float = POWER) -> float | None:
    """The smallest rise of a class rate the gate catches with `power`: its sample-size advice.

    None when no rise short of every conversation failing is caught that often: the matrix is
    too small (add cells or repetitions).
    """
    base = np.asarray(base_rates, float)
    if len(base) < 2:
        return None
    top = 1.0 - float(base.max())
    args = dict(alpha=alpha, tests=tests, min_effect=min_effect)
    if top <= 0 or power_of_rise(top, base, n_base, n_cand, **args) < power:
        return None
    return float(optimize.brentq(lambda r: power_of_rise(r, base, n_base, n_cand, **args) - power,
                                 1e-9, top, xtol=1e-5))


def minimum_detectable_effect(cells: int, repetitions: int, base_rate: float, *, alpha: float = 0.05,
                              tests: int = 8, min_effect: float = 0.05,
                              power: float = POWER) -> float | None:
    """`detectable_rise` for a matrix of `cells` cells x `repetitions`, every cell at `base_rate`."""
    return detectable_rise([base_rate] * cells, repetitions, alpha=alpha, tests=tests,
                           min_effect=min_effect, power=power)
