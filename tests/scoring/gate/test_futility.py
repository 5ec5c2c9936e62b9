"""The sequential gate's pass side (simrun.scoring.gate._futility): a futility boundary by beta spending.

Two checks that can fail: the boundary's crossing chances, computed by recursive integration,
match a simulation of the process they describe (a fixed baseline and a growing candidate, so
the information grows by ever smaller steps); and on binomial conversations with a rise of
exactly the minimum effect, a class passes at most beta of the time, while the same rule at a
looser beta passes it measurably more often than the default's bound allows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simrun.scoring.gate._futility import Futility, beta_spent, se_at_rise

LOOKS, BASELINE = 10, 30


def boundaries(information: np.ndarray, beta: float, rho: float) -> np.ndarray:
    state, out = Futility(), []
    for j, info in enumerate(information, start=1):
        c, state = state.next(float(info), beta_spent(beta, j / LOOKS, rho))
        out.append(c)
    return np.array(out)


@pytest.mark.parametrize("beta, rho", [(0.10, 0.5), (0.30, 2.0)])
def test_the_boundary_spends_beta_as_the_spending_function_says(beta, rho):
    """Under a rise of exactly min_effect, W_j = (delta_j - min_effect) / se_j is the canonical
    process: the chance of first crossing by look j is beta * (j / LOOKS) ** rho."""
    se2 = 1 / BASELINE + 1 / np.arange(1, LOOKS + 1)        # the baseline fixed, the candidate growing
    information = 1 / se2
    c = boundaries(information, beta, rho)
    rng = np.random.default_rng(3)
    steps = rng.standard_normal((60_000, LOOKS)) * np.sqrt(np.diff(np.r_[0.0, information]))
    w = np.cumsum(steps, axis=1) / np.sqrt(information)
    crossed = np.logical_or.accumulate(w < -c, axis=1).mean(0)
    target = beta * (np.arange(1, LOOKS + 1) / LOOKS) ** rho
    assert np.all(np.abs(crossed - target) <= 4 * np.sqrt(target * (1 - target) / 60_000) + 1e-4), (crossed, target)


def miss_rate(beta: float, rng, paths: int = 3_000, cells: int = 40, base: float = 0.10,
              rise: float = 0.05, at_rise: bool = True) -> float:
    """How often a class whose rate rose by `rise` in every cell passes (its bound delta + c * se
    comes below `rise`, the minimum effect), on binomial conversations judged as the gate judges
    them: the mean cell difference, and the larger of its standard error under reassignment and
    under the rise (`at_rise`; else the former alone)."""
    nb = BASELINE
    fb = rng.binomial(nb, base, size=(paths, cells))
    fa = np.zeros((paths, cells))
    expected_se = np.sqrt(cells * (base * (1 - base) / nb
                                   + (base + rise) * (1 - base - rise) / np.arange(1, LOOKS + 1)[:, None])) / cells
    c = boundaries(1 / expected_se[:, 0] ** 2, beta, 0.5)
    passed = np.zeros(paths, bool)
    for j in range(1, LOOKS + 1):
        fa += rng.random((paths, cells)) < base + rise
        fired, total = fa + fb, nb + j
        delta = (fa / j - fb / nb).mean(1)
        se = np.sqrt((fired * (total - fired) / (j * nb * (total - 1))).sum(1)) / cells
        if at_rise:
            se = np.maximum(se, se_at_rise(fb, nb, j, rise))
        passed |= delta + c[j - 1] * se < rise
    return float(passed.mean())


def test_a_rise_of_the_minimum_effect_passes_at_most_beta_and_a_looser_pass_side_shows():
    """At beta 0.10 the rise passes at most 10% of the time (plus sampling error); the check sees
    a pass side that is too loose: beta 0.30, or the null's standard error alone."""
    rng = np.random.default_rng(11)
    paths = 3_000
    bound = 0.10 + 3 * math.sqrt(0.1 * 0.9 / paths)
    held = miss_rate(0.10, rng, paths)
    loose = miss_rate(0.30, rng, paths)
    null_se = miss_rate(0.10, rng, paths, at_rise=False)
    print(f"passed a rise of the minimum effect: {held:.3f} at beta 0.10; {loose:.3f} at beta 0.30; "
          f"{null_se:.3f} at beta 0.10 with the null's standard error alone")
    assert held <= bound, held
    assert loose > bound, loose
    assert null_se > bound, null_se
