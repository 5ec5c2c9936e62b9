"""The sequential gate's fail side over its looks: each look's level, from the looks' joint law.

Alpha spending says how much of alpha the looks up to k may use in all, `spent(k)`. The simplest
way to honour it gives look k the increment `spent(k) - spent(k - 1)` and adds the looks up (the
union bound). That ignores that the looks see nearly the same conversations (look k holds look
k - 1's and one round more), so the chance of a false alarm at some look is far below the sum:
at the round cap the union bound tests at about 0.005 where an exact boundary may test at 0.03.

**The exact boundary, by reassigning the rounds too** (the group-sequential error-spending design
of Lan and DeMets 1983, Jennison and Turnbull 2000 ch. 7, with the joint law of the looks taken
from the permutation distribution rather than from a normal approximation). When nothing changed,
a cell's conversations so far, the baseline's and every round's of the candidate, are
exchangeable: which of them is the baseline's, which is round 1's, round 2's, and so on is
arbitrary. One draw shuffles them within every cell, gives the first places to the candidate's
rounds in order and the rest to the baseline, and computes the gate's statistic (the largest
standardised rise over every class, goal and persona: `simrun.scoring.gate._joint`'s) as each earlier
look would have seen it. Over the draws:

- each look's statistic is turned into its p-value within that look (its rank among the draws),
  so the looks are on one scale, the scale of the fixed gate's corrected p-value;
- look 1's level is the p-value below which `spent(1)` of the draws fall; look j's is the one
  below which the draws that crossed no earlier look add `spent(j) - spent(j - 1)`, so that the
  chance of crossing at some look up to j is `spent(j)`;
- the last look's level is what the gate tests at: `gate_verdict` at that level (its own
  corrected p-value, the same statistic's, on the same conversations).

The earlier looks' levels are worked out again at each look from the conversations it holds
(the recalculated, conditional boundary; for an exact test one would need the conversations of
every look to come, which no look has). So the level is exact given what the look holds and
close to it over the run: `benchmarks/gate_sequential.py` measures the false alarms under
optional stopping, over 1,000 A/A pairs. A level is never below the union bound's share (that
one holds whatever the looks' law) nor above `spent(k)` (no look alone may use more).

The family is the last look's, as the gate forms it (every hypothesis some reassignment of its
conversations could test); an earlier look's draw gives a hypothesis no value (minus infinity)
where it could not vary there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from simrun.scoring.gate._joint import cell_terms, conversations_of, could_vary
from simrun.scoring.gate._summary import TESTED, Cell, RunSummary, first_repetitions

_CHUNK = 250            # draws at once: arrays of draws x cells x conversations x classes


def look_level(baseline: RunSummary, candidate: RunSummary, cells: Sequence[Cell], slices: np.ndarray,
               marks: Sequence[int], spent: Sequence[float], draws: int) -> float:
    """The level the last of the looks tests at. `marks`: the candidate's repetitions at each
    look so far, increasing (the last is now); `spent`: alpha spent by each look, in all;
    `slices`: slices x cells (every cell first). Needs both runs' repetitions held; the
    candidate's beyond the last look are left out."""
    candidate = first_repetitions(candidate, marks[-1])
    share = spent[-1] - (spent[-2] if len(spent) > 1 else 0.0)
    if len(marks) == 1 or draws < 1:
        return share
    pool = _Pool(baseline, candidate, cells, slices, marks)
    if not pool.hypotheses.size:
        return share
    rng = np.random.default_rng(pool.seed())
    maxima = np.concatenate([pool.maxima(rng, min(_CHUNK, draws - done)) for done in range(0, draws, _CHUNK)])
    # Each look's p-value of each draw: the share of draws at least as large (ties count
    # against the draw, as the gate's own p-value counts them against the candidate).
    ranks = np.empty_like(maxima)
    for j in range(maxima.shape[1]):
        column = np.sort(maxima[:, j])
        ranks[:, j] = (len(column) - np.searchsorted(column, maxima[:, j], side="left")) / len(column)
    alive = np.ones(len(maxima), bool)
    level = 0.0
    for j, total in enumerate(spent):
        before = spent[j - 1] if j else 0.0
        level = _largest_level(ranks[alive, j], (total - before) * len(maxima))
        alive &= ranks[:, j] > level
    return float(min(max(level, share), spent[-1]))


def _largest_level(p: np.ndarray, allowed: float) -> float:
    """The largest level at which at most `allowed` of these p-values lie (0: none may)."""
    values = np.sort(p)
    n = int(np.floor(allowed + 1e-9))
    if n <= 0 or not len(values):
        return 0.0
    if n >= len(values):
        return float(values[-1])
    # Ties straddling the cut cannot be split: the level stops below the tied value.
    cut = values[n]
    below = values[values < cut]
    return float(below[-1]) if len(below) else 0.0


