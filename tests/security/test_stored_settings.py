"""A hostile database is bounded like any input (issue 39): the settings a run keeps are read back
through the models and bounds of budgets.toml (`simrun._settings`), never rebuilt as given.

A crafted DuckDB file with simrun's schema and one stored setting changed (a round cap of 10**12)
made `simrun report`, `simrun gate --sequential` and `simrun dashboard` loop without end: the
sequential settings were rebuilt from the stored JSON with no check. Now each refuses the run in
one line that names the database, the run and the field, and ends at once (exit 2).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import duckdb
import pytest

from tests.fixtures.processes import cli_command
from tests.simulator.cli.test_gate_cli import one_error_line

SEQUENTIAL = {"max_rounds": 20, "per_round": 1, "spending": 1.0, "beta": 0.1, "beta_spending": 0.5, "exact": True}
# Long enough for a command to start and judge a small run on a loaded machine; the loop this
# test guards against never ends, so any bound tells the two apart.
PROMPTLY_S = 120


@pytest.fixture()
def candidate(after, project) -> str:
    """A baseline run blessed to baseline.json, and a candidate run of the same matrix: its id."""
    base, bless, cand = after(("-n", "1", "--seed", "1"), ("baseline", "bless", "latest", "--out", "baseline.json"),
                              ("-n", "1", "--seed", "2"))
    assert base.exit_code in (0, 1) and cand.exit_code in (0, 1), (base.output, cand.output)
    assert bless.exit_code == 0, bless.output
    return re.search(r"run: (\S+)", cand.output).group(1)


def store_as_run_in_rounds(project: Path, run_id: str, sequential: object) -> None:
    """What a crafted file holds: the run's config says it ran in rounds, with these settings."""
    with duckdb.connect(str(project / "simrun.duckdb")) as db:
        db.execute("UPDATE runs SET config = json_merge_patch(config, ?::JSON) WHERE run_id = ?",
                   [json.dumps({"sequential": sequential}), run_id])


def run_apart(project: Path, *args: str) -> subprocess.CompletedProcess:
    """`simrun ARGS` in its own process, killed past PROMPTLY_S (TimeoutExpired fails the test)."""
    return subprocess.run([*cli_command(), *args], cwd=project, capture_output=True, text=True, timeout=PROMPTLY_S,
                          env={k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"})


def test_a_round_cap_of_a_trillion_ends_report_gate_and_dashboard_at_once_naming_the_run_and_field(
        project, candidate):
    store_as_run_in_rounds(project, candidate, {**SEQUENTIAL, "max_rounds": 10**12})
    # The dashboard gives the newest run its whole verdict against the baseline, as `simrun report` does.
    for args in (("report", candidate, "--baseline", "baseline.json"),
                 ("gate", "--sequential", "--candidate", candidate, "--baseline", "baseline.json"),
                 ("dashboard", "--baseline", "baseline.json")):
        done = run_apart(project, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        error = done.stderr.strip().splitlines()
        assert len(error) == 1 and error[0].startswith("error: "), done.stderr
        for said in ("simrun.duckdb", f"run {candidate}", "runs.config.sequential.max_rounds",
                     "less than or equal to 1000", "not written by simrun"):
            assert said in error[0], error[0]


@pytest.mark.parametrize("stored, field, says", [
    ({**SEQUENTIAL, "max_rounds": 1e12}, "max_rounds", "valid integer"),
    ({**SEQUENTIAL, "max_rounds": 20.0}, "max_rounds", "valid integer"),         # not what simrun wrote
    ({**SEQUENTIAL, "per_round": 0}, "per_round", "greater than or equal to 1"),
    ({**SEQUENTIAL, "beta": 0.9}, "beta", "less than 0.5"),
    ({**SEQUENTIAL, "exact": "yes"}, "exact", "valid boolean"),
    ({**SEQUENTIAL, "rounds_forever": True}, "rounds_forever", "unknown setting"),
    ("twenty rounds", "", "valid dictionary"),
])
def test_any_stored_sequential_setting_out_of_bounds_is_refused_as_budgets_toml_would_refuse_it(
        cli, project, candidate, stored, field, says):
    store_as_run_in_rounds(project, candidate, stored)
    where = "runs.config.sequential" + (f".{field}" if field else "")
    one_error_line(cli("gate", "--sequential", "--candidate", candidate, "--baseline", "baseline.json"),
                   f"run {candidate}", where, says)
    one_error_line(cli("report", candidate, "--baseline", "baseline.json"), f"run {candidate}", where, says)


def test_settings_simrun_kept_are_read_back_and_judge_the_run(cli, project, candidate):
    """The check refuses only what simrun never writes: the settings a run in rounds keeps judge it."""
    store_as_run_in_rounds(project, candidate, {**SEQUENTIAL, "max_rounds": 1})
    gated = cli("gate", "--sequential", "--candidate", candidate, "--baseline", "baseline.json")
    assert gated.exit_code in (0, 1, 3), gated.output
    assert re.search(r"sequential: \w+ after 1 of 1 rounds", gated.output), gated.output
