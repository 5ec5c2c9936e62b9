"""Plain `simrun` gives one verdict: its guarantees, its release criteria, and, with gate.baseline
in simrun.toml (a file, or git's REF:PATH), the gate against that baseline; a pull request that
adds a goal is gated on what it shares, with no flag and nothing blessed in it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import duckdb

BY_GOAL = 'target = "benchmarks.gate_demo:ByGoal"'


def with_baseline(project: Path, baseline: str) -> None:
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace("[runtime]", f'[gate]\nbaseline = "{baseline}"\n\n[runtime]', 1))


def broken_goal(project: Path, goal: str, cls: str = "dead_end") -> None:
    """The runtime breaks one goal outright: every conversation of `goal` has `cls`."""
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace('target = "simrun.examples.tripdesk:TripDesk"', BY_GOAL).replace(
        "[runtime.options]", f'[runtime.options]\nfaults = {{}}\ngoal = "{goal}"\ngoal_faults = {{{cls} = 1.0}}\n'
                             'fault_seed = 1'))


def blessed(cli, project: Path) -> str:
    base = cli("-n", "2", "--seed", "1")
    assert base.exit_code == 0, base.output
    run_id = re.search(r"run: (\S+)", base.output).group(1)
    (project / "baselines").mkdir()
    assert cli("baseline", "bless", run_id, "--out", "baselines/main.json").exit_code == 0
    return run_id


def verdict_lines(output: str) -> list[str]:
    return output[output.index("verdict: "):].splitlines()


def test_without_a_baseline_the_run_says_no_regression_was_checked_and_how_to_bless(cli):
    result = cli("-n", "1")
    assert result.exit_code == 0, result.output
    lines = verdict_lines(result.output)
    assert lines[0] == "verdict: PASSED (exit 0)"
    assert any(line.startswith("not checked: regressions: no baseline is set, so no regression was checked")
               and "simrun baseline bless" in line and "gate.baseline" in line for line in lines)


def test_plain_simrun_gates_against_gate_baseline_an_aa_run_passes_and_a_regression_fails(cli, project):
    base = blessed(cli, project)
    with_baseline(project, "baselines/main.json")
    same = cli("-n", "2", "--seed", "2")                 # A/A: only the seed differs
    assert same.exit_code == 0, same.output
    assert f"held: no regression against the baseline {base}" in same.output
    assert "no baseline is set" not in same.output
    broken_goal(project, "rename-trip")
    worse = cli("-n", "2", "--seed", "2")
    assert worse.exit_code == 1, worse.output
    reasons = [line for line in verdict_lines(worse.output) if line.startswith("FAILED: ")]
    assert reasons == [line for line in reasons if line.startswith(f"FAILED: gate against the baseline {base}")]
    assert "dead_end (over all cells, and in goal rename-trip)" in reasons[0]
    # The report says the same, first.
    html = (project / re.search(r"report: (\S+)", worse.output).group(1)).read_text()
    first = re.search(r"<body>\s*(<[^>]+>)", html).group(1)
    assert first == '<section id="verdict" class="failed" data-status="failed" data-exit="1">'
    assert reasons[0].removeprefix("FAILED: ") in html.split("</section>", 1)[0]
    # The report written again later knows the baseline from simrun.toml, and says the same verdict.
    again = cli("report", "latest")
    assert again.exit_code == 0 and f"FAILED: {reasons[0].removeprefix('FAILED: ')}" in again.output, again.output
    # The same run made in shards and merged is judged as the run unsharded: against gate.baseline too.
    for i in (0, 1):
        shard = cli("-n", "2", "--seed", "2", "--shard", f"{i}/2", "--db", f"shard{i}.duckdb")
        assert shard.exit_code in (0, 1), shard.output
    merged = cli("merge", "shard0.duckdb", "shard1.duckdb", "--out", "merged.duckdb")
    assert merged.exit_code == 1, merged.output
    assert [line for line in verdict_lines(merged.output) if line.startswith("FAILED: ")] == reasons


def test_a_pull_request_that_adds_a_goal_is_gated_on_what_it_shares(cli, project):
    blessed(cli, project)
    with_baseline(project, "baselines/main.json")
    text = (project / "goals" / "single-add-bag.yaml").read_text()
    (project / "goals" / "add-bag-again.yaml").write_text(text.replace("id: single-add-bag", "id: add-bag-again"))
    added = cli("-n", "2", "--seed", "2")
    assert added.exit_code == 0, added.output
    assert "compared on 70 of 77 cells" in added.output
    assert "new, not gated against the baseline: goal add-bag-again (added, 7 cells): goal reached 100.0% (14/14)" \
        in added.output
    assert "not checked: the gate, in goal add-bag-again (added, 7 cells)" in added.output
    # The same pull request, with the runtime now breaking a goal both runs share: it fails, naming it.
    broken_goal(project, "cancel-trip")
    worse = cli("-n", "2", "--seed", "2")
    assert worse.exit_code == 1, worse.output
    assert "dead_end rose in goal cancel-trip: 0/14 → 14/14" in worse.output
    assert re.search(r"FAILED: gate against the baseline \S+ \(baselines/main.json\), on 70 cells: regressions: "
                     r"dead_end \(over all cells, and in goal cancel-trip", worse.output), worse.output


def test_gate_baseline_may_name_a_blob_git_holds_and_a_bad_one_is_refused_before_anything_runs(cli, project):
    blessed(cli, project)
    git = shutil.which("git")
    for args in (["init", "-q"], ["add", "baselines/main.json"],
                 ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "baseline"]):
        subprocess.run([git, *args], cwd=project, check=True)
    (project / "baselines" / "main.json").write_text("the pull request's own, never read\n")
    with_baseline(project, "HEAD:baselines/main.json")
    result = cli("-n", "1", "--seed", "2")
    assert result.exit_code == 0, result.output
    assert "held: no regression against the baseline" in result.output
    assert "HEAD:baselines/main.json (git)" in result.output

    runs = duckdb.connect(str(project / "simrun.duckdb"), read_only=True).execute(
        "SELECT count(*) FROM runs").fetchone()
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace('baseline = "HEAD:baselines/main.json"', 'baseline = "missing.json"'))
    refused = cli("-n", "1")
    assert refused.exit_code == 2 and len(refused.output.strip().splitlines()) == 1, refused.output
    assert "simrun.toml (gate.baseline)" in refused.output and "missing.json: no such baseline file" in refused.output
    con = duckdb.connect(str(project / "simrun.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchone() == runs     # refused before any run row


def test_a_run_is_judged_again_later_by_the_criteria_it_ran_with_unless_told_otherwise(cli, project):
    """`simrun --budgets lenient.toml` passes a run that ./budgets.toml would fail: the report
    written again later, the dashboard and `simrun gate` give the verdict it exited with, unless
    --budgets names other criteria."""
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace('# faults = "loop=0.2,phantom_receipt=0.1"', 'faults = "dead_end=0.4"'))
    lenient = project / "lenient.toml"
    lenient.write_text((project / "budgets.toml").read_text().replace("[release]", "[release]\nprogress_ceiling = 0.9"))
    ran = cli("-n", "1", "--budgets", "lenient.toml")
    assert ran.exit_code == 0 and "verdict: PASSED (exit 0)" in ran.output, ran.output
    again = cli("report", "latest")
    assert again.exit_code == 0 and "verdict of run" in again.output and ": PASSED: " in again.output, again.output
    html = (project / "reports" / "index.html").read_text()
    assert re.search(r'class="run-verdict" data-status="passed"', html)
    dashboard = cli("dashboard")
    assert dashboard.exit_code == 0 and 'data-status="passed"' in (project / "reports" / "index.html").read_text()
    told = cli("report", "latest", "--budgets", "budgets.toml")
    assert ": FAILED: release.max_rate.dead_end" in told.output, told.output
    assert 'data-status="failed"' in (project / "reports" / "index.html").read_text()


def test_a_run_cut_short_with_nothing_failed_is_incomplete_never_a_pass_and_its_page_opens_on_it(cli, project):
    """A run is complete, or its verdict says it is not: cut short (its budget, an interruption),
    what it never ran could have failed, so it is `incomplete`, exit 4, its first reason what it
    never ran; the same run finished is judged whole."""
    done = cli("-n", "1")
    assert done.exit_code == 0, done.output
    run_id = re.search(r"run: (\S+)", done.output).group(1)
    con = duckdb.connect(str(project / "simrun.duckdb"))
    con.execute("UPDATE runs SET status = 'budget_spent', conversations_planned = 140 WHERE run_id = ?", [run_id])
    con.close()
    again = cli("report", run_id)
    assert again.exit_code == 0, again.output
    assert "INCOMPLETE: 70 of the 140 conversations planned were never run (the budget ran out)" in again.output
    html = (project / "reports" / f"{run_id}.html").read_text()
    first = re.search(r"<body>\s*(<[^>]+>)", html).group(1)
    assert first == '<section id="verdict" class="incomplete" data-status="incomplete" data-exit="4">'
    con = duckdb.connect(str(project / "simrun.duckdb"))
    con.execute("UPDATE runs SET status = 'finished', conversations_planned = 70 WHERE run_id = ?", [run_id])
    con.close()
    assert "PASSED" in cli("report", run_id).output
