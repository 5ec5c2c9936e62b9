"""What a gate verdict holds: per class over all cells and in each goal and persona (a slice),
the cells whose rate rose most, the conversations that flipped, and the sample-size advice.

`simrun.scoring.gate._compare.gate_verdict` makes it; the command line and the pages show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simrun.scoring.checks import kind_of
from simrun.scoring.gate._advice import Advice
from simrun.scoring.gate._paired import Pairing
from simrun.scoring.gate._sharing import NewSlice, Sharing, new_slices
from simrun.scoring.gate._summary import TESTED, Cell, Counts, RunSummary
from simrun.scoring.gate._variation import RunVariation

SLICES_SHOWN = 5            # goals and personas named per class in the list of regressions


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
    se: float | None = None                 # the standard error of delta, under reassignment

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
        # A cell moved only where both runs decided the class: both rates are known.
        return (self.candidate.rate or 0.0) - (self.baseline.rate or 0.0)


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
    flips: tuple[Flip, ...] | None  # None: not paired, or the repetitions are not known (see why_no_flips)
    why_no_flips: str
    sharing: Sharing                # the cells compared, and those new or removed (not gated)
    _advice: Advice = field(repr=False, compare=False)
    # How far a cell's rate moves from run to run, measured by a baseline of several runs; None
    # for a baseline of one run (the gate then assumes runs do not differ as a whole).
    variation: RunVariation | None = None
    # Which test was used: paired by cell and repetition (same seed, scripted user), or not and why.
    pairing: Pairing = field(default_factory=lambda: Pairing(False, "unpaired"))

    @property
    def left_out(self) -> tuple[Cell, ...]:
        """Cells not compared: the candidate's new ones, and the baseline's the candidate lacks."""
        return tuple(sorted(self.sharing.new + self.sharing.removed))

    @property
    def new(self) -> tuple[NewSlice, ...]:
        """The candidate's cells not gated, by the goal or persona that made them new, with their counts."""
        return new_slices(self.sharing, self.candidate)

    @property
    def failures(self) -> list[ClassVerdict]:
        return [c for c in self.classes if c.failed]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def lowest_p(self) -> float:
        """The smallest corrected p-value over every class and slice tested (1 where none was)."""
        return min((p for c in self.classes for p in [c.p_adjusted, *(s.p_adjusted for s in c.slices)]
                    if p is not None), default=1.0)

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
        return "FAILED: " + self.failure_text()

    def failure_text(self) -> str:
        """What failed, in words: the guarantees broken, then the classes that regressed and where
        ("" when the gate passed). The run's verdict quotes it (`simrun.scoring.gate._run_verdict`)."""
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
        return "; ".join(parts)

    def repetitions_needed(self, rise: float | None = None) -> dict[str, int | None]:
        """Per tested class: the repetitions per cell at which a rise of `rise` (default: the
        minimum effect) in every cell is caught with POWER, from the baseline's cell rates (None:
        not within 10,000). Computed on first use: it takes a second or two."""
        return self._advice.repetitions(self.min_effect if rise is None else rise)

    def power(self, cls: str, rise: float, repetitions: int | None = None) -> float:
        """The advice's prediction: the chance that a rise of `rise` in every cell of `cls` is
        caught over all cells, at `repetitions` per cell (default: the candidate's)."""
        return self._advice.power(TESTED.index(cls), rise, repetitions or self.candidate.repetitions)
