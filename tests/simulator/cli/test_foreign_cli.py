"""An assistant with no protocol code, run with configuration only: simrun.toml names a function
and its tools; `simrun` runs the matrix, `simrun show` and the report say why each class that
could not be checked is UNVERIFIABLE, and `simrun check-runtime` names the rung it reaches."""

from __future__ import annotations

import re

from tests.conftest import ROOT

FOREIGN = ROOT / "tests" / "fixtures" / "foreign"
CONFIG = f"""
[run]
personas = "{FOREIGN / 'personas'}"
goals = "{FOREIGN / 'goals'}"
repetitions = 1
user = "scripted"

[runtime]
transport = "callable"
target = "tests.fixtures.foreign_agent:reply"

[runtime.tools.change_date]
record = "booking_id"

[runtime.tools.add_guests]
record = "booking:{{booking_id}}"     # a template: the goals' records are plain ids, so these are wrong

[runtime.tools.get_booking]
read_only = true
"""


def test_a_function_and_its_tools_in_simrun_toml_are_all_it_takes(project, run_cli, desk_env, monkeypatch):
    monkeypatch.setenv("FOREIGN_WRONG_RECORD", "0")
    (project / "simrun.toml").write_text(CONFIG)
    code, output = run_cli()
    assert "report:" in output, output
    code, listing = run_cli("show", "latest")
    assert re.search(r"plain-pat/move-booking/0\s+goal_reached\s+goal reached", listing), listing
    # add_guests writes "booking:B-2" by its template, where the goal's step names B-2.
    assert "wrote booking:B-2 while the turn addressed B-2" in listing
    code, one = run_cli("show", "latest", "plain-pat/move-booking/0")
    assert "UNVERIFIABLE audit_gap: the runtime keeps no audit stream" in one
    assert "UNVERIFIABLE phantom_receipt: the runtime gives no receipts as data" in one
    assert "UNVERIFIABLE wrong_record" not in one
    report = next((project / "reports").glob("r*.html")).read_text()
    assert "Why classes were UNVERIFIABLE" in report and "the runtime keeps no audit stream" in report
    code, checked = run_cli("check-runtime", "--goal", "move-booking")
    assert code == 0, checked
    assert "evidence: level 1 of 4 (tool events)" in checked
    assert "None" not in checked                # no name or version was given: none is printed
    assert re.search(r"traces: \d+ spans, [1-9]\d* tool calls kept as events", checked), checked
    assert "to reach level 2 (records): give the session's records: a state hook (runtime.state)" in checked
