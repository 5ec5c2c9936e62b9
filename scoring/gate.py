"""The merge gate: one verdict on a candidate run against a baseline, from per-cell counts.

`gate_verdict(baseline, candidate, settings)` is the only place a verdict is made. The `simrun
gate` command and the HTML report both call it, so they can never disagree. It fails when

- any guarantee fired in any candidate conversation (one violation is a failed run), or
- a class rate rose, over all cells or within one goal or one persona (a slice): the
  permutation test over cells (`scoring.stats`), corrected over every class and slice at once,
  gives p < alpha, *and* the rise is not shown to be smaller than the minimum effect (its
  one-sided upper bound reaches `min_effect`, or `min_effect_slice` for a slice).

The classes tested are the progress classes, simulator_error (a runtime that confuses the
simulated user pushes conversations out of its own rates; that must not pass unseen),
runtime_error and goal_not_reached. Guarantees are decided by the zero rule, so they are left
out of the correction's family: a test there could never change the verdict, and spending
alpha on it would only blunt the others.

Besides the verdict, the result names what moved: the cells whose rate rose most, and the
conversations that flipped (clean at a cell and repetition in the baseline, fired at the same
cell and repetition in the candidate).

Two runs are compared only when the baseline is fit to judge the candidate: the same dataset
(personas and goals by content), the same scorer version, every class the scorer knows, counts
that fit in the repetitions (`scoring.baseline.validate_summary`), and the same cells, or a
subset the caller asked for (`shared_cells_only`) and the result lists. Anything else is a
`GateError` that says how to fix it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from scoring import stats
from scoring.baseline import GATE_CLASSES, Cell, Counts, RunSummary, validate_summary
from scoring.gate_text import pts, pval, size
from scoring.scorer import GUARANTEES, kind_of
from scoring.errors import SimrunError

TESTED = tuple(c for c in GATE_CLASSES if c not in GUARANTEES)
SLICES_SHOWN = 5            # goals and personas named per class in the list of regressions
SAFE_SIDE = 0.90            # the repetitions advised assume each class's rate at this upper bound


class GateError(SimrunError):
    """Two runs that must not be compared, or a baseline the gate cannot use."""


class GateSettings(Protocol):
    alpha: float
    min_effect: float
    min_effect_slice: float
    correction: str
    permutations: int


def class_kind(cls: str) -> str:
    return "outcome" if cls in ("runtime_error", "goal_not_reached") else kind_of(cls)


@dataclass(frozen=True)
class SliceVerdict:
    """One class within one goal or one persona."""

    cls: str
    dimension: str                  # goal | persona
    name: str
    baseline: Counts                # summed over the slice's cells scored in both runs
    candidate: Counts
    cells: int
    delta: float                    # mean cell difference
    p_adjusted: float
    verdict: str                    # regression | ok
    reason: str

    @property
    def failed(self) -> bool:
        return self.verdict == "regression"

    def statement(self) -> str:
        return f"{self.cls} rose in {self.dimension} {self.name}: {self.baseline} → {self.candidate}"


@dataclass(frozen=True)
class ClassVerdict:
    cls: str
    kind: str                       # progress | simulator | guarantee | outcome
    baseline: Counts                # summed over every cell of the baseline
    candidate: Counts
    cells: int                      # cells both runs scored, the test's sample size
    baseline_rate: float | None     # mean cell rate over those cells
    candidate_rate: float | None
    delta: float | None
    low: float | None               # CONFIDENCE interval of delta
    high: float | None
    p: float | None                 # one-sided permutation p, uncorrected
    p_adjusted: float | None        # corrected over every class and slice; None for guarantees
    detectable: float | None        # the rise caught with POWER at this size (sample-size advice)
    verdict: str                    # regression | violated | ok | held | untested
    reason: str                     # over all cells
    slices: tuple[SliceVerdict, ...] = ()   # the class in each goal and persona it was tested in
    regressed_overall: bool = False         # the overall test failed (not only a slice)

    @property
    def failed(self) -> bool:
        return self.verdict in ("regression", "violated")

    @property
    def slice_failures(self) -> list[SliceVerdict]:
        return [s for s in self.slices if s.failed]


@dataclass(frozen=True)
class MovedCell:
    cls: str
    cell: Cell
    baseline: Counts
    candidate: Counts

    @property
    def rise(self) -> float:
        return self.candidate.rate - self.baseline.rate


@dataclass(frozen=True)
class Flip:
    """A conversation clean in the baseline and fired in the candidate, at one cell and repetition."""

    cls: str
    cell: Cell
    repetition: int
    conversation_id: str            # the candidate's
    baseline_id: str


@dataclass(frozen=True)
class GateResult:
    baseline: RunSummary
    candidate: RunSummary
    alpha: float
    min_effect: float
    min_effect_slice: float
    correction: str
    permutations: int
    tests: int                      # hypotheses (class x slice) in the correction's family
    cells: int                      # cells compared
    classes: tuple[ClassVerdict, ...]
    moved: tuple[MovedCell, ...]    # every cell and class whose rate rose, most first
    flips: tuple[Flip, ...] | None  # None: the repetitions are not known (see why_no_flips)
    why_no_flips: str
    left_out: tuple[Cell, ...]      # cells only one run holds (compared on a stated subset)
    _advice: "_Advice" = field(repr=False, compare=False)

    @property
    def failures(self) -> list[ClassVerdict]:
        return [c for c in self.classes if c.failed]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def regressions(self, slices_shown: int = SLICES_SHOWN) -> list[str]:
        """One line per regression, naming the slice: 'dead_end rose in goal renew-loan: 0/8 → 8/8'."""
        lines = []
        for c in self.failures:
            if c.verdict != "regression":
                continue
            if c.regressed_overall:
                lines.append(f"{c.cls} rose over all cells: {c.baseline} → {c.candidate} ({c.reason})")
            failing = c.slice_failures
            lines += [f"{s.statement()} ({s.reason})" for s in failing[:slices_shown]]
            if len(failing) > slices_shown:
                lines.append(f"{c.cls} rose in {len(failing) - slices_shown} more goals or personas")
        return lines

    def headline(self) -> str:
        if self.passed:
            return "passed: no class rose significantly, overall or in any goal or persona, and every guarantee held"
        parts = []
        violated = [c.cls for c in self.failures if c.verdict == "violated"]
        if violated:
            parts.append("guarantees broken: " + ", ".join(violated))
        regressed = []
        for c in self.failures:
            if c.verdict != "regression":
                continue
            where = [f"{s.dimension} {s.name}" for s in c.slice_failures]
            shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
            if c.regressed_overall:
                regressed.append(c.cls + (f" (over all cells, and in {shown})" if where else ""))
            else:
                regressed.append(f"{c.cls} (in {shown})")
        if regressed:
            parts.append("regressions: " + ", ".join(regressed))
        return "FAILED: " + "; ".join(parts)

    def repetitions_needed(self, rise: float | None = None) -> dict[str, int | None]:
        """Per tested class: the repetitions per cell at which a rise of `rise` (default: the
        minimum effect) in every cell is caught with POWER, from the baseline's cell rates (None:
        not within 10,000). Computed on first use: it takes a second or two."""
        return self._advice.repetitions(self.min_effect if rise is None else rise)

    def power(self, cls: str, rise: float, repetitions: int | None = None) -> float:
        """The advice's prediction: the chance that a rise of `rise` in every cell of `cls` is
        caught over all cells, at `repetitions` per cell (default: the candidate's)."""
        return self._advice.power(TESTED.index(cls), rise, repetitions or self.candidate.repetitions)


@dataclass(frozen=True, eq=False)
class _Advice:
    """What the sample-size advice needs: the baseline's cell rates (`stats.advice_rates`) and the
    slices tested. Its simulations take a second or two, so they run only when asked for.

    Predictions of power take the rates as estimated; the repetitions it names take them at the
    upper end of each class's 90% interval, so that the advice errs on the safe side of the
    noise of one baseline (at 5 repetitions the estimate of a class's rate is good to a fifth).
    """

    base_rates: np.ndarray          # cells x tested classes
    safe_rates: np.ndarray          # the same at the top of their interval
    slices: np.ndarray
    alpha: float
    correction: str
    min_effect: float
    _critical: dict[tuple[bool, int], float] = field(default_factory=dict)
    _needed: dict[float, dict[str, int | None]] = field(default_factory=dict)

    def critical_at(self, repetitions: int, safe: bool = False) -> float:
        """Simulated at 1, 2, 3, 4, 6, 8, 12, 16, ... repetitions; between them, interpolated in
        log(repetitions): it changes slowly, and each simulation takes a tenth of a second."""
        low = 2 ** int(math.log2(repetitions))
        grid = [g for g in (low, low * 3 // 2, low * 2) if g >= 1]
        below = max(g for g in grid if g <= repetitions)
        above = min(g for g in grid if g >= repetitions)
        values = []
        for n in {below, above}:
            if (safe, n) not in self._critical:
                self._critical[(safe, n)] = stats.critical_value(
                    self.safe_rates if safe else self.base_rates, n, self.slices, alpha=self.alpha,
                    correction=self.correction)
            values.append(self._critical[(safe, n)])
        if below == above or not all(math.isfinite(v) for v in values):
            return max(values)
        share = (math.log(repetitions) - math.log(below)) / (math.log(above) - math.log(below))
        return self._critical[(safe, below)] + share * (self._critical[(safe, above)] - self._critical[(safe, below)])

    def power(self, k: int, rise: float, repetitions: int) -> float:
        return stats.power_of_rise(rise, self.base_rates[:, k], repetitions, critical=self.critical_at(repetitions),
                                   alpha=self.alpha, min_effect=self.min_effect)

    def repetitions(self, rise: float) -> dict[str, int | None]:
        if rise not in self._needed:
            self._needed[rise] = {cls: stats.repetitions_for(rise, self.safe_rates[:, k],
                                                             lambda n: self.critical_at(n, safe=True),
                                                             alpha=self.alpha, min_effect=self.min_effect)
                                  for k, cls in enumerate(TESTED)}
        return self._needed[rise]


def check_comparable(baseline: RunSummary, candidate: RunSummary, shared_cells_only: bool = False) -> None:
    if baseline.dataset_hash != candidate.dataset_hash:
        raise GateError(
            f"dataset mismatch: baseline ({baseline.source}) has dataset {baseline.dataset_hash}, candidate "
            f"({candidate.source}) has {candidate.dataset_hash}; runs are compared only on the same personas "
            "and goals: run the candidate on the baseline's dataset, or bless a new baseline "
            "(`simrun baseline bless RUN --out FILE`)")
    if baseline.scorer_version != candidate.scorer_version:
        raise GateError(
            f"scorer mismatch: baseline ({baseline.source}) was scored by scorer version "
            f"{baseline.scorer_version}, candidate ({candidate.source}) by {candidate.scorer_version}; "
            "rescore the older run with `simrun rescore RUN` and bless it again")
    for summary in (baseline, candidate):
        validate_summary(summary)
    base, cand = set(baseline.cells), set(candidate.cells)
    if not base & cand:
        raise GateError(f"no cell in common between baseline ({baseline.source}) and candidate "
                        f"({candidate.source}); nothing to compare")
    if base != cand and not shared_cells_only:
        def some(cells: set[Cell]) -> str:
            names = [f"{p}/{g}" for p, g in sorted(cells)[:3]]
            return f" ({', '.join(names)}{', …' if len(cells) > 3 else ''})" if cells else ""
        raise GateError(
            f"baseline ({baseline.source}) and candidate ({candidate.source}) hold different cells: "
            f"{len(cand - base)} of the candidate's {len(cand)} cells are not in the baseline{some(cand - base)}, "
            f"and {len(base - cand)} of the baseline's {len(base)} not in the candidate{some(base - cand)}; "
            "gate runs of the same matrix, or pass --shared-cells-only to compare the cells both hold "
            "(the others are listed in the verdict)")


def _slices(cells: list[Cell]) -> list[tuple[str, str, np.ndarray]]:
    """All cells, then each goal and each persona; a slice that repeats an earlier one is dropped."""
    out = [("all", "", np.ones(len(cells), bool))]
    for dimension, index in (("goal", 1), ("persona", 0)):
        for name in sorted({c[index] for c in cells}):
            mask = np.array([c[index] == name for c in cells])
            if not any(np.array_equal(mask, m) for _, _, m in out):
                out.append((dimension, name, mask))
    return out


def gate_verdict(baseline: RunSummary, candidate: RunSummary, settings: GateSettings, *,
                 shared_cells_only: bool = False) -> GateResult:
    """The gate's decision. Raises GateError when the two runs must not be compared."""
    check_comparable(baseline, candidate, shared_cells_only)
    shared = sorted(set(baseline.cells) & set(candidate.cells))
    left_out = tuple(sorted(set(baseline.cells) ^ set(candidate.cells)))
    slices = _slices(shared)
    mask = np.array([m for _, _, m in slices])

    def counts(summary: RunSummary, what: str) -> np.ndarray:
        return np.array([[getattr(summary.cells[c][cls], what) for cls in TESTED] for c in shared])

    base_fired, base_scored = counts(baseline, "fired"), counts(baseline, "scored")
    family = stats.Family(base_fired, base_scored, counts(candidate, "fired"), counts(candidate, "scored"), mask)
    tested = stats.compare(family, alpha=settings.alpha, correction=settings.correction,
                           permutations=settings.permutations)
    advice = _Advice(stats.advice_rates(base_fired, base_scored),
                     stats.advice_rates(base_fired, base_scored, upper=SAFE_SIDE), mask,
                     settings.alpha, settings.correction, settings.min_effect)
    verdicts = []
    for cls in GATE_CLASSES:
        pairs = [(baseline.cells[c][cls], candidate.cells[c][cls]) for c in shared]
        scored = [(i, b, k) for i, (b, k) in enumerate(pairs) if b.scored and k.scored]
        base_total, cand_total = baseline.total(cls), candidate.total(cls)
        if cls in GUARANTEES:
            diffs = [k.rate - b.rate for _, b, k in scored]
            delta = float(np.mean(diffs)) if diffs else None
            verdict, reason = (("violated", f"broken in {cand_total.fired} candidate conversation(s)")
                               if cand_total.fired else ("held", "no violation in the candidate"))
            verdicts.append(ClassVerdict(cls, class_kind(cls), base_total, cand_total, len(scored),
                                         None, None, delta, None, None, None, None, None, verdict, reason))
            continue
        verdicts.append(_tested_class(cls, TESTED.index(cls), tested, slices, shared, baseline, candidate,
                                      scored, advice.base_rates, settings))
    moved = sorted((MovedCell(cls, c, baseline.cells[c][cls], candidate.cells[c][cls])
                    for cls in GATE_CLASSES for c in shared
                    if baseline.cells[c][cls].scored and candidate.cells[c][cls].scored
                    and candidate.cells[c][cls].rate > baseline.cells[c][cls].rate),
                   key=lambda m: (-m.rise, -m.candidate.fired, GATE_CLASSES.index(m.cls), m.cell))
    flips, why = _flips(baseline, candidate, shared, verdicts)
    return GateResult(baseline, candidate, settings.alpha, settings.min_effect, settings.min_effect_slice,
                      settings.correction, settings.permutations, tested.tests, len(shared), tuple(verdicts),
                      tuple(moved), flips, why, left_out, advice)


def _tested_class(cls, k, tested, slices, shared, baseline, candidate, scored, advice_rates,
                  settings) -> ClassVerdict:
    base_total, cand_total = baseline.total(cls), candidate.total(cls)
    if not tested.cells[k, 0]:
        return ClassVerdict(cls, class_kind(cls), base_total, cand_total, 0, None, None, None, None, None, None,
                            None, None, "untested", "no cell scored in both runs")
    low, high = tested.interval(k, 0)
    p = None if np.isnan(tested.p[k, 0]) else float(tested.p[k, 0])
    p_adj = None if np.isnan(tested.p_adjusted[k, 0]) else float(tested.p_adjusted[k, 0])
    delta = float(tested.delta[k, 0])
    index = [i for i, _, _ in scored]
    detectable = stats.detectable_rise(advice_rates[index, k], [b.scored for _, b, _ in scored],
                                       [c.scored for _, _, c in scored], critical=tested.critical,
                                       alpha=settings.alpha, min_effect=settings.min_effect)
    overall, reason = _decide(delta, p_adj, tested.upper(k, 0, settings.alpha), settings.min_effect, settings)
    cut = {i for i, _, _ in scored}
    slice_verdicts = []
    for g, (dimension, name, mask) in enumerate(slices[1:], start=1):
        if not tested.cells[k, g] or np.isnan(tested.p_adjusted[k, g]):
            continue
        members = [shared[i] for i in np.flatnonzero(mask) if i in cut]
        b = sum((baseline.cells[c][cls] for c in members), Counts(0, 0, 0))
        c_ = sum((candidate.cells[c][cls] for c in members), Counts(0, 0, 0))
        sd = float(tested.delta[k, g])
        verdict, why = _decide(sd, float(tested.p_adjusted[k, g]), tested.upper(k, g, settings.alpha),
                               settings.min_effect_slice, settings)
        slice_verdicts.append(SliceVerdict(cls, dimension, name, b, c_, len(members), sd,
                                           float(tested.p_adjusted[k, g]), verdict, why))
    failing = [s for s in slice_verdicts if s.failed]
    verdict = "regression" if overall == "regression" or failing else "ok"
    return ClassVerdict(cls, class_kind(cls), base_total, cand_total, int(tested.cells[k, 0]),
                        float(tested.baseline_rate[k, 0]), float(tested.candidate_rate[k, 0]), delta, low, high,
                        p, p_adj, detectable, verdict, reason, tuple(slice_verdicts), overall == "regression")


def _decide(delta: float, p_adj: float | None, upper: float, min_effect: float, settings) -> tuple[str, str]:
    """A regression: significant after correction, and not shown to be below the minimum effect."""
    if p_adj is None:
        return "ok", "nothing could vary in either run"
    if p_adj < settings.alpha and upper >= min_effect - 1e-12:
        return "regression", f"{pts(delta)}, corrected p {pval(p_adj)}"
    if p_adj < settings.alpha:
        return "ok", (f"significant, but the rise {pts(delta)} is at most {size(upper)} "
                      f"({1 - settings.alpha:.0%} bound), below {size(min_effect)}")
    return "ok", f"corrected p {pval(p_adj)} ≥ {settings.alpha}"


def _flips(baseline: RunSummary, candidate: RunSummary, shared: list[Cell],
           verdicts: list[ClassVerdict]) -> tuple[tuple[Flip, ...] | None, str]:
    for summary in (baseline, candidate):
        if summary.repetitions_held is None:
            return None, f"flipped conversations cannot be listed: {summary.why_no_repetitions}"
    failed = {v.cls for v in verdicts if v.failed}
    out = []
    for cls in GATE_CLASSES:
        for cell in shared:
            fired = candidate.repetitions_held[cell].fired.get(cls, frozenset())
            for rep in sorted(baseline.repetitions_held[cell].clean(cls) & fired):
                out.append(Flip(cls, cell, rep, candidate.conversation_id(cell, rep),
                                baseline.conversation_id(cell, rep)))
    out.sort(key=lambda f: (f.cls not in failed, GATE_CLASSES.index(f.cls), f.cell, f.repetition))
    return tuple(out), ""
