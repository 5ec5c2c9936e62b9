"""The sequential gate (simrun.scoring.gate._sequential): its alpha spending, its three outcomes, and
that looking every round keeps the family-wise error at alpha only with the spending: the same
A/A pairs judged by the fixed gate at every round (no correction for the looks) alarm far more
often. Runs are synthetic: per-conversation draws over a small matrix, built as the store builds
summaries (`summary_from_counts`)."""

from __future__ import annotations

import numpy as np
import pytest

from simrun._settings import GateSection, ReleaseSection, SequentialSection
from simrun.scoring.gate._compare import check_comparable, slice_masks
from simrun.scoring.gate._looks import _largest_level, look_level
from simrun.scoring.gate._run_verdict import run_verdict
from simrun.scoring.gate._sequential import sequential_gate, spent
from simrun.scoring.gate._summary import GATE_CLASSES, Counts, summary_from_counts
from simrun.scoring.store import _rates as R

CELLS = [(f"p{i}", f"g{j}") for i in range(3) for j in range(4)]
RATES = {"dead_end": 0.15, "loop": 0.10, "goal_not_reached": 0.20}


def run(rng, name: str, reps: int, rise: dict | None = None, goal: str | None = None):
    """A run of `reps` repetitions of every cell; `rise` adds to a class's rate (in `goal` only, if given)."""
    rows = []
    for persona, g in CELLS:
        for rep in range(reps):
            counts = {cls: Counts(0, 1, 0) for cls in GATE_CLASSES}
            for cls, rate in RATES.items():
                up = (rise or {}).get(cls, 0.0) if goal in (None, g) else 0.0
                counts[cls] = Counts(int(rng.random() < rate + up), 1, 0)
            rows.append((persona, g, rep, counts))
    return summary_from_counts(name, "synthetic", reps, rows)


def test_the_spending_adds_up_to_alpha_at_the_cap_and_spends_less_early_with_a_larger_rho():
    seq = SequentialSection(max_rounds=10, spending=2.0)
    shares = np.diff([spent(0.05, k, seq) for k in range(11)])
    assert (shares > 0).all() and shares.sum() == pytest.approx(0.05)
    assert spent(0.05, 3, seq) < spent(0.05, 3, SequentialSection(max_rounds=10, spending=1.0))
    assert spent(0.05, 99, seq) == 0.05                      # never more than alpha, whatever the looks


def test_looking_every_round_without_the_spending_exceeds_alpha_and_the_sequential_gate_does_not():
    """The 'broken' sequential test: the fixed gate's own level at every look. With the minimum
    effect at 0 nothing passes, so every pair is looked at every round to the cap. The
    sequential gate's exact levels (simrun.scoring.gate._looks) stay near alpha; the same pairs judged
    at alpha at every look alarm about three times as often. (600 such pairs at 1,000
    reassignments: exact levels 2.7%; benchmarks/gate_sequential.py measures the real matrix.)"""
    settings = GateSection(min_effect=0.0, min_effect_slice=0.0, permutations=1_000)
    seq = SequentialSection(max_rounds=5)
    rng = np.random.default_rng(2026)
    naive = sequential = 0
    pairs = 60
    for _ in range(pairs):
        outcome = sequential_gate(run(rng, "base", 6), run(rng, "cand", 5), settings, seq)
        sequential += outcome.decision == "failed"
        naive += any(np.nanmin([c.p_adjusted for c in look.gate.classes if c.p_adjusted is not None]
                               + [s.p_adjusted for c in look.gate.classes for s in c.slices]) < settings.alpha
                     for look in outcome.looks)
        assert outcome.decision == "failed" or len(outcome.looks) == seq.max_rounds
    print(f"A/A pairs alarmed: sequential {sequential}, every look at alpha {naive} of {pairs}")
    assert sequential <= 6, sequential          # about alpha of 60 (3), 6 is alpha + 2 sd
    assert naive >= 2 * max(sequential, 3), naive   # uncorrected looks: well above alpha


def test_each_look_tests_between_the_union_bound_s_share_and_the_alpha_spent_and_well_above_the_share_late():
    """The looks share most of their conversations, so by the cap the exact level is well above
    the union bound's increment (about twice, with 6 looks; about 6 times at the 20th of 20);
    never below it, never above what is spent by then. A look whose p-values all stay at or
    above the alpha spent cannot fail at any such level, and shows the increment."""
    settings = GateSection(min_effect=0.0, min_effect_slice=0.0, permutations=1_000)
    seq = SequentialSection(max_rounds=6)
    rng = np.random.default_rng(11)
    base, cand = run(rng, "base", 10), run(rng, "cand", 6)
    outcome = sequential_gate(base, cand, settings, seq)
    assert len(outcome.looks) == 6, outcome.line()
    spent_by = [spent(settings.alpha, k, seq) for k in range(7)]
    for k, look in enumerate(outcome.looks, start=1):
        share = spent_by[k] - spent_by[k - 1]
        assert share - 1e-12 <= look.alpha <= spent_by[k] + 1e-12
        if look.gate.lowest_p() >= spent_by[k]:
            assert look.alpha == pytest.approx(share)
    cells = list(check_comparable(base, cand).gated)
    slices = np.array([mask for _, _, mask in slice_masks(cells)])
    level = look_level(base, cand, cells, slices, range(1, 7), spent_by[1:], 2_000)
    assert spent_by[6] >= level > 1.5 * (spent_by[6] - spent_by[5]), level
    assert look_level(base, cand, cells, slices, [1], spent_by[1:2], 2_000) == pytest.approx(spent_by[1])
    union = sequential_gate(base, cand, settings, SequentialSection(max_rounds=6, exact=False))
    assert [look.alpha for look in union.looks] == pytest.approx(np.diff(spent_by))


