"""`simrun --sequential`: the candidate runs in rounds against gate.baseline and stops at the first
decision; the store holds one run, continued round by round; undecided at the cap exits 3, and
`simrun gate --sequential`, the report and the Markdown say the same."""

from __future__ import annotations

import re

import duckdb

from tests.simulator.cli.test_verdict_cli import broken_goal, verdict_lines, with_baseline


def rounds(project, max_rounds: int) -> None:
    budgets = project / "budgets.toml"
    text = budgets.read_text()
    assert "max_rounds = 20 " in text
    budgets.write_text(text.replace("permutations = 10000", "permutations = 2000")
                       .replace("max_rounds = 20 ", f"max_rounds = {max_rounds} ")
                       .replace("[release]", "[release]\nprogress_ceiling = 1.0", 1))


def test_rounds_continue_one_run_undecided_is_inconclusive_and_a_broken_goal_fails_at_once(cli, project):
    toml = project / "simrun.toml"          # rates that vary: two rounds cannot rule out 1 point
    toml.write_text(toml.read_text().replace("[runtime.options]",
                                             '[runtime.options]\nfaults = "dead_end=0.2,loop=0.3"'))
    rounds(project, 2)
    # At beta 0.10 two rounds can rule out 5 points for a class that fired nowhere (0 of 70 has
    # chance 3% at a 5% rate), so the undecided case asks about 1 point.
    budgets = project / "budgets.toml"
    assert "min_effect = 0.05 " in budgets.read_text()
    budgets.write_text(budgets.read_text().replace("min_effect = 0.05 ", "min_effect = 0.01 "))
    base = cli("-n", "1", "--seed", "1")
    assert base.exit_code == 0, base.output
    base = re.search(r"run: (\S+)", base.output).group(1)
    (project / "baselines").mkdir()
    assert cli("baseline", "bless", base, "--out", "baselines/main.json").exit_code == 0
    with_baseline(project, "baselines/main.json")
    same = cli("--sequential", "--seed", "2")
    assert same.exit_code == 3, same.output
    assert "round 1/2: 70 candidate conversations" in same.output and "round 2/2: 140 " in same.output
    lines = verdict_lines(same.output)
    assert lines[0] == "verdict: INCONCLUSIVE (exit 3)"
    assert lines[1].startswith("INCONCLUSIVE: sequential: inconclusive after 2 of 2 rounds, "
                               "140 candidate conversations")
    run_id = re.search(r"run: (\S+)", same.output).group(1)
    with duckdb.connect(str(project / "simrun.duckdb"), read_only=True) as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 2      # the baseline's, and this one
        assert db.execute("SELECT count(*) FROM conversations WHERE run_id = ?", [run_id]).fetchone()[0] == 140
    html = (project / re.search(r"report: (\S+)", same.output).group(1)).read_text()
    assert 'data-status="inconclusive" data-exit="3"' in html
    assert '<table id="rounds-table">' in html and '<td class="num">2 / 2</td><td class="num">140</td>' in html
    assert '<table id="confidence-sequences">' in html
    # The dashboard judges the run against the baseline with the same sequential gate.
    dashboard = (project / "reports" / "index.html").read_text()
    assert "– inconclusive: sequential: inconclusive after 2 of 2 rounds" in dashboard
    gated = cli("gate", "--sequential", "--candidate", run_id, "--markdown", "gate.md")
    assert gated.exit_code == 3, gated.output
    assert verdict_lines(gated.output)[:2] == lines[:2]
    markdown = (project / "gate.md").read_text()
    assert "### Sequential gate: inconclusive after 2 of 2 rounds" in markdown and "| 2 | 140 |" in markdown
    # Without --sequential the same stored run is judged by the fixed gate: a pass, exit 0.
    assert cli("gate", "--candidate", run_id).exit_code == 0

    toml.write_text(toml.read_text().replace('faults = "dead_end=0.2,loop=0.3"\n', ""))
    broken_goal(project, "rename-trip")
    worse = cli("--sequential", "--seed", "3")
    assert worse.exit_code == 1, worse.output
    reason = [line for line in verdict_lines(worse.output) if line.startswith("FAILED: ")][0]
    assert reason.startswith(f"FAILED: gate against the baseline {base}") and "goal rename-trip" in reason
    assert re.search(r"sequential: failed after [12] of 2 rounds, (70|140) candidate conversations", reason)


def test_sequential_needs_a_baseline_and_takes_no_repetitions(cli):
    alone = cli("--sequential")
    assert alone.exit_code == 2 and "--sequential" in alone.output and "gate.baseline" in alone.output
    both = cli("--sequential", "-n", "3")
    assert both.exit_code == 2 and "--repetitions" in both.output
