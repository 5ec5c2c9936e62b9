"""The sequential gate's pass side: a futility boundary per class, by beta spending.

Passing a class whose rate truly rose by `min_effect` is a type II error, not a false alarm:
the fixed gate sized for 80% power commits it 20% of the time. So the pass side is held at
the design's beta, not at alpha, and per class, not over the family: a rise sits in one class,
and the gate passes only when every class does, so the chance of passing that class's rise is
at most the chance of that one class crossing its boundary.

**The boundary** (Jennison and Turnbull 2000, ch. 7, error spending; Lan and DeMets 1983 for
the spending function). Under a rise of exactly `min_effect`, a class's estimate at look j,
`delta_j`, is close to normal with standard error `se_j`; the baseline is the same at every
look and the candidate's conversations only accumulate, so `Cov(delta_i, delta_j) =
se_j ** 2` for i < j: the canonical joint distribution (J&T ch. 3), with information
`I_j = 1 / se_j ** 2`. The score `S_j = (delta_j - min_effect) * I_j` then has independent
increments of variance `I_j - I_{j-1}`. The class passes at look j when `S_j` falls below
`b_j`, equivalently when `delta_j + c_j * se_j < min_effect` with `c_j = -b_j / sqrt(I_j)`;
`b_j` is chosen so that the chance of first crossing at look j, under the rise, is the look's
share of beta, `beta * (t_j ** rho - t_{j-1} ** rho)`, given the information so far (the
information at later looks need not be known: that is what error spending is for). The chance
is computed by recursive numerical integration of the score's density over the region not yet
crossed (J&T ch. 19). The boundary is non-binding: computed as if the fail side never stopped
the run, so the fail side's alpha holds whatever the pass side does, and the fail side stopping
first only lowers the chance of a wrong pass.

**The standard error is the one under the rise** (`se_at_rise`). The fail side's standard error
is the null's (conversations reassigned between the runs, so both runs' rates pooled). Against
a large baseline and a candidate of a few repetitions the pooled rate is the baseline's, lower
than the candidate's under a rise, so that standard error is too small exactly when a rise is
there, and a bound built on it passed a rise of the minimum effect in 14% of simulated cases at
beta 0.10 (tests/scoring/gate/test_futility.py). The pass side uses the larger of the two: the
null's, and the one the estimate has when every cell's rate rose by `min_effect` from the
baseline's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

_POINTS = 200               # grid points for the score's density between a look's boundary and +8 sd
_WIDTH = 8.0                # the grid reaches this many standard deviations above the boundary and 0


def se_at_rise(base_fired: npt.ArrayLike, base_scored: npt.ArrayLike, cand_scored: npt.ArrayLike,
               rise: float) -> float | np.ndarray:
    """The standard error of the mean cell difference when every cell's rate is the baseline's
    in the baseline and `rise` above it (capped at 1) in the candidate. Arrays of the cells both
    runs scored, on the last axis (earlier axes: as many cases at once)."""
    fired, nb, na = np.broadcast_arrays(*(np.asarray(a, float) for a in (base_fired, base_scored, cand_scored)))
    if not fired.shape[-1]:
        return 0.0
    pb = fired / nb
    pa = np.clip(pb + rise, 0.0, 1.0)
    se: float | np.ndarray = np.sqrt(np.sum(pb * (1 - pb) / nb + pa * (1 - pa) / na, axis=-1)) / fired.shape[-1]
    return se


def beta_spent(beta: float, t: float, rho: float) -> float:
    """Beta spent by information time t (a look's rounds over the cap): beta * t ** rho."""
    return beta * float(min(max(t, 0.0), 1.0) ** rho)


@dataclass(frozen=True)
class Futility:
    """One class's pass side after its looks so far: the information of the last look, the beta
    spent, and the density of the score on the region where it has not yet crossed (on a grid)."""

    information: float = 0.0
    spent: float = 0.0
    grid: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)
    density: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)

    def next(self, information: float, spent: float) -> tuple[float, Futility]:
        """The multiplier c of this look (pass when delta + c * se < min_effect), with `information`
        = 1 / se ** 2 now and `spent` the beta spent by now in all; and the state after it.

        Information that did not grow (an estimate of se that rose) is taken as the last look's:
        the score then does not move, and the look can only spend what the grid already holds."""
        from scipy.optimize import brentq
        from scipy.special import ndtr, ndtri

        share = spent - self.spent
        info = max(information, self.information)
        sd = math.sqrt(info)
        if not self.grid.size:                                  # the first look: S ~ N(0, I)
            c = math.inf if share <= 0 else float(-ndtri(share))
            low = -c * sd if math.isfinite(c) else -_WIDTH * sd
            grid = np.linspace(low, max(low, 0.0) + _WIDTH * sd, _POINTS)
            density = np.exp(-0.5 * (grid / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
            return c, Futility(info, spent if share > 0 else self.spent, grid, density)
        # An increment finer than the grid cannot be integrated on it; the score moves at least
        # two grid steps (a look with hardly more information is nearly a repeat of the last).
        step = max(math.sqrt(max(info - self.information, 0.0)), 2 * (self.grid[1] - self.grid[0]))
        weights = self.density * _trapezoid(self.grid)

        def crossing(b: float) -> float:
            return float(weights @ ndtr((b - self.grid) / step))

        if share <= 0:
            b = self.grid[0] - _WIDTH * step                    # nothing to spend: no pass here
        else:
            low, high = self.grid[0] - _WIDTH * step, self.grid[-1] + _WIDTH * step
            if crossing(high) <= share:                         # what is left is less than the share
                b = high
            else:
                b = brentq(lambda x: crossing(x) - share, low, high, xtol=1e-10 * sd, rtol=1e-12)
        grid = np.linspace(b, max(b, 0.0) + _WIDTH * sd, _POINTS)
        kernel = np.exp(-0.5 * ((grid[:, None] - self.grid[None, :]) / step) ** 2) / (step * math.sqrt(2 * math.pi))
        density = kernel @ weights
        done = self.spent + (share if share > 0 else 0.0)
        return float(-b / sd), Futility(info, done, grid, density)


def _trapezoid(grid: np.ndarray) -> np.ndarray:
    """Trapezoid weights of an evenly spaced grid."""
    h = grid[1] - grid[0] if len(grid) > 1 else 1.0
    w = np.full(len(grid), h)
    w[0] = w[-1] = h / 2
    return w