class _Pool:
    """Every cell's conversations so far, padded to the largest cell, with the candidate's per look."""

    def __init__(self, baseline: RunSummary, candidate: RunSummary, cells: Sequence[Cell], slices: np.ndarray,
                 marks: Sequence[int]) -> None:
        base_held, cand_held = baseline.repetitions_held, candidate.repetitions_held
        if base_held is None or cand_held is None:          # `look_level` is asked only when both say
            raise ValueError("the looks' joint law needs both runs' repetitions held")
        conv = conversations_of(base_held, cand_held, cells, TESTED)
        sizes = np.bincount(conv.cell, minlength=len(cells))
        width = int(sizes.max()) if len(sizes) else 0
        # Counts are small integers: single precision holds them exactly, at half the memory.
        self.fired = np.zeros((len(cells), width, len(TESTED)), np.float32)
        self.scored = np.zeros_like(self.fired)
        self.real = np.zeros((len(cells), width), bool)
        self.candidate = np.zeros_like(self.real)
        for c in range(len(cells)):
            rows = np.flatnonzero(conv.cell == c)
            self.fired[c, :len(rows)], self.scored[c, :len(rows)] = conv.fired[rows], conv.scored[rows]
            self.real[c, :len(rows)], self.candidate[c, :len(rows)] = True, conv.candidate[rows]
        # The candidate's conversations of each cell at each look: its repetitions held below the mark.
        self.at_look = np.array([[len([r for r in cand_held[cell].held if r < m]) for cell in cells]
                                 for m in marks])                                      # looks x cells
        self.slices = slices.astype(float)
        self._arrays = (conv.cell, conv.candidate, conv.fired, conv.scored, np.asarray(marks))
        # The family as the gate's (`simrun.scoring.gate._stats`): what some reassignment could test.
        scored, fired = self.scored.sum(1), self.fired.sum(1)                       # cells x classes
        can = could_vary(scored, fired, (self.real & ~self.candidate).any(1), self.candidate.any(1))
        # A class no cell can vary in adds nothing to any statistic: left out of the draws.
        keep = can.any(0)
        self.fired, self.scored = self.fired[..., keep], self.scored[..., keep]
        self.hypotheses = np.flatnonzero((self.slices @ can[:, keep] > 0).ravel())   # slices x classes kept

    def seed(self) -> int:
        """The draws' seed: a hash of the conversations and the looks (the same data, the same level)."""
        digest = hashlib.blake2b(b"simrun looks", digest_size=8)
        for a in self._arrays:
            digest.update(np.ascontiguousarray(a).astype(np.int64).tobytes())
        return int.from_bytes(digest.digest(), "little")

    def _statistics(self, na: np.ndarray, fa: np.ndarray, nb: np.ndarray, fb: np.ndarray) -> np.ndarray:
        """Counts (... x cells x classes) -> the standardised rise of every (slice, class), as the
        gate computes it (`simrun.scoring.gate._joint.cell_terms`); -inf where nothing varied."""
        _, diff, var = cell_terms(fa, na, fb, nb)
        sums = np.einsum("gc,...ck->...gk", self.slices, diff)
        spread = np.einsum("gc,...ck->...gk", self.slices, var)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(spread > 0, sums / np.sqrt(np.where(spread > 0, spread, 1.0)), -np.inf)

    def maxima(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` reshuffles -> draws x looks: the largest statistic of the family at each look."""
        cells, width = self.real.shape
        keys = np.where(self.real[None], rng.random((size, cells, width)), 2.0)     # padding sorts last
        most = int(self.at_look[-1].max())
        order = np.argsort(keys, axis=2)[:, :, :most]                               # the candidate's places
        # One gather of both counts, by flat row index (far cheaper than indexing on two axes).
        rows = np.concatenate([self.fired, self.scored], axis=2).reshape(cells * width, -1)
        picked = np.take(rows, (order + (np.arange(cells) * width)[None, :, None]).ravel(), axis=0)
        picked = picked.reshape(size, cells, most, rows.shape[1])                   # draws x cells x most x 2 classes
        sums = np.concatenate([np.zeros((size, cells, 1, rows.shape[1]), np.float32), np.cumsum(picked, axis=2)],
                              axis=2)
        classes = self.fired.shape[2]
        fired_sum, scored_sum = sums[..., :classes], sums[..., classes:]
        every = np.arange(cells)
        n_all, f_all = self.scored.sum(1), self.fired.sum(1)                       # cells x classes
        last = self.at_look[-1]
        nb = n_all[None] - scored_sum[:, every, last]                               # the baseline's: the rest
        fb = f_all[None] - fired_sum[:, every, last]
        out = np.empty((size, len(self.at_look)))
        for j, m in enumerate(self.at_look):
            stats = self._statistics(scored_sum[:, every, m], fired_sum[:, every, m], nb, fb)
            out[:, j] = stats.reshape(size, -1)[:, self.hypotheses].max(axis=1)
        return out
