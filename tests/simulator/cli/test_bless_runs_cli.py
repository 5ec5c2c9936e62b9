"""`simrun baseline bless RUN RUN ...`: a baseline of several runs, and a gate that reports the
run-to-run variation it measured (or, against one run, that it assumed none)."""

from __future__ import annotations

import json
import re

from tests.simulator.cli.test_gate_cli import run, set_faults


def test_several_runs_bless_into_one_baseline_the_gate_measures_their_variation(cli, project):
    set_faults(project, "dead_end=0.2,not_understood=0.2")
    budgets = project / "budgets.toml"
    budgets.write_text(budgets.read_text().replace("[release]", "[release]\nprogress_ceiling = 1.0"))
    runs = [run(cli, "--seed", str(seed)) for seed in (1, 2, 3)]
    cand = run(cli, "--seed", "4")
    blessed = cli("baseline", "bless", *runs, "--out", "baseline.json")
    assert blessed.exit_code == 0, blessed.output
    assert f"blessed 3 runs ({', '.join(runs)})" in blessed.output
    data = json.loads((project / "baseline.json").read_text())
    assert data["format_version"] == 5 and data["runs"] == runs
    assert data["matrix"]["repetitions"] == 3 and data["matrix"]["conversations"] == 210
    gated = cli("gate", "--baseline", "baseline.json", "--candidate", cand)
    assert gated.exit_code in (0, 1), gated.output
    assert "run-to-run variation, measured over the baseline's 3 runs" in re.sub(r"\s+", " ", gated.output)
    # One run: the gate says what it assumed, and how to measure it.
    single = cli("baseline", "bless", runs[0], "--out", "one.json")
    assert "bless several" in single.output
    against_one = re.sub(r"\s+", " ", cli("gate", "--baseline", "one.json", "--candidate", cand).output)
    assert "assumes runs do not differ as a whole" in against_one
    # Runs of different matrices are not blessed together, with the reason.
    other = run(cli, "--seed", "5", repetitions=2)
    refused = cli("baseline", "bless", runs[0], other, "--out", "x.json")
    assert refused.exit_code == 2 and "repetitions" in refused.output and "one matrix" in refused.output
