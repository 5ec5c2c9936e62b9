"""Rates with intervals: the Wilson interval written out is scipy's, to the last few bits."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from simrun.scoring.store import _rates as R


@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_the_wilson_interval_is_scipys(confidence):
    """Every count up to 30 conversations, and counts across larger runs (a demo run holds 350)."""
    counts = [(k, n) for n in range(1, 31) for k in range(n + 1)]
    counts += [(k, n) for n in (97, 350, 4000) for k in (0, 1, 2, n // 7, n // 2, n - 1, n)]
    for k, n in counts:
        ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
        assert R.wilson(k, n, confidence) == pytest.approx((ci.low, ci.high), abs=1e-12), (k, n)


def test_an_empty_rate_has_no_interval_and_the_ends_are_exact():
    assert R.wilson(0, 0) == (None, None)
    assert R.wilson(0, 7)[0] == 0.0 and R.wilson(7, 7)[1] == 1.0
    assert R.z_score(0.95) == pytest.approx(1.959963984540054, abs=1e-15)
