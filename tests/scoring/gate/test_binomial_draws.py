"""The advice's binomial draws are the inverse cdf of their uniform draws, on both of its paths:
stepping through the cdf at a few repetitions, and searching it at the thousands the advice
reaches when it sizes a small minimum effect."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from simrun.scoring.gate._critical import _STEPWISE, _binomial


@pytest.mark.parametrize("n", [1, 5, _STEPWISE, _STEPWISE + 1, 400, 5_000])
def test_each_count_is_the_smallest_whose_cdf_reaches_its_uniform_draw(n):
    p = np.array([0.0, 1e-6, 0.01, 0.1, 0.3, 0.5, 0.9, 1.0])
    uniform = np.random.default_rng(3).random((500, len(p)))     # what _binomial draws from the same seed
    counts = _binomial(np.random.default_rng(3), n, p, 500)
    assert counts.dtype == np.int64 and counts.shape == (500, len(p))
    assert np.array_equal(counts, binom.ppf(uniform, n, p))
