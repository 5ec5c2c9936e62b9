"""A rate judged on a sample its outcome chose (issue 38, rule 2): a trace-based assistant whose
tool spans carry no arguments. A conversation with a write cannot be told (the write names no
record); one without provably missed its goal. The goal rate over the decided alone would read
near 0% and fail the floor; simrun shows the rate as its bounds, which hold the truth, and leaves
the floor not checked."""

from __future__ import annotations

import json
import re

from simrun.scoring.store._database import Store
from tests.simulator.cli.test_second_agent import CONFIG, simrun_apart


def test_goal_reached_is_shown_as_bounds_that_hold_the_truth_and_the_floor_is_not_checked(tmp_path):
    blind = CONFIG.replace("tests.fixtures.clinic_agent:", "tests.fixtures.clinic_agent_blind:")
    (tmp_path / "simrun.toml").write_text(blind)
    output = simrun_apart(tmp_path)
    with Store(tmp_path / "simrun.duckdb") as store:
        rows = store.con.execute("SELECT conversation_id, goal_reached, final_state FROM conversations").fetchall()
    # The truth, from the agent's own records: each goal's wanted change, made or not.
    truth = 0
    for cid, _, final in rows:
        appointments = json.loads(final)["records"]
        if "/move-visit/" in cid:
            truth += appointments["A-7"]["day"] == "2027-05-02"
        else:
            truth += len(appointments["A-9"]["notes"]) == 2
    undecided = sum(reached is None for _, reached, _ in rows)
    decided_reached = sum(reached is True for _, reached, _ in rows)
    assert undecided >= len(rows) // 2 and truth > decided_reached, (undecided, truth, output)
    low, high = decided_reached / len(rows), (decided_reached + undecided) / len(rows)
    assert low <= truth / len(rows) <= high
    # The headline leads with the bounds; the floor (the default 50%) lies between them: not checked.
    assert re.search(rf"goal reached: between {100 * low:.1f}% and {100 * high:.1f}% \({undecided} UNVERIFIABLE "
                     r"counted either way\)", output), output
    assert "release.min_goal_reached" not in "".join(line for line in output.splitlines()
                                                   if line.startswith("FAILED"))
    assert re.search(r"not checked: (release\.min_goal_reached: goal reached between|the floor on goal reached: "
                     r"no conversation could decide it)", output), output
    report = (tmp_path / re.search(r"report: (\S+)", output).group(1)).read_text()
    assert 'id="goal-bounds"' in report
