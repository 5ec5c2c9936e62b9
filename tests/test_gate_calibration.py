"""A small version of `benchmarks/gate_calibration.py`: A/A pairs rarely fail the gate, and a
planted 10-point rise of one class is caught.

The benchmark runs 200 pairs of each; here 6 pairs of each on fixed seeds keep it to seconds.
With a false-alarm rate near 3% and a power near 88% (the benchmark's figures), this passes
on these seeds; a gate that ignored the correction, or paired nothing, or could not see a
10-point rise, fails it.
"""

from __future__ import annotations

from benchmarks.gate_calibration import PLANTED, RUNTIME_FAULTS, calibrate
from simulator.config import GateSection


def test_aa_pairs_pass_and_a_planted_regression_is_caught():
    cal = calibrate(6, 5, GateSection(), rise=0.10, workers=1, seed0=1)
    assert len(cal.aa) == len(cal.power) == 6
    # Both runs of a pair carry the same faults, so every tested class has a base rate to move.
    rates = {c.cls: c.baseline_rate for c in cal.aa[0].classes if c.kind != "guarantee"}
    assert all(rate > 0 for rate in rates.values()), rates
    assert cal.false_alarms <= 1
    fault, cls = PLANTED
    assert cal.planted_rate > RUNTIME_FAULTS[fault]
    assert 0.07 <= cal.mean_rise() <= 0.13
    assert cal.caught >= 5
    # The planted class is what fails the gate, not another one.
    for result in cal.power:
        assert {c.cls for c in result.failures} <= {cls}
