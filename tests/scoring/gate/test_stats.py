"""The gate's statistics: the permutation test against exact enumeration, its level on sparse
cells against the t-test it replaced, max-T against the family-wise rate, Holm against its
definition, and the power formula against simulation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as st

from simrun.scoring.gate._critical import critical_value
from simrun.scoring.gate._stats import (
    Family,
    bonferroni,
    compare,
    correct,
    detectable_rise,
    holm,
    power_of_rise,
    repetitions_for,
)


def family(fb, nb, fa, na, slices=None) -> Family:
    arrays = [np.atleast_2d(np.asarray(a)).reshape(len(fb), -1) for a in (fb, nb, fa, na)]
    cells = arrays[0].shape[0]
    return Family(*arrays, np.ones((1, cells), bool) if slices is None else np.asarray(slices, bool))


def exact(fb, nb, fa, na, slices) -> tuple[np.ndarray, np.ndarray]:
    """Every reassignment of one class's conversations within its cells, weighted by its
    hypergeometric probability: the exact one-sided p of each slice, and of the largest."""
    fb, nb, fa, na = map(np.asarray, (fb, nb, fa, na))
    fired, total = fb + fa, nb + na
    rate = lambda f_a, cells: f_a / na[cells] - (fired[cells] - f_a) / nb[cells]  # noqa: E731
    var = fired * (total - fired) / (na * nb * (total - 1))
    observed = np.array([(fa / na - fb / nb)[s].sum() / np.sqrt(var[s].sum()) for s in slices])
    supports = [range(max(0, fired[i] - nb[i]), min(fired[i], na[i]) + 1) for i in range(len(fb))]
    p_each, p_max = np.zeros(len(slices)), np.zeros(len(slices))
    for outcome in itertools.product(*supports):
        prob = np.prod([st.hypergeom.pmf(k, total[i], fired[i], na[i]) for i, k in enumerate(outcome)])
        diff = rate(np.array(outcome), np.arange(len(fb)))
        t = np.array([diff[s].sum() / np.sqrt(var[s].sum()) for s in slices])
        p_each += prob * (t >= observed - 1e-9)
        p_max += prob * (t.max() >= observed - 1e-9)
    return p_each, p_max


def test_the_permutation_p_is_the_exact_one_on_a_small_matrix():
    fb, nb = [0, 1, 0, 2], [3, 4, 3, 3]
    fa, na = [2, 3, 1, 2], [3, 3, 4, 3]
    slices = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1]], bool)
    tested = compare(family(fb, nb, fa, na, slices), alpha=0.05, permutations=40_000, seed=3)
    p_each, p_max = exact(fb, nb, fa, na, slices)
    assert tested.p[0] == pytest.approx(p_each, abs=0.006)
    # Single-step max-T for the largest statistic: the chance that any slice reaches it.
    top = int(np.nanargmax(tested.t[0]))
    assert tested.p_adjusted[0, top] == pytest.approx(p_max[top], abs=0.006)
    assert np.all(tested.p_adjusted[0] >= tested.p[0] - 1e-12)
    d = np.array(fa) / na - np.array(fb) / nb
    assert tested.delta[0, 0] == pytest.approx(d.mean())
    assert tested.delta[0, 1] == pytest.approx(d[:2].mean())


def test_the_same_counts_always_give_the_same_p():
    args = dict(alpha=0.05, permutations=2_000)
    f = family([0, 1, 2, 0], [5, 5, 5, 5], [2, 2, 3, 1], [5, 5, 5, 5])
    assert compare(f, **args).p_adjusted.tolist() == compare(f, **args).p_adjusted.tolist()


def test_a_fall_is_never_significant_and_nothing_fired_is_untested():
    fall = compare(family([3, 4, 2, 5], [5, 5, 5, 5], [0, 1, 0, 1], [5, 5, 5, 5]), alpha=0.05, permutations=2_000)
    assert fall.p[0, 0] > 0.9 and fall.delta[0, 0] < 0
    silent = compare(family([0, 0], [5, 5], [0, 0], [5, 5]), alpha=0.05, permutations=2_000)
    assert np.isnan(silent.p[0, 0]) and silent.tests == 0 and silent.delta[0, 0] == 0


def test_one_goal_broken_outright_is_caught_where_cells_alone_could_not_be():
    """The issue's case: 4 personas x 7 goals x 2 repetitions, one goal 0/8 -> 8/8, all else clean.
    A sign flip of whole cells can never go below 2**-4 there; moving conversations within
    their cells gives (1/6)**4."""
    cells, goal = 28, np.arange(28) % 7 == 3
    fb, n = np.zeros(cells, int), np.full(cells, 2)
    fa = np.where(goal, 2, 0)
    slices = np.array([np.ones(cells, bool)] + [np.arange(cells) % 7 == g for g in range(7)])
    tested = compare(family(fb, n, fa, n, slices), alpha=0.05, permutations=20_000)
    assert tested.p_adjusted[0, 1 + 3] == pytest.approx(6.0 ** -4, abs=4e-4)
    assert tested.p_adjusted[0, 1 + 3] < 0.05


@pytest.mark.parametrize("rate", [0.02, np.where(np.arange(70) % 7 == 0, 0.3, 0.0)], ids=["2%", "a seventh at 30%"])
def test_on_sparse_cells_the_permutation_test_holds_its_level(rate):
    """A/A pairs of 70 cells x 5 repetitions, mostly zeros (runtime_error in the demo is at 2%)."""
    rng = np.random.default_rng(8)
    sims, cells, reps = 600, 70, 5
    a = rng.binomial(reps, rate, size=(sims, cells))
    b = rng.binomial(reps, rate, size=(sims, cells))
    n = np.full(cells, reps)
    p = np.array([compare(family(a[i], n, b[i], n), alpha=0.05, permutations=1_000, seed=i).p[0, 0]
                  for i in range(sims)])
    rejected = np.mean(np.nan_to_num(p, nan=1.0) < 0.05)
    assert 0.02 <= rejected <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / sims), rejected


def test_max_t_holds_the_family_wise_rate_over_classes_and_slices():
    rng = np.random.default_rng(5)
    cells, reps, sims = 70, 5, 150
    slices = np.array([np.ones(cells, bool)] + [np.arange(cells) // 7 == g for g in range(10)]
                      + [np.arange(cells) % 7 == p for p in range(7)])
    rates = np.column_stack([rng.uniform(0, 0.15, cells), np.where(np.arange(cells) % 7 == 0, 0.3, 0.0),
                             np.full(cells, 0.02), rng.uniform(0, 0.3, cells)])
    n = np.full(rates.shape, reps)
    alarms = 0
    for i in range(sims):
        tested = compare(Family(rng.binomial(n, rates), n, rng.binomial(n, rates), n, slices),
                         alpha=0.05, permutations=1_000, seed=i)
        alarms += bool(np.nanmin(tested.p_adjusted) < 0.05)
        assert tested.tests > 40
    assert alarms / sims <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / sims)


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


def test_holm_over_the_permutation_p_values_is_more_conservative_than_max_t():
    rng = np.random.default_rng(2)
    cells = 70
    slices = np.array([np.ones(cells, bool)] + [np.arange(cells) // 7 == g for g in range(10)])
    rates = np.full((cells, 3), 0.1)
    n = np.full(rates.shape, 5)
    f = Family(rng.binomial(n, rates), n, rng.binomial(n, rates + [0.12, 0, 0]), n, slices)
    maxt = compare(f, alpha=0.05, permutations=4_000)
    by_holm = compare(f, alpha=0.05, correction="holm", permutations=4_000)
    assert np.allclose(maxt.p, by_holm.p, equal_nan=True)
    assert np.nanmin(by_holm.p_adjusted - maxt.p_adjusted) >= -0.01
    assert by_holm.critical > maxt.critical


def test_the_predicted_critical_value_is_the_permutation_tests_own():
    rng = np.random.default_rng(4)
    cells = 70
    slices = np.array([np.ones(cells, bool)] + [np.arange(cells) // 7 == g for g in range(10)])
    rates = np.column_stack([rng.uniform(0, 0.2, cells), np.full(cells, 0.05)])
    n = np.full(rates.shape, 5)
    observed = [compare(Family(rng.binomial(n, rates), n, rng.binomial(n, rates), n, slices), alpha=0.05,
                        permutations=2_000, seed=i).critical for i in range(8)]
    assert critical_value(rates, 5, slices, alpha=0.05) == pytest.approx(np.mean(observed), abs=0.12)


def gate_rule_power(rng, base, rise, reps, sims=300, alpha=0.05, min_effect=0.05) -> float:
    """How often the gate's rule (corrected p < alpha, upper bound >= min effect) flags a rise
    in every cell, on simulated binomial cells: one class, all cells and ten goals as slices."""
    cells = len(base)
    slices = np.array([np.ones(cells, bool)] + [np.arange(cells) // 7 == g for g in range(cells // 7)])
    n = np.full((cells, 1), reps)
    caught = 0
    for i in range(sims):
        tested = compare(Family(rng.binomial(n, base[:, None]), n,
                                rng.binomial(n, np.clip(base + rise, 0, 1)[:, None]), n, slices),
                         alpha=alpha, permutations=1_000, seed=i)
        caught += tested.p_adjusted[0, 0] < alpha and tested.upper(0, 0, alpha) >= min_effect
    return caught / sims


@pytest.mark.parametrize("base_rate, rise, reps", [(0.05, 0.07, 5), (0.10, 0.05, 12)])
def test_power_formula_matches_simulation(base_rate, rise, reps):
    rng = np.random.default_rng(5)
    cells = 70
    base = np.full(cells, base_rate)
    slices = np.array([np.ones(cells, bool)] + [np.arange(cells) // 7 == g for g in range(10)])
    critical = critical_value(base[:, None], reps, slices, alpha=0.05)
    predicted = power_of_rise(rise, base, reps, critical=critical, alpha=0.05, min_effect=0.05)
    caught = gate_rule_power(rng, base, rise, reps)
    assert abs(predicted - caught) < 0.06, (predicted, caught)


def test_detectable_rise_and_the_repetitions_advice_agree_and_shrink_with_size():
    base = np.full(70, 0.1)
    slices = np.array([np.ones(70, bool)])
    at = {n: critical_value(base[:, None], n, slices, alpha=0.05) for n in (3, 5, 10, 20)}
    args = dict(alpha=0.05, min_effect=0.05)
    by_reps = [detectable_rise(base, n, critical=at[n], **args) for n in (3, 5, 10, 20)]
    assert by_reps == sorted(by_reps, reverse=True)
    assert power_of_rise(by_reps[1], base, 5, critical=at[5], **args) == pytest.approx(0.8, abs=1e-3)
    needed = repetitions_for(by_reps[1], base, lambda n: at.get(n) or critical_value(base[:, None], n, slices,
                                                                                    alpha=0.05), **args)
    assert needed in (5, 6)   # the rise detectable at 5 repetitions needs about 5
    assert detectable_rise([0.1, 0.1], 1, critical=at[3], **args) is None   # two cells of one: hopeless
    # A rise equal to the minimum effect is caught with 80% power, given enough repetitions.
    n = repetitions_for(0.05, base, lambda r: critical_value(base[:, None], r, slices, alpha=0.05), **args)
    assert n is not None and power_of_rise(0.05, base, n, critical=critical_value(
        base[:, None], n, slices, alpha=0.05), **args) >= 0.8


def test_the_advice_s_binomial_draws_have_the_binomial_s_distribution():
    from simrun.scoring.gate._critical import _binomial

    p = np.array([0.0, 0.004, 0.07, 0.5, 0.93, 1.0])
    for n in (1, 3, 12, 40):
        counts = _binomial(np.random.default_rng(n), n, p, 100_000)
        assert counts.min() >= 0 and counts.max() <= n
        for j, pj in enumerate(p):
            seen = np.bincount(counts[:, j], minlength=n + 1) / len(counts)
            expected = st.binom.pmf(np.arange(n + 1), n, pj)
            # Within 5 standard errors of each probability, and exactly 0 or n where p is 0 or 1.
            assert np.all(np.abs(seen - expected) <= 5 * np.sqrt(expected * (1 - expected) / len(counts)) + 1e-12), \
                (n, pj, seen, expected)
