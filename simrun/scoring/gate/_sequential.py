"""The sequential gate: judge a candidate in rounds, and stop as soon as the verdict is clear.

The candidate runs in rounds (`per_round` repetitions of every cell each), against a fixed,
blessed baseline. After each round the gate looks at everything the candidate has run so far
and decides one of three things:

- **fail**: a regression is established. The look runs the fixed gate itself
  (`simrun.scoring.gate._compare.gate_verdict`: the max-T permutation test over every class, goal and
  persona, reassigning whole conversations) at the look's level. Alpha is spent as
  `spent(k) = alpha * (k / max_rounds) ** spending` (the power family of alpha-spending
  functions, Kim and DeMets 1987; Lan and DeMets 1983 for spending functions), and the look's
  level is the one at which the chance of a false alarm at some look up to k is `spent(k)`,
  from the looks' joint law under reassignment of the rounds too (`simrun.scoring.gate._looks`): the
  looks share most of their conversations, so this level is well above the increment
  `spent(k) - spent(k - 1)` that the union bound would allow (`exact = false` tests at that
  increment: conservative, and valid whatever the looks' law). Within a look max-T holds the
  level over the whole family of classes and slices. The joint law is worked out only at a
  look where some corrected p-value came below `spent(k)`: elsewhere no level the look may
  take fails it, and the look shows (and tests at) the increment, which decides the same.
- **pass**: every class's upper bound has come below `min_effect`. Passing a class that truly
  rose by `min_effect` is a type II error, not a false alarm, so the pass side is held at the
  design's beta (`beta`, spent as `beta * (k / max_rounds) ** beta_spending`) per class, by a
  non-binding futility boundary (`simrun.scoring.gate._futility`: Jennison and Turnbull 2000, ch. 7):
  a class's bound at look k is the rise plus c_k standard errors (the larger of the gate's own,
  under reassignment, and the one under a rise of min_effect), with c_k from the recursive
  integration over the looks so far, and at least
  the candidate's exact upper bound at the same level less the baseline's rate where little
  fired. The running minimum over the looks is kept: a class that crossed stays passed. No union
  over classes is needed: a rise sits in one class, and the gate passes only when that class
  does too. A class no cell could test is left out of the pass (the gate lists it as
  untested). Slices are tested on the fail side at every look; the pass asks about classes over
  all cells, as the fixed gate's minimum effect does. The lower bound shown beside it is the
  fail side's (at the look's level).
- **continue**: neither yet. At the round cap (`max_rounds`), or when the budget stops the
  run, the verdict is **inconclusive**: exit status 3, never a pass.

Every cell gets the same repetitions each round (no adaptive allocation: the permutation test
assumes the candidate's repetitions per cell do not depend on its outcomes).

The settings are budgets.toml's [gate.sequential] (`simrun._settings.SequentialSection`,
bounds and all); a run made in rounds keeps those it started with, and they are read back
through the same model (`simrun._settings.stored_sequential`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simrun._errors import GateError
from simrun._settings import GateSection, SequentialSection
from simrun.scoring.gate._compare import gate_verdict, slice_masks
from simrun.scoring.gate._futility import Futility, beta_spent, se_at_rise
from simrun.scoring.gate._looks import look_level
from simrun.scoring.gate._summary import TESTED, RunSummary, first_repetitions
from simrun.scoring.gate._verdict import GateResult

DECISIONS = ("failed", "passed", "continue", "inconclusive")


def spent(alpha: float, k: float, settings: SequentialSection) -> float:
    """Alpha spent by look k (k may be fractional: a partial last round)."""
    t = min(max(k / settings.max_rounds, 0.0), 1.0)
    return alpha * float(t ** settings.spending)


@dataclass(frozen=True)
class Bound:
    """A class at one look: the rise, the fail side's running lower bound (alpha spent so far)
    and the pass side's running upper bound (beta spent so far): the class passes once `high`
    is below min_effect."""

    cls: str
    delta: float | None
    low: float | None
    high: float | None
    futility: Futility = field(default_factory=Futility, repr=False, compare=False)


@dataclass(frozen=True)
class Look:
    round: float                    # the rounds run so far (fractional: a partial round)
    repetitions: int                # the candidate's repetitions per cell so far
    conversations: int              # the candidate's conversations so far
    alpha: float                    # the level this look tested at (simrun.scoring.gate._looks)
    alpha_spent: float              # spent by this look, in all
    bounds: tuple[Bound, ...]
    decision: str                   # failed | passed | continue
    gate: GateResult

    def bound(self, cls: str) -> Bound:
        return next(b for b in self.bounds if b.cls == cls)


@dataclass(frozen=True)
class Sequential:
    looks: tuple[Look, ...]
    decision: str                   # failed | passed | continue | inconclusive
    settings: SequentialSection
    reason: str

    @property
    def gate(self) -> GateResult:
        """The last look's gate: the one that decided, or the latest."""
        return self.looks[-1].gate

    @property
    def conversations(self) -> int:
        return self.looks[-1].conversations

    @property
    def capped(self) -> int:
        """The candidate conversations a run to the cap would hold."""
        last = self.looks[-1]
        per_rep = last.conversations / max(last.repetitions, 1)
        return round(per_rep * self.settings.max_rounds * self.settings.per_round)

    def line(self) -> str:
        last = self.looks[-1]
        return (f"sequential: {self.decision} after {_rounds(last.round)} of {self.settings.max_rounds} rounds, "
                f"{last.conversations} candidate conversations (the cap holds {self.capped}); {self.reason}")


