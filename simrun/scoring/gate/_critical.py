"""The critical value a gate's max-T test will need, predicted by simulating A/A pairs at a
baseline's cell rates: what the sample-size advice (`advice.py`) compares a rise with."""

from __future__ import annotations

import functools
import math

import numpy as np

from simrun.scoring.gate._stats import _NULL_DRAWS, SEED, _isf, _special

# Repetitions past which `_binomial` searches each column's cdf rather than stepping through it
# (measured: the two cost the same at about 30).
_STEPWISE = 32


def critical_value(base_rates: np.ndarray, repetitions: int, slices: np.ndarray, *, alpha: float,
                   correction: str = "max-t", draws: int = _NULL_DRAWS, seed: int = SEED) -> float:
    """`_critical_value`, remembered (the draw is seeded: same inputs, same value; a dashboard or a
    second gate in one process asks again, and each takes a fifth of a second or more)."""
    rates, member = np.ascontiguousarray(base_rates, float), np.ascontiguousarray(slices, bool)
    return _remembered(rates.tobytes(), rates.shape, repetitions, member.tobytes(), member.shape, alpha,
                       correction, draws, seed)


@functools.lru_cache(maxsize=256)
def _remembered(rates: bytes, rates_shape: tuple[int, ...], repetitions: int, slices: bytes,
                slices_shape: tuple[int, ...], alpha: float, correction: str, draws: int, seed: int) -> float:
    return _critical_value(np.frombuffer(rates).reshape(rates_shape), repetitions, np.frombuffer(
        slices, bool).reshape(slices_shape), alpha=alpha, correction=correction, draws=draws, seed=seed)


def _critical_value(base_rates: np.ndarray, repetitions: int, slices: np.ndarray, *, alpha: float,
                    correction: str, draws: int, seed: int) -> float:
    """The statistic a hypothesis must reach to be flagged, when every cell holds `repetitions`
    conversations of each run and the cells' true rates are `base_rates` (cells x classes).

    max-T: the (1 - alpha) quantile of the largest statistic over every hypothesis, simulated
    from A/A pairs drawn at those rates (this is what the permutation test's threshold is, up to
    the draw). Holm and Bonferroni: the normal quantile at alpha over the number of hypotheses
    (their first step, the case of one class regressing alone).
    """
    rates = np.clip(np.asarray(base_rates, float), 0.0, 1.0)
    varies = (rates > 0) & (rates < 1)                  # the only cells that can ever differ
    cell_of, class_of = np.nonzero(varies)
    member = slices[:, cell_of]                         # slices x varying entries
    hyp = [(k, g) for k in range(rates.shape[1]) for g in range(len(slices))
           if (member[g] & (class_of == k)).any()]
    if not hyp:
        return math.inf
    if correction != "max-t":
        return float(_isf(alpha / len(hyp)))
    # Each entry is in a few hypotheses (its cell's slices): a sparse product over whole counts,
    # divided once, is exact where a dense one over fractions cost most of a gate's time. scipy
    # is imported here, not at the top: a command that never gates never pays for it.
    from scipy import sparse

    weights = sparse.csc_matrix(np.stack([member[g] & (class_of == k) for k, g in hyp], axis=1).astype(np.int64))
    p, n, total = rates[cell_of, class_of], repetitions, 2 * repetitions
    rng = np.random.default_rng(seed)
    base, cand = _binomial(rng, n, p, draws), _binomial(rng, n, p, draws)
    fired = base + cand
    sums = ((cand - base) @ weights) / n
    spread = ((fired * (total - fired)) @ weights) / (n * n * max(total - 1, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(spread > 0, sums / np.sqrt(spread), -np.inf)
    return float(np.quantile(t.max(1), 1 - alpha))


def _binomial(rng: np.random.Generator, n: int, p: np.ndarray, draws: int) -> np.ndarray:
    """`draws` x len(p) counts, each Binomial(n, p[j]), by inversion: a count is how many of the
    cdf's steps its uniform draw is past. Numpy's own sampler costs several times more at the few
    repetitions a gate sees, and the advice draws millions of them. At a few repetitions the steps
    are taken one at a time over every column (stopping where every cdf is 1.0 in floating point,
    beyond which no uniform draw can go); past `_STEPWISE`, where the advice searches up to
    thousands of repetitions, each column's draws are placed among its cdf's steps by a binary
    search instead: the same counts from the same draws, a tenth of the time at 3,000."""
    u = rng.random((draws, len(p)))
    if n > _STEPWISE:
        steps = np.arange(n)
        counts = np.empty(u.shape, np.int64)
        for j, pj in enumerate(p):
            counts[:, j] = np.searchsorted(_special().bdtr(steps, n, pj), u[:, j], side="left")
        return counts
    counts = np.zeros(u.shape, np.int64)
    for k in range(n):
        cdf = _special().bdtr(k, n, p)
        if (cdf >= 1.0).all():
            break
        counts += u > cdf
    return counts
