"""The merge gate: one verdict on a candidate run against a baseline, from per-cell counts.

`gate_verdict(baseline, candidate, settings)` is the only place a verdict is made. The `simrun
gate` command and the HTML report both call it, so they can never disagree. It fails when

- any guarantee fired in any candidate conversation (one violation is a failed run), or
- a class rate rose, over all cells or within one goal or one persona (a slice): the
  permutation test over cells (`simrun.scoring.gate._stats`), corrected over every class and slice at once,
  gives p < alpha, *and* the rise is not shown to be smaller than the minimum effect (its
  one-sided upper bound reaches `min_effect`, or `min_effect_slice` for a slice).

The classes tested are the progress classes, simulator_error (a runtime that confuses the
simulated user pushes conversations out of its own rates; that must not pass unseen),
runtime_error and goal_not_reached. Guarantees are decided by the zero rule, so they are left
out of the correction's family: a test there could never change the verdict, and spending
alpha on it would only blunt the others.

When both runs say the same seed and a scripted user (and the baseline is one run of the same
repetitions), a conversation at a cell and repetition is replayed alike by an unchanged runtime,
and the test is paired: a sign-flip permutation test over the pairs (`simrun.scoring.gate._paired`),
with the same max-T family and minimum-effect rule. The result says which test it used, and why.

Besides the verdict, the result names what moved: the cells whose rate rose most (descriptive),
and, for paired runs only, the conversations that flipped (clean at a cell and repetition in the
baseline, fired at the same cell and repetition in the candidate). Between unpaired runs
repetition i of one is unrelated to repetition i of the other, so a flip there is a chance match,
and a list of them would invite chasing noise: it is not made.

Two runs are compared only where the baseline is fit to judge the candidate: on the cells whose
persona and goal are unchanged by content (`simrun.scoring.gate._sharing`: the other cells are listed as
new, not gated, and the baseline's cells the candidate lacks as removed), with the same scorer
version, every class the scorer knows, and counts that fit in the repetitions
(`simrun.scoring.gate._summary.validate_summary`). Anything else is a `GateError` that says how to fix it.
"""

from __future__ import annotations

import numpy as np

from simrun._errors import GateError, Parameter
from simrun._settings import GateSection
from simrun.scoring.checks import GUARANTEES
from simrun.scoring.gate import _stats as stats
from simrun.scoring.gate._advice import Advice, advice_rates
from simrun.scoring.gate._formats import pts, pval, size
from simrun.scoring.gate._joint import conversations_of
from simrun.scoring.gate._paired import Pairing, compare_paired, pairing, pairs_of
from simrun.scoring.gate._sharing import Sharing, sharing
from simrun.scoring.gate._summary import GATE_CLASSES, TESTED, Cell, Counts, RunSummary, validate_summary
from simrun.scoring.gate._variation import run_variation
from simrun.scoring.gate._verdict import ClassVerdict, Flip, GateResult, MovedCell, SliceVerdict, class_kind

SAFE_SIDE = 0.90            # the repetitions advised assume each class's rate at this upper bound


def check_comparable(baseline: RunSummary, candidate: RunSummary) -> Sharing:
    """The cells the two runs may be compared on (`simrun.scoring.gate._sharing`), or a GateError."""
    if baseline.scorer_version != candidate.scorer_version:
        raise GateError(
            f"scorer mismatch: baseline ({baseline.source}) was scored by scorer version "
            f"{baseline.scorer_version}, candidate ({candidate.source}) by {candidate.scorer_version}; "
            "rescore the older run with `simrun rescore RUN` and bless it again")
    if baseline.user_backend and candidate.user_backend and baseline.user_backend != candidate.user_backend:
        # Another instrument: a model-played user reaches goals a scripted one does not, and the
        # other way round; a rate measured with one says nothing of a change measured with the other.
        raise GateError((
            f"user mismatch: baseline ({baseline.source}) was measured with the user {baseline.user_backend}, "
            f"candidate ({candidate.source}) with {candidate.user_backend}; run the candidate with ",
            Parameter("user", baseline.user_backend), f", or bless a baseline measured with {candidate.user_backend}"))
    for summary in (baseline, candidate):
        validate_summary(summary)
    return sharing(baseline, candidate)


def slice_masks(cells: list[Cell]) -> list[tuple[str, str, np.ndarray]]:
    """All cells, then each goal and each persona; a slice that repeats an earlier one is dropped."""
    out = [("all", "", np.ones(len(cells), bool))]
    for dimension, index in (("goal", 1), ("persona", 0)):
        for name in sorted({c[index] for c in cells}):
            mask = np.array([c[index] == name for c in cells])
            if not any(np.array_equal(mask, m) for _, _, m in out):
                out.append((dimension, name, mask))
    return out


