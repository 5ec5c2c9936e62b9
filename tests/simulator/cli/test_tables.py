"""`runs` and `plan` fit 100 columns, whatever the ids in them: no cell cut, none wrapped."""

from __future__ import annotations

import pytest

from simrun.cli._tables import WIDTH, fit, tokens

LONG = "openai:gpt-4.1-mini-2025-04-14-eu-west-deployment"


def test_a_first_cell_too_long_for_its_column_gets_its_own_line():
    header, rows = fit(["backend", "calls", "cost"], [["scripted", "0", "$0.00"], [LONG * 2, "152", "$0.0518"]],
                       right={1, 2}, width=40)
    assert header.startswith("backend") and len(header) <= 40
    assert rows[0].startswith("scripted ") and rows[0].endswith("  0    $0.00") and "\n" not in rows[0]
    long_name, numbers = rows[1].split("\n")
    assert long_name == LONG * 2 and numbers.endswith("152  $0.0518") and len(numbers) <= 40


@pytest.mark.parametrize("count, shown", [(0, "0"), (950, "950"), (23_460, "23.5k"), (999_949, "999.9k"),
                                          (999_950, "1.0M"), (12_345_678, "12.3M")])
def test_token_counts_take_at_most_six_characters(count, shown):
    assert tokens(count) == shown


def lines_of(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def test_runs_and_plan_fit_100_columns_with_long_ids(cli, project, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    budgets = project / "budgets.toml"
    budgets.write_text(budgets.read_text() + f'\n[prices."{LONG}"]\ninput_per_mtok = 0.4\noutput_per_mtok = 1.6\n')
    labels = ["release-2026.12-candidate-with-a-long-name", "feature/a-very-long-branch-name-for-labels"]
    assert cli("-n", "1", "--label", labels[0], "--label", labels[1]).exit_code == 0

    listing = lines_of(cli("runs").output)
    assert listing[0].split() == ["run", "status", "convs", "goal", "reached", "spent", "dataset"]
    assert all(len(line) <= WIDTH for line in listing), listing
    assert "finished" in listing[1] and "100.0%" in listing[1]
    identity = " ".join(line.strip() for line in listing[2:])
    assert f"labels {labels[0]}, {labels[1]} · runtime" in identity and "user scripted" in identity

    plan = cli("plan", "-n", "1", "--user", LONG)
    assert plan.exit_code == 0, plan.output
    table = lines_of(plan.output)[1:5]
    assert table[0].split()[:3] == ["backend", "calls", "input"]
    assert table[2] == LONG and table[3].split()[0].isdigit()      # the name whole, on a line of its own
    assert all(len(line) <= WIDTH for line in table) and "…" not in plan.output
