"""Cell-level statistics: the paired test against scipy, Holm against its definition, the power
formula against simulation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as st

from scoring.stats import (bonferroni, correct, detectable_rise, holm, minimum_detectable_effect,
                           paired_rise, power_of_rise)


def random_cells(rng, cells=40, repetitions=5):
    base = rng.uniform(0, 0.4, cells)
    a = rng.binomial(repetitions, base) / repetitions
    b = rng.binomial(repetitions, np.clip(base + rng.uniform(-0.05, 0.15), 0, 1)) / repetitions
    return a, b


def test_the_paired_test_is_scipys_one_sided_paired_t_test():
    rng = np.random.default_rng(7)
    for _ in range(50):
        a, b = random_cells(rng)
        rise = paired_rise(a, b)
        d = b - a
        # By hand: t = mean / (sd / sqrt(n)), one-sided upper tail of Student's t with n - 1 df.
        t = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))
        assert rise.p == pytest.approx(st.t.sf(t, len(d) - 1), rel=1e-9)
        assert rise.p == pytest.approx(st.ttest_rel(b, a, alternative="greater").pvalue, rel=1e-12)
        half = st.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
        assert (rise.low, rise.high) == pytest.approx((d.mean() - half, d.mean() + half))
        assert rise.delta == pytest.approx(b.mean() - a.mean())
        assert rise.cells == len(d)


def test_cells_that_all_moved_alike_get_the_exact_sign_flip_p():
    up = paired_rise([0.0, 0.2, 0.4], [0.2, 0.4, 0.6])
    assert up.p == pytest.approx(0.125) and up.delta == pytest.approx(0.2)
    assert paired_rise([0.2] * 4, [0.2] * 4).p == 1.0
    assert paired_rise([0.4] * 4, [0.2] * 4).p == 1.0
    one = paired_rise([0.0], [1.0])
    assert one.p == 0.5 and one.low is None
    assert paired_rise([], []).p is None


def test_a_fall_is_never_significant():
    rng = np.random.default_rng(3)
    a, b = random_cells(rng)
    assert paired_rise(b + 0.3, b).p > 0.99


def closed_testing(pvalues: dict[str, float]) -> dict[str, float]:
    """Holm by its definition: closed testing with Bonferroni tests of every intersection.

    The adjusted p of H_i is the largest, over the subsets S that hold i, of |S| * min_{j in S} p_j.
    """
    names = list(pvalues)
    out = {}
    for name in names:
        worst = 0.0
        for size in range(1, len(names) + 1):
            for subset in itertools.combinations(names, size):
                if name in subset:
                    worst = max(worst, min(1.0, size * min(pvalues[j] for j in subset)))
        out[name] = worst
    return out


def test_holm_is_closed_testing_with_bonferroni():
    rng = np.random.default_rng(11)
    for _ in range(200):
        m = int(rng.integers(1, 8))
        pvalues = {f"c{i}": float(p) for i, p in enumerate(rng.uniform(0, 0.2, m) ** 2)}
        assert holm(pvalues) == pytest.approx(closed_testing(pvalues))


def test_holm_and_bonferroni_by_hand():
    pvalues = {"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005}
    # Sorted: d .005 x4 = .02; a .01 x3 = .03; c .03 x2 = .06; b .04 x1 = .04 -> kept monotone: .06.
    assert holm(pvalues) == pytest.approx({"d": 0.02, "a": 0.03, "c": 0.06, "b": 0.06})
    assert bonferroni(pvalues) == pytest.approx({"a": 0.04, "b": 0.16, "c": 0.12, "d": 0.02})
    assert correct(pvalues, "holm") == holm(pvalues)
    assert holm({}) == {}


def test_power_formula_matches_simulation():
    """The approximation in power_of_rise against the gate's rule applied to simulated cells."""
    rng = np.random.default_rng(5)
    cells, reps, alpha, tests, min_effect = 70, 5, 0.05, 8, 0.05
    for base, rise in ((0.05, 0.07), (0.10, 0.09), (0.0, 0.06)):
        sims = 4000
        a = rng.binomial(reps, base, size=(sims, cells)) / reps
        b = rng.binomial(reps, base + rise, size=(sims, cells)) / reps
        with np.errstate(all="ignore"):
            p = np.nan_to_num(st.ttest_rel(b, a, axis=1, alternative="greater").pvalue, nan=1.0)
        caught = np.mean((p < alpha / tests) & ((b - a).mean(axis=1) >= min_effect))
        predicted = power_of_rise(rise, [base] * cells, reps, alpha=alpha, tests=tests, min_effect=min_effect)
        assert abs(predicted - caught) < 0.05, (base, rise, predicted, caught)


def test_detectable_rise_is_where_power_reaches_80_percent_and_shrinks_with_size():
    args = dict(alpha=0.05, tests=8, min_effect=0.05)
    mde = detectable_rise([0.1] * 70, 5, **args)
    assert power_of_rise(mde, [0.1] * 70, 5, **args) == pytest.approx(0.8, abs=1e-3)
    assert minimum_detectable_effect(70, 5, 0.1) == pytest.approx(mde)
    by_reps = [minimum_detectable_effect(70, r, 0.1) for r in (3, 5, 10, 20)]
    assert by_reps == sorted(by_reps, reverse=True)
    assert all(m > 0.05 for m in by_reps)          # never below the minimum effect
    assert minimum_detectable_effect(2, 1, 0.1) is None   # two cells, one conversation each: hopeless
