"""The paired test: two runs of one seed with a scripted user, compared conversation by conversation.

With the same `run.seed`, a scripted user plays the conversation at a cell and repetition alike
in both runs (`simrun.simulator` seeds each by run seed, persona, goal and repetition), and a
seeded runtime answers alike: an unchanged runtime reproduces it. The two runs' conversations at
one (persona, goal, repetition) are then a pair, and what varies between runs is read off the
pairs that differ, not off the spread of a cell's conversations.

**When the gate pairs** is decided here, from what the two summaries say and nothing a user
sets (`pairing`): both name the same seed, both were played by the scripted user, the baseline
is one run (not several blessed together, whose runs have seeds of their own), neither is a look
of the sequential gate (whose levels are worked out for the unpaired test), both say which
repetition fired what, and both ran the same repetitions per cell. Anything else is the unpaired
test, with the reason in the gate's output. Pairs are made only in the cells the gate compares
(persona and goal unchanged by content, `simrun.scoring.gate._sharing`); a conversation that
one run holds and the other does not (a budget cut, a run stopped early) has no pair, and is
left out of the test, with a line saying how many.

**The test** (`compare_paired`) is a sign-flip permutation test over pairs. Under the null
hypothesis (the runtime did not change, and runs do not differ as a whole), the two
conversations of a pair are exchangeable: which of them is the candidate's is arbitrary. A draw
swaps each pair's two conversations with probability 1/2, independently, whole (every class at
once, so the max-T family keeps the statistics' joint law). The statistic of a hypothesis (a
class, over all cells or within one goal or persona) is the unpaired test's: the sum over its
cells of the cell's rate difference, candidate minus baseline, over the pairs both runs scored
for the class, divided by its standard deviation under the swaps, sqrt(sum over pairs of
((a - b) / m)^2), m the cell's pairs scored for the class. That spread is the same under every
swap, so only the pairs that differ move a statistic, each by +-1/m. Max-T's step-down over
every class and slice, and the minimum-effect rule, are the unpaired test's
(`simrun.scoring.gate._stats.family_test`, `simrun.scoring.gate._compare`). The test is exact
under that null whatever the runtime's own randomness: a runtime that is not seeded makes more
pairs differ, which costs power, never level.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from simrun.scoring.gate import _stats as stats
from simrun.scoring.gate._summary import Cell, CellRepetitions, RunSummary

if TYPE_CHECKING:
    from scipy import sparse

SCRIPTED = "scripted"           # the only user that replays a conversation from its seed
_DRAWN_AT_ONCE = 4_000_000      # signs drawn at once (draws x pairs): bounds memory


@dataclass(frozen=True)
class Pairing:
    """Which test the gate used, and why: `text` is what its output says."""

    paired: bool
    text: str
    pairs: int = 0                  # pairs of conversations, one at a cell and repetition in each run
    left_out: int = 0               # conversations of one run only (a repetition the other lacks)
    seed: int | None = None

    @property
    def reason(self) -> str:
        """Why the runs were not paired ("" when they were)."""
        return "" if self.paired else self.text.removeprefix("unpaired: ")


def _unpaired(reason: str) -> Pairing:
    return Pairing(False, f"unpaired: {reason}")


def why_not_paired(baseline: RunSummary, candidate: RunSummary) -> str:
    """Why the two runs cannot be paired, or "" when their summaries say they can."""
    if baseline.runs:
        return (f"the baseline is {len(baseline.runs)} runs blessed together, and the gate pairs only with a "
                "baseline of one run")
    if baseline.look or candidate.look:
        return ("a look of the sequential gate, whose levels are worked out for the unpaired test")
    if baseline.seed is None:
        return (f"the baseline ({baseline.source}) does not say its seed (a baseline file blessed before simrun "
                "kept it, format 5 or older: bless it again to pair)")
    if candidate.seed is None:
        return f"the candidate ({candidate.source}) does not say its seed"
    if baseline.seed != candidate.seed:
        return (f"the runs' seeds differ (baseline {baseline.seed}, candidate {candidate.seed}), so repetition i of "
                "one is unrelated to repetition i of the other")
    for side, summary in (("baseline", baseline), ("candidate", candidate)):
        if summary.user_backend != SCRIPTED:
            who = summary.user_backend or "not said"
            return (f"the {side}'s user is {who}, not the scripted user: the same seed does not replay a "
                    "conversation")
    for side, summary in (("baseline", baseline), ("candidate", candidate)):
        if summary.repetitions_held is None:
            return f"the {side} does not say which repetition fired what ({summary.why_no_repetitions})"
    if baseline.repetitions != candidate.repetitions:
        return (f"the baseline ran {baseline.repetitions} repetitions a cell and the candidate "
                f"{candidate.repetitions}: runs are paired only when both ran the same (the unpaired test uses "
                "every conversation)")
    return ""


def pairing(baseline: RunSummary, candidate: RunSummary, cells: Sequence[Cell]) -> Pairing:
    """Whether the gate pairs the two runs on `cells` (the cells it compares), from what their
    summaries say; see the module docstring."""
    reason = why_not_paired(baseline, candidate)
    if reason:
        return _unpaired(reason)
    base_held, cand_held = baseline.repetitions_held, candidate.repetitions_held
    assert base_held is not None and cand_held is not None     # checked by why_not_paired
    pairs = left = 0
    for cell in cells:
        b, c = base_held[cell].held, cand_held[cell].held
        pairs += len(b & c)
        left += len(b ^ c)
    if not pairs:
        return _unpaired("no cell and repetition is held by both runs")
    text = (f"paired on {pairs:,} pairs of conversations by cell and repetition (same seed {baseline.seed}, "
            "scripted user)")
    if left:
        text += (f"; {left:,} conversation{'s' if left != 1 else ''} held by one run only (a repetition the other "
                 "lacks) left out of the test")
    return Pairing(True, text, pairs, left, baseline.seed)


@dataclass(frozen=True)
class Pairs:
    """Every pair of conversations in the compared cells: `cell` is each pair's cell index,
    `repetition` its repetition; `base_fired`, `cand_fired` and `scored` (scored in both runs)
    are pairs x classes."""

    cell: np.ndarray
    repetition: np.ndarray
    base_fired: np.ndarray
    cand_fired: np.ndarray
    scored: np.ndarray


def pairs_of(baseline_held: Mapping[Cell, CellRepetitions], candidate_held: Mapping[Cell, CellRepetitions],
             cells: Sequence[Cell], classes: Sequence[str]) -> Pairs:
    """From two runs' `CellRepetitions` (simrun.scoring.gate._summary), in the order of `cells`."""
    rows: list[tuple[int, int, list[bool], list[bool], list[bool]]] = []
    for c, cell in enumerate(cells):
        b, a = baseline_held[cell], candidate_held[cell]
        for rep in sorted(b.held & a.held):
            scored = [rep not in b.unscored.get(k, ()) and rep not in a.unscored.get(k, ()) for k in classes]
            rows.append((c, rep, [rep in b.fired.get(k, ()) for k in classes],
                         [rep in a.fired.get(k, ()) for k in classes], scored))
    if not rows:
        empty = np.zeros((0, len(classes)), bool)
        return Pairs(np.zeros(0, int), np.zeros(0, int), empty, empty, empty)
    cell_of, rep_of, base, cand, scored_of = zip(*rows)
    both = np.array(scored_of, bool)
    return Pairs(np.array(cell_of), np.array(rep_of), np.array(base, bool) & both, np.array(cand, bool) & both, both)


