"""The sample-size advice a gate verdict gives: how likely a rise is caught, and at how many
repetitions per cell it would be.

It needs the baseline's cell rates (`stats.advice_rates`) and the slices tested. Its simulations
take a second or two, so they run only when asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from scoring.gate import stats
from scoring.gate.summary import TESTED


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
                self._critical[(safe, n)] = stats.critical_value(
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