def gate_verdict(baseline: RunSummary, candidate: RunSummary, settings: GateSection) -> GateResult:
    """The gate's decision. Raises GateError when the two runs must not be compared."""
    shares = check_comparable(baseline, candidate)
    shared = list(shares.gated)
    slices = slice_masks(shared)
    mask = np.array([m for _, _, m in slices])

    def counts(summary: RunSummary, what: str) -> np.ndarray:
        return np.array([[getattr(summary.cells[c][cls], what) for cls in TESTED] for c in shared])

    base_fired, base_scored = counts(baseline, "fired"), counts(baseline, "scored")
    conversations = None
    if baseline.repetitions_held is not None and candidate.repetitions_held is not None:
        conversations = conversations_of(baseline.repetitions_held, candidate.repetitions_held, shared, TESTED)
    cand_fired, cand_scored = counts(candidate, "fired"), counts(candidate, "scored")
    # Runs that differ as a whole: the variation a baseline of several runs measured widens the null.
    variation = run_variation(baseline, shared, TESTED)
    extra = None if variation is None else variation.extra_variance(base_fired + cand_fired, base_scored + cand_scored)
    whole = None if variation is None else variation.whole_run(base_fired + cand_fired, base_scored + cand_scored)
    paired = pairing(baseline, candidate, shared)
    if paired.paired:       # a baseline of one run: no run-to-run variation to hold in the null
        assert baseline.repetitions_held is not None and candidate.repetitions_held is not None
        tested = compare_paired(pairs_of(baseline.repetitions_held, candidate.repetitions_held, shared, TESTED),
                                len(shared), mask, alpha=settings.alpha, correction=settings.correction,
                                permutations=settings.permutations)
    else:
        family = stats.Family(base_fired, base_scored, cand_fired, cand_scored, mask, conversations, extra, whole)
        tested = stats.compare(family, alpha=settings.alpha, correction=settings.correction,
                               permutations=settings.permutations)
    advice = Advice(advice_rates(base_fired, base_scored),
                     advice_rates(base_fired, base_scored, upper=SAFE_SIDE), mask,
                     settings.alpha, settings.correction, settings.min_effect)
    verdicts = []
    for cls in GATE_CLASSES:
        pairs = [(baseline.cells[c][cls], candidate.cells[c][cls]) for c in shared]
        scored = [(i, b, k) for i, (b, k) in enumerate(pairs) if b.scored and k.scored]
        base_total, cand_total = baseline.total(cls), candidate.total(cls)
        if cls in GUARANTEES:
            diffs = [k.fired / k.scored - b.fired / b.scored for _, b, k in scored]     # their rates
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
                    if _rose(baseline.cells[c][cls], candidate.cells[c][cls])),
                   key=lambda m: (-m.rise, -m.candidate.fired, GATE_CLASSES.index(m.cls), m.cell))
    flips, why = _flips(baseline, candidate, shared, verdicts, paired)
    return GateResult(baseline, candidate, settings.alpha, settings.min_effect, settings.min_effect_slice,
                      settings.correction, settings.permutations, tested.tests, len(shared), tuple(verdicts),
                      tuple(moved), flips, why, shares, advice, variation, paired)


def _rose(base: Counts, cand: Counts) -> bool:
    """Both runs scored the cell, and the candidate's rate is the higher."""
    return bool(base.scored and cand.scored and cand.fired / cand.scored > base.fired / base.scored)


def _tested_class(cls: str, k: int, tested: stats.Tested, slices: list[tuple[str, str, np.ndarray]],
                  shared: list[Cell], baseline: RunSummary, candidate: RunSummary,
                  scored: list[tuple[int, Counts, Counts]], advice_rates: np.ndarray,
                  settings: GateSection) -> ClassVerdict:
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
                        p, p_adj, detectable, verdict, reason, tuple(slice_verdicts), overall == "regression",
                        float(tested.se[k, 0]))


def _decide(delta: float, p_adj: float | None, upper: float, min_effect: float,
            settings: GateSection) -> tuple[str, str]:
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
           verdicts: list[ClassVerdict], paired: Pairing) -> tuple[tuple[Flip, ...] | None, str]:
    base_held, cand_held = baseline.repetitions_held, candidate.repetitions_held
    if base_held is None or cand_held is None:
        unsaid = baseline if base_held is None else candidate
        return None, f"flipped conversations cannot be listed: {unsaid.why_no_repetitions}"
    if not paired.paired:
        # Only a pair replays one conversation: elsewhere a "flip" is two unrelated conversations.
        return None, (f"flipped conversations are not listed: the runs are not paired ({paired.reason}), so no "
                      "conversation of the baseline is the candidate's at the same cell and repetition")
    failed = {v.cls for v in verdicts if v.failed}
    out = []
    for cls in GATE_CLASSES:
        for cell in shared:
            fired = cand_held[cell].fired.get(cls, frozenset())
            for rep in sorted(base_held[cell].clean(cls) & fired):
                out.append(Flip(cls, cell, rep, candidate.conversation_id(cell, rep),
                                baseline.conversation_id(cell, rep)))
    out.sort(key=lambda f: (f.cls not in failed, GATE_CLASSES.index(f.cls), f.cell, f.repetition))
    return tuple(out), ""
