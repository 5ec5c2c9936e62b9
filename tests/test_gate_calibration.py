"""A small version of each part of `benchmarks/gate_calibration.py`, on real runs of the demo.

The benchmark runs 200 pairs of each; here three pairs of each on fixed seeds (and a 10-point
broad rise rather than 5, which the advice needs far fewer repetitions for) keep it to about
half a minute. With the benchmark's figures (A/A false alarms near 5%, a broken goal caught in
nearly every pair, a 5-point rise caught with 80% power at the repetitions the advice names),
these seeds pass with no false alarm and every planted rise caught; the bounds are strict
(none of three A/A pairs fails, every broken goal is named, every broad rise caught), so that
a gate that ignored the correction (it would fail A/A pairs nearly always), tested no slice
(the broken goal goes unnamed) or gave wrong advice (the prediction leaves 0.6 to 1) fails
them.
"""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.gate_calibration import pilot_runs, plan_from, run_pairs
from benchmarks.gate_demo import BROAD_RISE, PLANTED, RUNTIME_FAULTS
from simrun._settings import GateSection
from simrun.scoring.gate._summary import TESTED

# On one xdist worker: its pilot runs are made once.
pytestmark = pytest.mark.xdist_group("gate-calibration")


@pytest.fixture(scope="module")
def pilots():
    return pilot_runs(pilot=2)


@pytest.fixture(scope="module")
def plan(pilots):
    return plan_from(pilots, GateSection(permutations=2_000))


def test_a_a_pairs_pass_with_slices_on_and_a_broken_goal_is_caught_by_name(plan):
    fault, cls = PLANTED
    assert len(plan.local_faults) == 10 and all(f[fault] > RUNTIME_FAULTS[fault] for f in plan.local_faults.values())
    results = run_pairs(plan, 3, ("aa", "localized"), seed0=1)
    aa = [r["aa"] for r in results]
    # Both runs of a pair carry the same faults, so every tested class has a base rate to move.
    assert all(aa[0]["base_rates"][c] > 0 for c in TESTED), aa[0]["base_rates"]
    assert all(r["passed"] for r in aa)
    local = [r["localized"] for r in results]
    assert len({r["goal"] for r in local}) == 3         # a different goal broken in each pair
    assert all(r["named"] for r in local)
    assert all(r["rise"] >= 0.4 for r in local)
    # The gate blames the broken goal's class, not another one.
    assert not any(r["others"] for r in local)


def test_a_broad_rise_is_caught_at_the_repetitions_the_advice_names(pilots):
    """A 10-point rise, at the 7 or so repetitions the advice names for it: the benchmark's own
    five points need 24, over three times the conversations, to show the same mechanism."""
    rise = 0.10
    plan = plan_from(pilots, GateSection(permutations=2_000), broad_rise=rise)
    assert plan.advised is not None and plan.repetitions < plan.advised <= 20
    broad = dataclasses.replace(plan, sizes=(plan.advised,))
    rows = [r["broad"][plan.advised] for r in run_pairs(broad, 3, ("broad",), seed0=1)]
    assert all(r["overall"] for r in rows)
    assert all(0.6 <= r["predicted"][rise] <= 1.0 for r in rows), rows
    assert rise - 0.03 <= sum(r["rise"] for r in rows) / len(rows) <= rise + 0.04
    assert BROAD_RISE == 0.05       # the benchmark's figure, in the README, is for five points


def test_the_paired_part_catches_on_runs_of_one_seed_what_the_unpaired_test_misses(plan):
    """Part (g), one pair: a 5-point rise against a seeded runtime, on runs of one seed. Judged
    paired (both summaries say seed 1 and the scripted user) it is caught; the same conversations
    said to be of another seed are judged unpaired, and at 5 repetitions the rise is within that
    test's noise. An A/A with the runtime seeded apart stays quiet either way."""
    from benchmarks.gate_calibration import paired_pair_job

    out = paired_pair_job((0, plan, 1, plan.repetitions, ("aa_noise", "broad_seeded")))
    broad = out["broad_seeded"]
    assert broad["paired"]["caught"] and not broad["unpaired"]["caught"], broad
    assert broad["differ"] > 0      # the flips of the planted rise, listed because the runs are paired
    assert not out["aa_noise"]["paired"]["alarm"] and not out["aa_noise"]["unpaired"]["alarm"]
