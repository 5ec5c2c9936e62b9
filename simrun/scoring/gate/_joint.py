"""Reassigning whole conversations between the two runs, every class at once.

Under the null hypothesis (the runtime did not change) a cell's conversations in the two runs
are draws from one distribution, so which run each came from is arbitrary; what is exchangeable
is the conversation, with everything it fired together. Drawing each class's fired count on its
own (a hypergeometric per cell and class) treats the classes as independent, which they are
not: a conversation that hits a dead end is often one that did not reach its goal, and one that
the runtime crashed in is left out of every progress rate at once. The max-T family's threshold
is the quantile of the largest statistic over classes and slices, so it needs the statistics'
joint distribution, and only a joint reassignment gives it whatever the correlation between
classes. Each reassignment here picks, within every cell, which of its conversations are the
candidate's (as many as the candidate ran), and recomputes every statistic from them, scored
counts included (a conversation not scored for a class moves with the rest of it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from simrun.scoring.gate._summary import Cell, CellRepetitions
from simrun.scoring.gate._variation import WholeRun


@dataclass(frozen=True)
class Conversations:
    """Every conversation of both runs in the compared cells, sorted by cell.

    `cell` is the index of each conversation's cell; `fired` and `scored` are conversations x
    classes; `candidate` says which run it came from."""

    cell: np.ndarray
    candidate: np.ndarray
    fired: np.ndarray
    scored: np.ndarray


def conversations_of(baseline_held: Mapping[Cell, CellRepetitions], candidate_held: Mapping[Cell, CellRepetitions],
                     cells: Sequence[Cell], classes: Sequence[str]) -> Conversations:
    """From two runs' `CellRepetitions` (simrun.scoring.gate._summary), in the order of `cells`."""
    rows: list[tuple[int, bool, list[bool], list[bool]]] = []
    for c, cell in enumerate(cells):
        for is_candidate, held in ((False, baseline_held[cell]), (True, candidate_held[cell])):
            for rep in sorted(held.held):
                fired = [rep in held.fired.get(cls, ()) for cls in classes]
                scored = [rep not in held.unscored.get(cls, ()) for cls in classes]
                rows.append((c, is_candidate, fired, scored))
    if not rows:
        empty = np.zeros((0, len(classes)), bool)
        return Conversations(np.zeros(0, int), np.zeros(0, bool), empty, empty)
    cell_of, in_candidate, fired_of, scored_of = zip(*rows)
    scored_arr = np.array(scored_of, bool)
    return Conversations(np.array(cell_of), np.array(in_candidate), np.array(fired_of, bool) & scored_arr,
                         scored_arr)


