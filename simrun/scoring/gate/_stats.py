"""Statistics for comparing two runs: the permutation test over cells and slices, and its power.

**What is compared.** Each run gives every cell (persona x goal) and class the conversations
where the class fired and those where it was scored. The gate asks whether the candidate's
rates rose, over all cells (a class's overall test) and over each slice of cells: each goal and
each persona. One class x one set of cells is one hypothesis; a matrix of 10 goals and 7
personas gives 18 per class.

**The statistic** of a hypothesis is the sum over its cells of the cell's rate difference
(candidate minus baseline), divided by the standard deviation that sum has when the two runs'
conversations of each cell are shuffled between the runs: T = sum(d) / sqrt(sum(v)), where a
cell with F fired of N scored conversations (n_a in the candidate, n_b in the baseline) has
v = F (N - F) / (n_a n_b (N - 1)). Its estimand, the mean cell difference, is the rise the gate
reports; a cell where nothing fired in either run adds nothing.

**The test** is a permutation test: when the runtime did not change, a cell's conversations in
the two runs are draws from the same distribution, so which run each came from is arbitrary.
Reassigning them at random within every cell, `permutations` times, gives each statistic's
distribution with no assumption of normality, which is what makes it exact on sparse cells that are mostly zeros
(the paired t-test it replaces rejected runtime_error in 9% of A/A pairs at a nominal 5%).
A cell is never split: the unit of the test stays the cell, and conversations move only within
their own cell, so easy and hard cells are never mixed. A conversation moves whole, with every
class it fired (`simrun.scoring.gate._joint`), so the statistics keep their joint distribution whatever
the correlation between classes, which max-T needs; only a summary that does not say which
repetition fired what (a baseline file of format 1) falls back to drawing each class's fired
count on its own (a hypergeometric draw given the cell's totals).

**Many hypotheses at once**: the gate's false-alarm rate is held across all classes and slices
by max-T (Westfall and Young's step-down procedure): a hypothesis's adjusted p-value is the share
of reassignments whose largest statistic, over the hypotheses not yet rejected, reaches its own.
Because every hypothesis is read off the same reassignments, the overlap of goal and persona
slices with each other and with the overall test is accounted for, rather than paid for as if
they were independent. Holm's or Bonferroni's correction of the per-hypothesis permutation
p-values is offered too: simpler, and more conservative.

**When runs differ as a whole** (a baseline blessed from several runs measured it,
`simrun.scoring.gate._variation`), the null is wider: a cell's conversations are exchangeable
across runs once each run's cell rate has moved by a run x cell effect of the measured variance.
Each cell's variance then adds that effect's (`Family.extra`), in the statistic's denominator and
in its null distribution: every reassignment adds to each cell's difference a normal draw of that
variance, so the max-T threshold and the p-values account for it. A whole-run shift, shared by
every cell of a run (`Family.whole`), is one draw per class and reassignment added to every cell
of the class by its weight, and adds to a hypothesis's variance the square of its summed weight
(cells that share a shift do not average it out). The test is no longer exact: it is as
calibrated as the variance estimates and the normal effects are, which
`benchmarks/gate_calibration.py --parts runs` measures.

**The reassignments are drawn from a seed of the compared data** (`seed_of`): the same two
runs always get the same verdict, and two different comparisons get draws of their own. A
Monte Carlo p-value, (1 + count) / (1 + draws), holds its level averaged over the draws; one
seed fixed for every comparison would give every comparison of the same cells the same draws,
so whatever error those draws make (a threshold a little low, or high) would be made by every
gate of a pipeline at once, rather than averaging out. At 4 draws, three sets of cells judged
with one fixed seed alarmed in 1, 4 and 30 of 100 A/A assignments each, where their exact
rates gave 17 to 19 (tests/scoring/gate/test_seed.py).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike

from simrun.scoring.gate._joint import Conversations, cell_terms, could_vary, reassignments
from simrun.scoring.gate._variation import WholeRun

CONFIDENCE = 0.95
POWER = 0.80
PERMUTATIONS = 10_000
SEED = 20_261_130               # mixed into every comparison's seed, and the advice's fixed seed
_CHUNK = 1_000                  # reassignments drawn at once (bounds memory)
_NULL_DRAWS = 2_000             # simulated A/A pairs behind a predicted critical value
_TIE = 1e-9


def _special() -> ModuleType:
    """scipy.special, imported on first use: the standard normal's functions as scipy.stats.norm
    computes them (its ppf is `ndtri`, its sf `ndtr` of -x), without importing scipy.stats,
    which costs a second that every run writing its dashboard would otherwise pay."""
    from scipy import special

    module: ModuleType = special    # (scipy has no type information: mypy sees its modules as Any)
    return module


def _ppf(q: float) -> float:
    return float(_special().ndtri(q))


def _isf(q: float) -> float:
    return float(-_special().ndtri(q))


def _sf(x: float) -> float:
    return float(_special().ndtr(-x))


@dataclass(frozen=True)
class Family:
    """Every hypothesis of a comparison: per-cell counts of both runs, and the slices of cells.

    Arrays are cells x classes; `slices` is slices x cells (True where the cell belongs).
    """

    fired_base: np.ndarray
    scored_base: np.ndarray
    fired_cand: np.ndarray
    scored_cand: np.ndarray
    slices: np.ndarray
    # Both runs' conversations, when the runs say which repetition fired what: reassigned whole,
    # every class at once (simrun.scoring.gate._joint). Without them, each class is drawn on its own.
    conversations: Conversations | None = None
    # Cells x classes: the variance run-to-run variation adds to each cell's rate difference
    # (`simrun.scoring.gate._variation`), or None where the runs are taken not to differ as a whole.
    extra: np.ndarray | None = None
    # A whole-run effect (`simrun.scoring.gate._variation.WholeRun`): one shift per class shared
    # by every cell of a run, or None where the baseline's runs could not show one.
    whole: WholeRun | None = None

    def __post_init__(self) -> None:
        shapes = {a.shape for a in (self.fired_base, self.scored_base, self.fired_cand, self.scored_cand,
                                    *(() if self.extra is None else (self.extra,)))}
        if len(shapes) != 1 or self.slices.shape[1] != self.fired_base.shape[0]:
            raise ValueError("counts must be cells x classes, and slices x cells")


@dataclass(frozen=True)
class Tested:
    """Classes x slices: each hypothesis's estimate and p-values (NaN where nothing could vary)."""

    cells: np.ndarray           # cells scored in both runs
    baseline_rate: np.ndarray   # mean cell rate over those cells
    candidate_rate: np.ndarray
    delta: np.ndarray           # mean cell difference
    se: np.ndarray              # its standard error under reassignment
    t: np.ndarray
    p: np.ndarray               # one-sided permutation p-value, uncorrected
    p_adjusted: np.ndarray      # corrected over every hypothesis tested
    tests: int                  # hypotheses in the family
    critical: float             # the statistic one hypothesis alone must reach to be flagged

    def interval(self, k: int, g: int, confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
        """Two-sided normal interval of delta, from the same standard error the test uses."""
        if not self.cells[k, g]:
            return None, None
        half = float(_ppf(0.5 + confidence / 2) * self.se[k, g])
        delta = float(self.delta[k, g])
        return max(-1.0, delta - half), min(1.0, delta + half)

    def upper(self, k: int, g: int, alpha: float) -> float:
        """One-sided (1 - alpha) upper bound of delta: the rise is shown to be below this."""
        return float(self.delta[k, g] + _ppf(1 - alpha) * self.se[k, g])


def _cell_terms(fb: np.ndarray, nb: np.ndarray, fa: np.ndarray, na: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per cell and class: scored in both runs, rate difference, and its variance under reassignment."""
    fb, nb, fa, na = (np.asarray(a, float) for a in (fb, nb, fa, na))
    both, _, var = cell_terms(fa, na, fb, nb)
    rate_b = np.where(both, fb / np.where(both, nb, 1.0), 0.0)
    rate_a = np.where(both, fa / np.where(both, na, 1.0), 0.0)
    return both, rate_b, rate_a, var


def _hypotheses(family: Family) -> tuple[np.ndarray, ...]:
    """Which (class, slice) can be tested, and the weight of each cell in each statistic."""
    both, rate_b, rate_a, var = _cell_terms(family.fired_base, family.scored_base,
                                            family.fired_cand, family.scored_cand)
    if family.extra is not None:
        var = var + np.where(both, family.extra, 0.0)
    members = family.slices[None, :, :] & both.T[:, None, :]            # classes x slices x cells
    cells = members.sum(2)
    total_var = np.einsum("kgc,ck->kg", members, var)
    if family.whole is not None:
        # A shift shared by the cells adds the square of its summed weight, not a sum of squares.
        shared = np.einsum("kgc,ck->kg", members, np.where(both, family.whole.weights, 0.0))
        total_var = total_var + (shared * family.whole.standard[:, None]) ** 2
    testable = total_var > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        sums = np.einsum("kgc,ck->kg", members, rate_a - rate_b)
        base = np.einsum("kgc,ck->kg", members, rate_b) / cells
        cand = np.einsum("kgc,ck->kg", members, rate_a) / cells
        delta = sums / cells
        se = np.sqrt(total_var) / cells
        t = np.where(testable, sums / np.sqrt(np.where(testable, total_var, 1.0)), np.nan)
    return members, cells, base, cand, delta, se, t, testable, total_var


def _testable_somehow(family: Family) -> np.ndarray:
    """Classes x slices: some reassignment of the conversations could test the hypothesis (a cell
    of the slice where both runs hold a conversation, with two or more scored and some but not
    all of them fired, so that each run can get a scored one and the rates can differ)."""
    conv = family.conversations
    assert conv is not None     # called only for a family whose runs say which repetition fired what
    cells = family.fired_base.shape[0]
    held_cand = np.bincount(conv.cell[conv.candidate], minlength=cells) > 0
    held_base = np.bincount(conv.cell[~conv.candidate], minlength=cells) > 0
    can = could_vary(np.asarray(family.scored_base) + np.asarray(family.scored_cand),
                     np.asarray(family.fired_base) + np.asarray(family.fired_cand), held_base, held_cand)
    testable: np.ndarray = np.einsum("gc,ck->kg", family.slices.astype(int), can.astype(int)) > 0
    return testable


def seed_of(family: Family) -> int:
    """The comparison's own seed: a hash of everything it compares (both runs' counts, and which
    conversation fired what in which run, when known), mixed with SEED."""
    digest = hashlib.blake2b(str(SEED).encode(), digest_size=8)
    arrays = [family.fired_base, family.scored_base, family.fired_cand, family.scored_cand, family.slices]
    if family.conversations is not None:
        conv = family.conversations
        arrays += [conv.cell, conv.candidate, conv.fired, conv.scored]
    for a in arrays:
        a = np.ascontiguousarray(a)
        digest.update(str(a.shape).encode())
        digest.update(a.astype(np.int64 if a.dtype.kind in "iub" else a.dtype).tobytes())
    return int.from_bytes(digest.digest(), "little")


def compare(family: Family, *, alpha: float, correction: str = "max-t", permutations: int = PERMUTATIONS,
            seed: int | None = None) -> Tested:
    """Every hypothesis of the family tested at once; see the module docstring. `seed`: the
    draws' seed (None: the comparison's own, `seed_of`)."""
    members, cells, base, cand, delta, se, t, testable, total_var = _hypotheses(family)
    fb, nb, fa, na = (np.asarray(a, np.int64) for a in (family.fired_base, family.scored_base,
                                                         family.fired_cand, family.scored_cand))
    fired, total = fb + fa, nb + na
    # Only cells whose reassignment can change something are drawn: some fired, not all.
    varies = (nb > 0) & (na > 0) & (fired > 0) & (fired < total)
    where = np.argwhere(varies)                                          # (cell, class) pairs
    cell_of, class_of = where[:, 0], where[:, 1]
    # The family must not depend on which run each conversation came from, or the test is not
    # exact: when conversations move whole, a cell's scored count in each run moves with them,
    # so whether a hypothesis can be tested at all changes between reassignments. The family is
    # every hypothesis that some reassignment could test; one the observed runs cannot test
    # takes part with the lowest statistic (it can never be the largest, and it still raises
    # the reassignments' largest where it can be tested there).
    in_family = testable if family.conversations is None else testable | _testable_somehow(family)
    hyp = np.argwhere(in_family)                                         # (class, slice) pairs
    weights = np.zeros((len(where), len(hyp)))
    for h, (k, g) in enumerate(hyp):
        if testable[k, g]:                                               # (used by the per-class draw only)
            rows = (class_of == k) & members[k, g, cell_of]
            weights[rows, h] = 1.0 / math.sqrt(total_var[k, g])
    observed = np.where(testable, t, -np.inf)[in_family]
    draw, chunk = reassignments(family, hyp, where, weights, _CHUNK)
    rng = np.random.default_rng(seed_of(family) if seed is None else seed)
    raw, adjusted, critical = family_test(observed, draw, chunk, rng, alpha=alpha, correction=correction,
                                          permutations=permutations)
    p = np.full(testable.shape, np.nan)
    p_adjusted = np.full(testable.shape, np.nan)
    shown = testable[in_family]                                          # the others have no p-value to show
    p[testable], p_adjusted[testable] = raw[shown], adjusted[shown]
    return Tested(cells, base, cand, delta, se, t, p, p_adjusted, int(len(hyp)), critical)


def family_test(observed: np.ndarray, draw: Callable[[np.random.Generator, int], np.ndarray], chunk: int,
                rng: np.random.Generator, *, alpha: float, correction: str, permutations: int
                ) -> tuple[np.ndarray, np.ndarray, float]:
    """The family's p-values from its observed statistics (one per hypothesis) and draws of them
    under the null (`draw(rng, size)` -> draws x hypotheses, `chunk` at a time): the raw
    one-sided p-values, those corrected over the family, and the critical value. The one
    procedure of the unpaired test (`compare`) and the paired one (`simrun.scoring.gate._paired`)."""
    hypotheses = len(observed)
    raw_hits = np.zeros(hypotheses)
    step_hits = np.zeros(hypotheses)
    order = np.argsort(-observed, kind="stable")
    tol = _TIE * np.maximum(1.0, np.abs(observed))
    largest = np.full(permutations, -np.inf)
    done = 0
    while done < permutations and hypotheses:
        size = min(chunk, permutations - done)
        stats = draw(rng, size)                                          # reassignments x hypotheses
        raw_hits += (stats >= observed - tol).sum(0)
        ordered = stats[:, order]
        # Step-down: hypothesis j (in decreasing order of its statistic) against the largest
        # statistic among itself and those below it.
        tail_max = np.maximum.accumulate(ordered[:, ::-1], axis=1)[:, ::-1]
        step_hits[order] += (tail_max >= (observed - tol)[order]).sum(0)
        largest[done:done + size] = tail_max[:, 0]
        done += size
    raw = (1 + raw_hits) / (permutations + 1)
    if not hypotheses:
        critical = math.inf
    elif correction == "max-t":
        critical = float(np.quantile(largest, 1 - alpha))
    else:
        critical = float(_isf(alpha / hypotheses))
    if correction == "max-t":
        adjusted = (1 + step_hits) / (permutations + 1)
        adjusted[order] = np.maximum.accumulate(adjusted[order])         # keep the step-down monotone
    else:
        names = [str(i) for i in range(hypotheses)]
        corrected = correct(dict(zip(names, raw)), correction)
        adjusted = np.array([corrected[n] for n in names])
    return raw, adjusted, critical


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


# --- power and sample-size advice ---------------------------------------------------------------

def _expected_spread(p: np.ndarray, var_p: np.ndarray, q: np.ndarray, var_q: np.ndarray, n_base: np.ndarray,
                     n_cand: np.ndarray) -> float:
    """E[sum of v] over cells when the baseline fires at p and the candidate at q, with the given
    per-conversation variances."""
    mean = n_base * p + n_cand * q
    var = n_base * var_p + n_cand * var_q
    total = n_base + n_cand
    return float(np.sum((total * mean - var - mean ** 2) / (n_base * n_cand * np.maximum(total - 1, 1))))


def power_of_rise(rise: float, base_rates: ArrayLike, n_base: ArrayLike, n_cand: ArrayLike | None = None, *,
                  critical: float, alpha: float,
                  min_effect: float) -> float:
    """The chance that the gate flags a class (over all cells) whose rate rises by `rise` in
    every cell, each cell binomial at its base rate in the baseline and at base + rise (capped
    at 1) in the candidate, with the given scored conversations per cell.

    The gate flags when the statistic reaches `critical` and the rise's one-sided (1 - alpha)
    upper bound reaches `min_effect`. Both are conditions on the observed mean difference, which
    is close to normal over tens of cells; the standard error the gate divides by is taken at
    its expectation. `benchmarks/gate_calibration.py` checks the figure against repeated runs.
    """
    base = np.asarray(base_rates, float)
    cells = len(base)
    if cells == 0 or rise <= 0:
        return 0.0
    nb = np.broadcast_to(np.asarray(n_base, float), base.shape)
    nc = nb if n_cand is None else np.broadcast_to(np.asarray(n_cand, float), base.shape)
    cand = np.clip(base + rise, 0.0, 1.0)
    up = cand - base
    true_rise = float(np.mean(up))
    var_base, var_cand = base * (1 - base), cand * (1 - cand)
    spread = math.sqrt(float(np.sum(var_base / nb + var_cand / nc))) / cells
    se = math.sqrt(max(_expected_spread(base, var_base, cand, var_cand, nb, nc), 0.0)) / cells
    threshold = max(critical * se, min_effect - float(_ppf(1 - alpha)) * se)
    if spread == 0:
        return 1.0 if true_rise >= threshold else 0.0
    return float(_sf((threshold - true_rise) / spread))


def detectable_rise(base_rates: ArrayLike, n_base: ArrayLike, n_cand: ArrayLike | None = None, *, critical: float,
                    alpha: float, min_effect: float,
                    power: float = POWER) -> float | None:
    """The smallest rise of a class rate the gate catches with `power`: its sample-size advice.

    None when no rise short of every conversation failing is caught that often: the matrix is
    too small (add cells or repetitions).
    """
    base = np.asarray(base_rates, float)
    if len(base) == 0 or not math.isfinite(critical):
        return None
    top = 1.0 - float(base.min())       # a rise is capped at 1 in each cell
    args = dict(critical=critical, alpha=alpha, min_effect=min_effect)
    if top <= 0 or power_of_rise(top, base, n_base, n_cand, **args) < power:
        return None
    from scipy.optimize import brentq

    return float(brentq(lambda r: power_of_rise(r, base, n_base, n_cand, **args) - power,
                                 1e-9, top, xtol=1e-5))


def repetitions_for(rise: float, base_rates: ArrayLike, critical_at: Callable[[int], float], *, alpha: float,
                    min_effect: float, power: float = POWER, most: int = 10_000) -> int | None:
    """The fewest repetitions per cell at which a rise of `rise` in every cell is caught with
    `power`; `critical_at(n)` gives the threshold at n repetitions. None: not even at `most`."""
    base = np.asarray(base_rates, float)
    if len(base) == 0 or rise <= 0:
        return None

    def enough(n: int) -> bool:
        return power_of_rise(rise, base, n, critical=critical_at(n), alpha=alpha, min_effect=min_effect) >= power

    low, high = 0, 1
    while not enough(high):
        if high >= most:
            return None
        low, high = high, min(most, high * 2)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high