def compare_paired(pairs: Pairs, cells: int, slices: np.ndarray, *, alpha: float, correction: str = "max-t",
                   permutations: int = stats.PERMUTATIONS, seed: int | None = None) -> stats.Tested:
    """Every hypothesis (class x slice, `slices` slices x cells) by the sign-flip test over pairs;
    see the module docstring. `seed`: the draws' seed (None: one of the compared pairs)."""
    classes = pairs.scored.shape[1]
    scored = pairs.scored.astype(float)
    m = np.zeros((cells, classes))
    fired_a, fired_b = np.zeros_like(m), np.zeros_like(m)
    np.add.at(m, pairs.cell, scored)
    np.add.at(fired_a, pairs.cell, pairs.cand_fired)
    np.add.at(fired_b, pairs.cell, pairs.base_fired)
    both = m > 0
    safe = np.where(both, m, 1.0)
    rate_a, rate_b = np.where(both, fired_a / safe, 0.0), np.where(both, fired_b / safe, 0.0)
    # Each pair's part in its cell's rate difference, per class: (a - b) / m, 0 where not scored.
    part = (pairs.cand_fired.astype(float) - pairs.base_fired) * scored / safe[pairs.cell]
    members = slices[None, :, :] & both.T[:, None, :]                   # classes x slices x cells
    n_cells = members.sum(2)
    by_cell, squares = np.zeros((cells, classes)), np.zeros((cells, classes))
    np.add.at(by_cell, pairs.cell, part)
    np.add.at(squares, pairs.cell, part ** 2)
    in_slice = slices.astype(float)
    sums, spread = np.einsum("gc,ck->kg", in_slice, by_cell), np.einsum("gc,ck->kg", in_slice, squares)
    testable = spread > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        base = np.einsum("kgc,ck->kg", members, rate_b) / n_cells
        cand = np.einsum("kgc,ck->kg", members, rate_a) / n_cells
        delta = sums / n_cells
        se = np.sqrt(spread) / n_cells
        t = np.where(testable, sums / np.sqrt(np.where(testable, spread, 1.0)), np.nan)
    # Which hypotheses can be tested does not change under a swap (the spread does not): the
    # family is those the observed pairs can test, every one of them in every draw.
    hyp = np.argwhere(testable)                                          # (class, slice) pairs
    moving = np.flatnonzero(np.any(part != 0, axis=1))                  # pairs that differ in some class
    rows, columns, values = [], [], []
    for h, (k, g) in enumerate(hyp):
        # A moving pair's weight in hypothesis h: its part in the class, scaled by the spread.
        at = np.flatnonzero((part[moving, k] != 0) & slices[g, pairs.cell[moving]])
        rows.append(at)
        columns.append(np.full(len(at), h))
        values.append(part[moving[at], k] / np.sqrt(spread[k, g]))
    from scipy import sparse

    matrix = sparse.csr_matrix((np.concatenate(values) if values else np.zeros(0),
                                (np.concatenate(rows) if rows else np.zeros(0, int),
                                 np.concatenate(columns) if columns else np.zeros(0, int))),
                               shape=(len(moving), len(hyp)))           # moving pairs x hypotheses
    observed = np.asarray(matrix.sum(0)).ravel()

    def draw(rng: np.random.Generator, size: int) -> np.ndarray:
        signs = rng.integers(0, 2, size=(size, len(moving)), dtype=np.int8) * 2.0 - 1.0
        return np.asarray((matrix.T @ signs.T).T)

    chunk = max(1, min(1_000, _DRAWN_AT_ONCE // max(1, len(moving))))
    rng = np.random.default_rng(_seed_of(matrix) if seed is None else seed)
    raw, adjusted, critical = stats.family_test(observed, draw, chunk, rng, alpha=alpha, correction=correction,
                                                permutations=permutations)
    p = np.full(testable.shape, np.nan)
    p_adjusted = np.full(testable.shape, np.nan)
    p[testable], p_adjusted[testable] = raw, adjusted
    return stats.Tested(n_cells, base, cand, delta, se, t, p, p_adjusted, int(len(hyp)), critical)


def _seed_of(matrix: sparse.csr_matrix) -> int:
    """The comparison's own seed, from the pairs that differ and their weights (as
    `simrun.scoring.gate._stats.seed_of` for the unpaired test: the same pairs, the same verdict)."""
    digest = hashlib.blake2b(f"{stats.SEED}:paired".encode(), digest_size=8)
    digest.update(str(matrix.shape).encode())
    for a in (matrix.indptr, matrix.indices, matrix.data):
        digest.update(np.ascontiguousarray(a).tobytes())
    return int.from_bytes(digest.digest(), "little")
