"""A whole-run effect: one shift shared by every cell of a run (a model-played user's provider or
model version that day), which a run x cell model cannot see (`simrun.scoring.gate._variation`).

The runs are synthetic (`benchmarks/gate_runs.py`): 20 cells of demo-like base rates, each run's
simulator_error and goal_not_reached moved together by a logit shift drawn per run. Seeds are
fixed; a thousand permutations (the least the settings allow) keep each gate well under a second.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchmarks.gate_runs import one_run, synthetic_rates
from simrun._settings import GateSection
from simrun.scoring.gate._compare import gate_verdict
from simrun.scoring.gate._summary import TESTED, merge_runs
from simrun.scoring.gate._variation import run_variation

SETTINGS = GateSection(permutations=1_000)
RATES = synthetic_rates()[:20]                 # 4 personas x 5 goals


def baseline_and_candidate(seed: int, shift: float, runs: int, rise: float = 0.0):
    rng = np.random.default_rng([seed, 42])
    parts = [one_run(rng, RATES, 0.0, 5, f"r20260101-00000{j}-{seed:06x}", shift) for j in range(runs)]
    candidate = one_run(rng, RATES, 0.0, 5, "cand", shift)
    broken = one_run(rng, RATES, 0.0, 5, "broken", shift, rise=rise) if rise else None
    return merge_runs(parts), candidate, broken


def test_a_a_with_a_planted_whole_run_shift_stays_quiet_and_a_planted_regression_still_fails():
    # A logit shift of sd 3 per run in two classes: a gate that models only run x cell effects
    # (the cells independent) failed 5 of these 16 A/A pairs against three runs.
    alarms = []
    for seed in range(16):
        baseline, candidate, _ = baseline_and_candidate(seed, 3.0, 3)
        result = gate_verdict(baseline, candidate, SETTINGS)
        if not result.passed:
            alarms.append((seed, result.regressions()[:1]))
    assert len(alarms) <= 2, alarms                 # 16 pairs at 5%: 0.8 expected
    # Against the five runs the docs recommend, a rise of 30 points in dead_end (a class the
    # shift leaves alone, its own whole-run spread still uncertain) is caught, and alone.
    caught = 0
    for seed in range(4):
        baseline, candidate, broken = baseline_and_candidate(100 + seed, 1.0, 5, rise=0.3)
        result = gate_verdict(baseline, broken, SETTINGS)
        dead_end = next(c for c in result.classes if c.cls == "dead_end")
        caught += dead_end.regressed_overall and [c.cls for c in result.failures] == ["dead_end"]
    assert caught >= 3


def test_the_shift_is_measured_where_it_was_planted_and_not_elsewhere():
    measured = {0.0: [], 1.5: []}
    for shift in measured:
        for seed in range(3):
            rng = np.random.default_rng([seed, 7])
            parts = [one_run(rng, synthetic_rates(), 0.0, 5, f"r{j}", shift) for j in range(6)]
            merged = merge_runs(parts)
            v = run_variation(merged, list(merged.cells), TESTED)
            assert v is not None
            measured[shift].append((v.shift("goal_not_reached"), v.shift("dead_end"), v.rho[TESTED.index("dead_end")]))
    planted = np.mean([m[0] for m in measured[1.5]])
    assert 0.7 <= planted <= 2.5, measured[1.5]       # six runs: a rough estimate, but of the right size
    assert np.mean([m[0] for m in measured[0.0]]) < 0.4, measured[0.0]
    assert np.mean([m[1] for m in measured[1.5]]) < 0.4, measured[1.5]     # dead_end was not shifted
    # The run x cell estimate is taken net of the whole-run shift: the shift is not counted twice.
    assert abs(np.mean([m[2] for m in measured[1.5]])) < 0.03


@pytest.mark.parametrize("runs", [3, 5])
def test_a_dominant_shift_is_drawn_as_the_t_reference_of_k_runs(runs):
    """Where sampling explains none of the runs' spread, the shared shift a reassignment draws,
    over its standard deviation sqrt(s^2 (1 + 1/K)), follows Student's t with K - 1 degrees of
    freedom: the prediction interval of one run against K."""
    from simrun.scoring.gate._variation import WholeRun

    whole = WholeRun(np.ones((1, 1)), runs, np.array([4.0]), np.array([0.0]))
    draws = whole.draw(np.random.default_rng(1), 200_000)[:, 0] / 2.0
    for q in (0.9, 0.95, 0.99):
        assert np.quantile(draws, q) == pytest.approx(stats.t.ppf(q, runs - 1), rel=0.03)


def test_the_output_reports_the_shift_it_measured_and_a_one_run_baseline_names_the_fix():
    from simrun.scoring.gate import _text as T

    baseline, candidate, _ = baseline_and_candidate(3, 1.5, 5)
    said = T.method_text(gate_verdict(baseline, candidate, SETTINGS))
    assert "a whole-run shift (every cell of a run together; sd on the logit scale, from 4 degrees of freedom" in said
    assert "goal_not_reached" in said.split("a whole-run shift", 1)[1]
    one = T.method_text(gate_verdict(merge_runs([baseline_and_candidate(3, 0.0, 1)[0]]), candidate, SETTINGS))
    assert "assumes runs do not differ as a whole" in one and "not measurable from one run" in one
    assert "five or more" in one and "simrun baseline bless RUN RUN RUN RUN RUN --out FILE" in one
