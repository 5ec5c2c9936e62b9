"""A goal that names what the runtime never held is the goal file's problem: `validate --runtime`
names it before anything is spent, and a run's verdict says so (exit 2), not "goal not reached"."""

from __future__ import annotations

import re

BAG = ("goal rename-trip: no record of type trip ever had field `bag` (did you mean `bags`?); fields seen: bags, "
       "destination, name, segments, status, traveler, type")
CANCEL = ("goal cancel-trip: no event, offer or ask ever had operation `cancel` (did you mean `cancel_trip`?); "
          "operations seen: add_bag, cancel_trip, confirm_cancel_trip, confirm_rebook, name_trip, open_trip, rebook, "
          "remove_bag")


def test_goal_names_the_runtime_never_held_are_named_before_and_after_a_run(cli, project):
    rename, cancel = project / "goals" / "rename-trip.yaml", project / "goals" / "cancel-trip.yaml"
    rename.write_text(rename.read_text().replace("match: {name: Lisbon offsite}",
                                                 "match: {name: Lisbon offsite, bag: 1}"))
    cancel.write_text(cancel.read_text().replace("operation = 'cancel_trip'", "operation = 'cancel'"))

    assert cli("validate").exit_code == 0            # the files are well formed: only the runtime can tell
    checked = cli("validate", "--runtime")
    assert checked.exit_code == 2, checked.output
    assert f"goal file: {CANCEL}" in checked.output and f"goal file: {BAG}" in checked.output
    assert "10 conversations with the scripted user, nothing spent" in checked.output
    assert not (project / "simrun.duckdb").exists()      # nothing of it is kept

    run = cli("-n", "1")
    assert run.exit_code == 2, run.output
    assert "verdict: NOT JUDGED (exit 2)" in run.output
    assert f"NOT JUDGED: a problem in the goal files, not the runtime's: {BAG}" in run.output
    assert f"NOT JUDGED: a problem in the goal files, not the runtime's: {CANCEL}" in run.output
    report = (project / re.search(r"report: (\S+)", run.output).group(1)).read_text()
    assert "a problem in the goal files, not the runtime&#39;s: goal rename-trip: no record of type trip" in report

    rename.write_text(rename.read_text().replace(", bag: 1}", "}"))
    cancel.write_text(cancel.read_text().replace("'cancel'", "'cancel_trip'"))
    fixed = cli("validate", "--runtime")
    assert fixed.exit_code == 0 and "goals ok against the runtime" in fixed.output