def _rounds(k: float) -> str:
    return str(int(k)) if k == int(k) else f"{k:.2f}"


def _look(baseline: RunSummary, candidate: RunSummary, settings: GateSection, seq: SequentialSection,
          k: float, repetitions: int, earlier: list[Look]) -> Look:
    before = earlier[-1] if earlier else None
    total = spent(settings.alpha, k, seq)
    share = total - (before.alpha_spent if before else 0.0)
    if share <= 0:
        raise GateError("the sequential gate spent its alpha before this look; looks must move forward")
    sofar = first_repetitions(candidate, repetitions)
    result = gate_verdict(baseline, sofar, _at(share, settings))
    level = share
    # No p-value below the alpha spent by now: no level this look may take (at most that) can
    # fail it, so the looks' joint law is worked out only where it can change the verdict.
    if seq.exact and result.lowest_p() < total:
        level = _level(baseline, sofar, result, settings, earlier, repetitions, share, total)
        if level != share:
            result = gate_verdict(baseline, sofar, _at(level, settings))
    z = _z(1 - level)
    beta_by_now = beta_spent(seq.beta, k / seq.max_rounds, seq.beta_spending)
    beta_share = beta_by_now - (beta_spent(seq.beta, before.round / seq.max_rounds, seq.beta_spending)
                                if before else 0.0)
    bounds = []
    for verdict in result.classes:
        if verdict.cls not in TESTED:
            continue
        old = before.bound(verdict.cls) if before else None
        if verdict.delta is None or verdict.se is None:
            bounds.append(old or Bound(verdict.cls, None, None, None))
            continue
        futility = old.futility if old else Futility()
        # The pass side's standard error: the null's, or the one under a rise of min_effect if
        # larger (simrun.scoring.gate._futility: the null's is too small when a rise is there).
        se = max(verdict.se, _se_at_rise(result, verdict.cls, settings.min_effect))
        if verdict.se > 0:
            c, futility = futility.next(1 / se ** 2, beta_by_now)
        else:
            # Nothing varied (a standard error of 0): the boundary cannot be integrated, and the
            # exact bound below decides alone, at the look's share of beta (the union bound).
            c = _z(1 - beta_share) if beta_share > 0 else float("inf")
        low, high = verdict.delta - z * verdict.se, verdict.delta + (c * se if verdict.se > 0 else 0.0)
        # The normal bound claims too much where little fired (nothing fired: a standard error
        # of 0): the rise is also bounded by the candidate's exact (Clopper-Pearson) upper bound
        # at the same level, less the baseline's rate, and the wider of the two is kept.
        high = max(high, _exact_upper(verdict.candidate.fired, verdict.candidate.scored, _sf(c))
                   - (verdict.baseline.rate or 0.0))
        if old is not None and old.low is not None and old.high is not None:     # set together
            low, high = max(low, old.low), min(high, old.high)
        bounds.append(Bound(verdict.cls, verdict.delta, low, high, futility))
    if not result.passed:
        decision = "failed"
    elif all(b.high is None or b.high < settings.min_effect for b in bounds):
        decision = "passed"
    else:
        decision = "continue"
    # Every candidate holds its repetitions here (`sequential_gate` refuses one that does not).
    conversations = sum(len([r for r in held.held if r < repetitions])
                        for held in (sofar.repetitions_held or {}).values())
    return Look(k, repetitions, conversations, level, total, tuple(bounds), decision, result)


def _at(level: float, settings: GateSection) -> GateSection:
    """The gate's settings with the look's share of alpha (a share of a valid alpha: within its bounds)."""
    return settings.model_copy(update={"alpha": level})