def test_a_level_never_splits_tied_p_values():
    assert _largest_level(np.array([0.1, 0.1, 0.2, 0.3]), 1) == 0.0
    assert _largest_level(np.array([0.1, 0.1, 0.2, 0.3]), 2.5) == 0.1
    assert _largest_level(np.array([0.1, 0.1, 0.2, 0.3]), 3) == 0.2
    assert _largest_level(np.array([0.1, 0.1, 0.2, 0.3]), 9) == 0.3
    assert _largest_level(np.array([0.1]), 0.4) == 0.0


def test_a_broken_goal_fails_early_and_names_the_goal():
    settings = GateSection(permutations=2_000)
    seq = SequentialSection(max_rounds=8)
    rng = np.random.default_rng(7)
    outcome = sequential_gate(run(rng, "base", 10), run(rng, "cand", 8, {"dead_end": 0.8}, goal="g2"), settings, seq)
    assert outcome.decision == "failed"
    assert len(outcome.looks) < seq.max_rounds
    assert outcome.conversations < seq.max_rounds * len(CELLS)
    assert any("goal g2" in line for line in outcome.gate.regressions())


def test_an_aa_pair_passes_once_every_class_rules_out_the_minimum_effect():
    settings = GateSection(min_effect=0.15, permutations=1_000)
    seq = SequentialSection(max_rounds=12)
    rng = np.random.default_rng(3)
    outcome = sequential_gate(run(rng, "base", 30), run(rng, "cand", 12), settings, seq)
    assert outcome.decision == "passed", outcome.line()
    last = outcome.looks[-1]
    assert all(b.high < settings.min_effect for b in last.bounds if b.high is not None)
    # The confidence sequence is the running intersection: its upper end never rises.
    highs = [look.bound("dead_end").high for look in outcome.looks]
    assert all(a >= b for a, b in zip(highs, highs[1:]))
    # Before the decision some class was still open.
    assert all(look.decision == "continue" for look in outcome.looks[:-1])


def test_undecided_at_the_cap_is_inconclusive_exit_3_and_never_a_pass():
    settings = GateSection(permutations=1_000)
    seq = SequentialSection(max_rounds=2)
    rng = np.random.default_rng(5)
    outcome = sequential_gate(run(rng, "base", 4), run(rng, "cand", 2), settings, seq)
    assert outcome.decision == "inconclusive"
    # Below the cap, and not finished, it says continue; finished (the budget), inconclusive.
    early = sequential_gate(run(rng, "base", 4), run(rng, "cand", 1), settings, SequentialSection(max_rounds=5))
    assert early.decision == "continue"
    cut = sequential_gate(run(rng, "base", 4), run(rng, "cand", 1), settings, SequentialSection(max_rounds=5),
                          finished=True)
    assert cut.decision == "inconclusive"
    outcome_rates = R.Outcome(conversations=24, counted=24, ends={"goal_reached": 24}, goal_reached=20,
                              goal_scored=24, goal_unverifiable=0, runtime_errors=0, mean_turns=None,
                              mean_turns_to_goal=None, cost_usd=0.0)
    release = ReleaseSection(fail_on_runtime_error=False, progress_ceiling=1.0)
    verdict = run_verdict("cand", [], outcome_rates, release, sequential=outcome)
    assert (verdict.status, verdict.exit_code, verdict.passed) == ("inconclusive", 3, False)
    assert verdict.reasons[0].text.startswith("sequential: inconclusive after 2 of 2 rounds")
    continuing = run_verdict("cand", [], outcome_rates, release, sequential=early)
    assert continuing.exit_code == 3 and "run more rounds" in continuing.reasons[0].text


def test_looks_continue_from_the_previous_ones_and_agree_with_judging_afresh():
    settings = GateSection(permutations=1_000)
    seq = SequentialSection(max_rounds=4)
    rng = np.random.default_rng(9)
    base, cand = run(rng, "base", 6), run(rng, "cand", 4)
    from simrun.scoring.gate._summary import first_repetitions

    first = sequential_gate(base, first_repetitions(cand, 2), settings, seq)
    later = sequential_gate(base, cand, settings, seq, previous=first)
    afresh = sequential_gate(base, cand, settings, seq)
    assert [k.decision for k in later.looks] == [k.decision for k in afresh.looks]
    assert [k.bounds for k in later.looks] == [k.bounds for k in afresh.looks]