def cell_terms(fa: np.ndarray, na: np.ndarray, fb: np.ndarray, nb: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per cell and class, from the candidate's and the baseline's fired and scored counts (any
    leading axes): scored in both runs, the rate difference (candidate minus baseline), and its
    variance under reassignment, F (N - F) / (n_a n_b (N - 1)); 0 where a run scored none. The
    one definition of a cell's part in the gate's statistic (`simrun.scoring.gate._stats`), here and in
    the sequential gate's looks (`simrun.scoring.gate._looks`)."""
    both = (na > 0) & (nb > 0)
    sa, sb = np.where(both, na, 1.0), np.where(both, nb, 1.0)
    n, f = na + nb, fa + fb
    diff = np.where(both, fa / sa - fb / sb, 0.0)
    var = np.where(both, f * (n - f) / (sa * sb * np.maximum(n - 1, 1.0)), 0.0)
    return both, diff, var


def could_vary(scored: np.ndarray, fired: np.ndarray, held_base: ArrayLike, held_cand: ArrayLike) -> np.ndarray:
    """Cells x classes: some reassignment could make the cell's rates differ (both runs hold a
    conversation in the cell, two or more were scored, some but not all of them fired), from
    both runs' scored and fired counts together, and whether each run holds the cell at all.
    Which hypotheses the gate tests follows from this alone, so never from which run each
    conversation came from."""
    can: np.ndarray = ((scored >= 2) & (fired > 0) & (fired < scored)
                       & (np.asarray(held_base) & np.asarray(held_cand))[:, None])
    return can


class Reassignment:
    """Draws reassignments of whole conversations and the statistics of every hypothesis.

    `membership` is (cells x classes) x hypotheses: 1 where the cell's class counts toward the
    hypothesis (its class, and a cell of its slice). Conversations of a cell that fired and were
    scored alike are interchangeable, so a reassignment is drawn as how many of each kind go to
    the candidate (a multivariate hypergeometric draw per cell): the same distribution as
    shuffling the conversations one by one, at a fraction of the cost."""

    def __init__(self, conversations: Conversations, cells: int, membership: np.ndarray,
                 extra: np.ndarray | None = None, whole: WholeRun | None = None) -> None:
        self.conv, self.cells = conversations, cells
        self.classes = classes = conversations.fired.shape[1]
        self.n_candidate = np.bincount(conversations.cell, weights=conversations.candidate,
                                       minlength=cells).astype(int)
        total = np.zeros((cells, classes))
        fired_total = np.zeros((cells, classes))
        np.add.at(total, conversations.cell, conversations.scored)
        np.add.at(fired_total, conversations.cell, conversations.fired)
        # Only a (cell, class) where some but not all scored conversations fired can move a
        # statistic: elsewhere the rate difference is 0 under every reassignment. The rest are
        # left out of every draw (most of a sparse class's cells): the same statistics, for less.
        self.active = np.flatnonzero(((fired_total > 0) & (fired_total < total)).ravel())
        self.total, self.fired_total = total.ravel()[self.active], fired_total.ravel()[self.active]
        # The variance a run x cell effect adds to each active column (0 when runs are taken alike).
        self.extra = np.zeros(len(self.active)) if extra is None else np.asarray(extra, float).ravel()[self.active]
        self.membership = membership[self.active]
        # A whole-run effect (`simrun.scoring.gate._variation.WholeRun`): one shift per class
        # shared by every cell, each active column's weight in it, and its class.
        self.whole = whole
        self.whole_of = (np.zeros(len(self.active)) if whole is None
                         else np.asarray(whole.weights, float).ravel()[self.active])
        self.class_of = self.active % classes
        column = {int(a): j for j, a in enumerate(self.active)}
        # Every cell's kinds of conversation (alike in what they fired and were scored for), one
        # row each, and what a kind adds to the active columns of its cell.
        self.kinds: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []   # cell, counts, scored, fired
        rows_of = []
        shape = np.concatenate([conversations.scored, conversations.fired], axis=1)
        for c in range(cells):
            rows = shape[conversations.cell == c]
            if len(rows):
                kinds, counts = np.unique(rows, axis=0, return_counts=True)
                self.kinds.append((c, counts, kinds[:, :classes], kinds[:, classes:]))
                rows_of.append((c, kinds))
        kinds_in_all = sum(len(kind[1]) for kind in self.kinds)
        self.scored_of = np.zeros((kinds_in_all, len(self.active)))     # kinds x active columns
        self.fired_of = np.zeros_like(self.scored_of)
        at = 0
        for c, kinds in rows_of:
            for k in range(classes):
                j = column.get(c * classes + k)
                if j is not None:
                    self.scored_of[at:at + len(kinds), j] = kinds[:, k]
                    self.fired_of[at:at + len(kinds), j] = kinds[:, classes + k]
            at += len(kinds)
        # A kind adds only to its own cell's columns: as sparse matrices, a draw's counts cost
        # a few multiplications per conversation kind rather than a dense product.
        from scipy import sparse

        self.scored_of, self.fired_of = sparse.csc_matrix(self.scored_of), sparse.csc_matrix(self.fired_of)
        self.membership = sparse.csc_matrix(self.membership)     # a column is in a few hypotheses

    def statistics(self, na: np.ndarray, fa: np.ndarray, effects: np.ndarray | None = None,
                   shifts: np.ndarray | None = None) -> np.ndarray:
        """The candidate's scored and fired counts (reassignments x active columns) ->
        reassignments x hypotheses. `effects`: a run x cell effect drawn for each active column
        (standard normal, scaled here by its variance), added to its rate difference; `shifts`:
        a whole-run shift drawn per class (reassignments x classes), added to every cell's."""
        both, diff, var = cell_terms(fa, na, self.fired_total[None] - fa, self.total[None] - na)
        if self.extra.any():
            var = var + np.where(both, self.extra[None], 0.0)
            if effects is not None:
                diff = diff + np.where(both, effects * np.sqrt(self.extra)[None], 0.0)
        sums = np.asarray(diff @ self.membership)
        spread = np.asarray(var @ self.membership)
        if self.whole is not None:
            weight = np.where(both, self.whole_of[None], 0.0)
            spread = spread + np.asarray((weight * self.whole.standard[self.class_of][None]) @ self.membership) ** 2
            if shifts is not None:
                sums = sums + np.asarray((weight * shifts[:, self.class_of]) @ self.membership)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(spread > 0, sums / np.sqrt(np.where(spread > 0, spread, 1.0)), -np.inf)

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` random reassignments: within each cell, as many conversations as the candidate
        ran are picked at random to be the candidate's. Returns their statistics."""
        picked = np.empty((size, self.scored_of.shape[0]))
        at = 0
        for c, counts, _, _ in self.kinds:
            if len(counts) == 1:
                picked[:, at] = float(self.n_candidate[c])
            else:
                picked[:, at:at + len(counts)] = rng.multivariate_hypergeometric(counts, self.n_candidate[c],
                                                                                 size=size)
            at += len(counts)
        effects = rng.standard_normal((size, len(self.active))) if self.extra.any() else None
        shifts = None if self.whole is None else self.whole.draw(rng, size)
        return self.statistics(np.asarray(picked @ self.scored_of), np.asarray(picked @ self.fired_of), effects,
                               shifts)

    def observed(self) -> np.ndarray:
        na = np.zeros((self.cells, self.classes))
        fa = np.zeros_like(na)
        mine = self.conv.candidate
        np.add.at(na, self.conv.cell[mine], self.conv.scored[mine])
        np.add.at(fa, self.conv.cell[mine], self.conv.fired[mine])
        observed: np.ndarray = self.statistics(na.ravel()[self.active][None], fa.ravel()[self.active][None])[0]
        return observed


class Counted(Protocol):
    """What `reassignments` reads of a `simrun.scoring.gate._stats.Family` (whose module imports
    this one): both runs' counts, the slices, and what the runs say beyond their counts."""

    @property
    def fired_base(self) -> np.ndarray: ...
    @property
    def scored_base(self) -> np.ndarray: ...
    @property
    def fired_cand(self) -> np.ndarray: ...
    @property
    def scored_cand(self) -> np.ndarray: ...
    @property
    def slices(self) -> np.ndarray: ...
    @property
    def conversations(self) -> Conversations | None: ...
    @property
    def extra(self) -> np.ndarray | None: ...
    @property
    def whole(self) -> WholeRun | None: ...


def reassignments(family: Counted, hyp: np.ndarray, where: np.ndarray, weights: np.ndarray, most: int
                  ) -> tuple[Callable[[np.random.Generator, int], np.ndarray], int]:
    """How the reassignments of a `simrun.scoring.gate._stats.Family` are drawn: whole conversations when
    the family has them, else each class's fired count within each cell on its own (a
    hypergeometric draw given the cell's totals). `hyp` lists the hypotheses as (class, slice),
    `where` the (cell, class) pairs that can vary, `weights` their weight in each hypothesis's
    statistic (for the per-class draw). Returns draw(rng, size) -> reassignments x hypotheses,
    and how many reassignments to draw at once (at most `most`)."""
    fb, nb, fa, na = (np.asarray(a, np.int64) for a in (family.fired_base, family.scored_base,
                                                         family.fired_cand, family.scored_cand))
    if family.conversations is not None:
        cells, classes = fb.shape
        membership = np.zeros((cells * classes, len(hyp)))
        for h, (k, g) in enumerate(hyp):
            membership[np.arange(cells) * classes + k, h] = family.slices[g]
        return Reassignment(family.conversations, cells, membership, family.extra, family.whole).draw, most
    cell_of, class_of = where[:, 0], where[:, 1]
    fired, total = fb + fa, nb + na
    good, bad, drawn = fired[cell_of, class_of], (total - fired)[cell_of, class_of], na[cell_of, class_of]
    scale = 1.0 / na[cell_of, class_of] + 1.0 / nb[cell_of, class_of]
    shift = good / nb[cell_of, class_of]

    spread = None if family.extra is None else np.sqrt(np.asarray(family.extra, float)[cell_of, class_of])
    whole = family.whole
    shared = None if whole is None else np.asarray(whole.weights, float)[cell_of, class_of]

    def draw(rng: np.random.Generator, size: int) -> np.ndarray:
        diffs = rng.hypergeometric(good, bad, drawn, size=(size, len(where))) * scale - shift
        if spread is not None and spread.any():
            diffs = diffs + rng.standard_normal((size, len(where))) * spread
        if shared is not None and whole is not None:
            diffs = diffs + whole.draw(rng, size)[:, class_of] * shared
        statistics: np.ndarray = diffs @ weights
        return statistics

    return draw, most