def _level(baseline: RunSummary, sofar: RunSummary, result: GateResult, settings: GateSection,
           earlier: list[Look], repetitions: int, share: float, total: float) -> float:
    """This look's level from the looks' joint law (`simrun.scoring.gate._looks`), on the cells and
    slices the look's gate (`result`) compared; the union bound's `share` where the runs do not
    say which repetition fired what."""
    if baseline.repetitions_held is None or sofar.repetitions_held is None:
        return share
    cells = list(result.sharing.gated)
    slices = np.array([mask for _, _, mask in slice_masks(cells)])
    marks = [look.repetitions for look in earlier] + [repetitions]
    spent_by = [look.alpha_spent for look in earlier] + [total]
    return look_level(baseline, sofar, cells, slices, marks, spent_by, settings.permutations)


def _se_at_rise(result: GateResult, cls: str, rise: float) -> float:
    """`se_at_rise` over the cells both runs of the look scored for the class."""
    pairs = [(result.baseline.cells[c][cls], result.candidate.cells[c][cls]) for c in result.sharing.gated]
    pairs = [(b, k) for b, k in pairs if b.scored and k.scored]
    return float(se_at_rise([b.fired for b, _ in pairs], [b.scored for b, _ in pairs],
                            [k.scored for _, k in pairs], rise))


def _exact_upper(fired: int, scored: int, a: float) -> float:
    """One-sided (1 - a) Clopper-Pearson upper bound of a rate: fired of scored."""
    from scipy.special import betaincinv

    if scored == 0 or fired >= scored or a <= 0:
        return 1.0
    return float(betaincinv(fired + 1, scored - fired, 1 - a))


def _z(q: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(q))


def _sf(x: float) -> float:
    from scipy.special import ndtr

    return float(ndtr(-x))


def sequential_gate(baseline: RunSummary, candidate: RunSummary, settings: GateSection,
                    seq: SequentialSection | None = None, *, finished: bool = False,
                    previous: Sequential | None = None) -> Sequential:
    """Every look the candidate's repetitions allow, from the first round (or after `previous`,
    whose looks are kept), until one decides. `finished`: the candidate will run no more (the
    cap, the budget, or a stored run judged as it is), so undecided is inconclusive."""
    seq = seq if seq is not None else SequentialSection()      # budgets.toml's defaults
    if candidate.repetitions_held is None:
        raise GateError(f"{candidate.source}: the sequential gate needs to know which repetition fired what "
                        f"({candidate.why_no_repetitions})")
    held = max((max(h.held) + 1 for h in candidate.repetitions_held.values() if h.held), default=0)
    cap = seq.max_rounds * seq.per_round
    reps = min(held, cap)
    looks = list(previous.looks) if previous else []
    marks = [r * seq.per_round for r in range(1, seq.max_rounds + 1) if r * seq.per_round <= reps]
    if reps and (not marks or marks[-1] < reps):
        marks.append(reps)                                       # a partial last round
    for n in marks:
        if looks and (looks[-1].repetitions >= n or looks[-1].decision != "continue"):
            continue
        looks.append(_look(baseline, candidate, settings, seq, n / seq.per_round, n, looks))
    if not looks:
        raise GateError(f"{candidate.source}: no conversation to judge yet; run a round first")
    last = looks[-1]
    decision = last.decision
    if decision == "failed":
        reason = "a regression is established: " + "; ".join(last.gate.regressions()[:3] or [last.gate.headline()])
    elif decision == "passed":
        # Named for what it is: a futility bound per class over all cells, at the design's beta
        # (a 1 - beta chance of stopping on a real rise of min_effect), blind to goals and personas.
        reason = (f"every class's futility bound over all cells (at beta {seq.beta:g}: a rise of "
                  f"{100 * settings.min_effect:.0f} pts would be passed with chance at most {seq.beta:g}; goals and "
                  f"personas not bounded) came below {100 * settings.min_effect:.0f} pts (highest "
                  f"{_pts(max((b.high for b in last.bounds if b.high is not None), default=0))})")
    else:
        open_ = [(b.cls, b.high) for b in last.bounds if b.high is not None and b.high >= settings.min_effect]
        reason = ("no regression established, and a rise of the minimum effect not ruled out for "
                  + ", ".join(f"{cls} (up to {_pts(high)})" for cls, high in open_[:4])
                  + (f" and {len(open_) - 4} more" if len(open_) > 4 else ""))
        if finished or last.repetitions >= cap:
            decision = "inconclusive"
    return Sequential(tuple(looks), decision, seq, reason)


def _pts(x: float) -> str:
    return f"{100 * x:+.1f} pts"
