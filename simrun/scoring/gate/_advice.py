"""The sample-size advice a gate verdict gives: how likely a rise is caught, and at how many
repetitions per cell it would be.

It needs the baseline's cell rates (`advice_rates`, below) and the slices tested. Its simulations
take a second or two, so they run only when asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from simrun.scoring.gate import _critical as critical
from simrun.scoring.gate import _stats as stats
from simrun.scoring.gate._summary import TESTED
from simrun.scoring.store import rates as R


@dataclass(frozen=True, eq=False)
class Advice:
    """Predictions of power take the rates as estimated; the repetitions it names take them at the
    upper end of each class's 90% interval, so that the advice errs on the safe side of the
    noise of one baseline (at 5 repetitions the estimate of a class's rate is good to a fifth).
    """

    base_rates: np.ndarray          # cells x tested classes
    safe_rates: np.ndarray          # the same at the top of their interval
    slices: np.ndarray
    alpha: float
    correction: str
    min_effect: float
    _critical: dict[tuple[bool, int], float] = field(default_factory=dict)
    _needed: dict[float, dict[str, int | None]] = field(default_factory=dict)

    def critical_at(self, repetitions: int, safe: bool = False) -> float:
        """Simulated at 1, 2, 3, 4, 6, 8, 12, 16, ... repetitions; between them, interpolated in
        log(repetitions): it changes slowly, and each simulation takes a tenth of a second."""
        low = 2 ** int(math.log2(repetitions))
        grid = [g for g in (low, low * 3 // 2, low * 2) if g >= 1]
        below = max(g for g in grid if g <= repetitions)
        above = min(g for g in grid if g >= repetitions)
        values = []
        for n in {below, above}:
            if (safe, n) not in self._critical:
                self._critical[(safe, n)] = critical.critical_value(
                    self.safe_rates if safe else self.base_rates, n, self.slices, alpha=self.alpha,
                    correction=self.correction)
            values.append(self._critical[(safe, n)])
        if below == above or not all(math.isfinite(v) for v in values):
            return max(values)
        share = (math.log(repetitions) - math.log(below)) / (math.log(above) - math.log(below))
        return self._critical[(safe, below)] + share * (self._critical[(safe, above)] - self._critical[(safe, below)])

    def power(self, k: int, rise: float, repetitions: int) -> float:
        return stats.power_of_rise(rise, self.base_rates[:, k], repetitions, critical=self.critical_at(repetitions),
                                   alpha=self.alpha, min_effect=self.min_effect)

    def repetitions(self, rise: float) -> dict[str, int | None]:
        if rise not in self._needed:
            self._needed[rise] = {cls: stats.repetitions_for(rise, self.safe_rates[:, k],
                                                             lambda n: self.critical_at(n, safe=True),
                                                             alpha=self.alpha, min_effect=self.min_effect)
                                  for k, cls in enumerate(TESTED)}
        return self._needed[rise]


def advice_rates(fired: np.ndarray, scored: np.ndarray, *, upper: float | None = None) -> np.ndarray:
    """Cells x classes: the rate of each cell the sample-size advice assumes.

    A cell's observed rate (k of a few conversations) is noisy: most cells of a class at 9%
    show 0 of 5, and taken as they are they understate the spread the gate will meet. Each is
    drawn toward its class's pooled rate as far as the cells look alike (empirical Bayes: the
    spread between cells beyond what their sizes explain, by the method of moments), so a
    class that fires everywhere alike is taken as alike, and one that fires in a few goals keeps
    its shape. With `upper` (a one-sided confidence level), the rates are scaled up to the upper
    bound of the class's pooled rate: advice on the safe side of what the runs showed.
    """
    fired, scored = np.asarray(fired, float), np.asarray(scored, float)
    seen = scored > 0
    n = np.where(seen, scored, 1.0)
    rate = np.where(seen, fired / n, 0.0)
    total, hits = scored.sum(0), fired.sum(0)
    pooled = np.where(total > 0, hits / np.maximum(total, 1), 0.0)
    cells = np.maximum(seen.sum(0), 1)
    within = (np.where(seen, rate * (1 - rate) / np.maximum(n - 1, 1), 0.0)).sum(0) / cells
    spread = np.where(cells > 1, ((np.where(seen, rate - pooled, 0.0)) ** 2).sum(0) / np.maximum(cells - 1, 1), 0.0)
    between = np.maximum(spread - within, 0.0)
    weight = np.where(between > 0, between / (between + pooled * (1 - pooled) / n + 1e-12), 0.0)
    shrunk = np.where(seen, weight * rate + (1 - weight) * pooled, pooled)
    if upper is None:
        return shrunk
    z = float(stats._ppf(upper))
    # The upper bound of each class's pooled rate: simrun's one Wilson interval, on arrays.
    _, top = R.wilson_bounds(hits, np.maximum(total, 1), z)
    scale = np.where(pooled > 0, top / np.where(pooled > 0, pooled, 1.0), 1.0)
    return np.clip(np.where(pooled > 0, shrunk * scale, top), 0.0, 1.0)
