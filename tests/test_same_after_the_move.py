"""Findings, checks, rates and verdicts are the same for the same seeds as the code of 2026-12-04
decided them before simrun became one import package (issue 37): the four runs of the verdict
test (clean, a broken guarantee, a failed release criterion, a failed gate), made again with the
`simrun` command, against what tests/fixtures/stored_runs/before_library.json.gz stored."""

from __future__ import annotations

import gzip
import json

from tests.fixtures.stored_runs.capture import HERE, SCENARIOS, capture

BEFORE = HERE / "before_library.json.gz"
# Words changed on purpose since the move, each by a rule of its own: issue 38 (a verdict never
# claims more than was checked) says that wrong_record, UNVERIFIABLE in 3 conversations, held only
# in the 137 that decided it. Nothing else of the four runs may change.
INTENDED = {"failed_release": {
    "held: every guarantee held (140 conversations)":
        "held: the guarantees held where they were decided: stale_click, phantom_receipt, card_not_actionable, "
        "refusal_with_hedge, audit_gap, integrity_leak in all 140 conversations; wrong_record in the 137 of 140 "
        "that decided it",
    "not checked: UNVERIFIABLE (the runtime did not give the evidence): wrong_record in 3 of 140 conversations":
        "not checked: UNVERIFIABLE (the evidence was missing, or no turn completed): wrong_record in 3 of 140 "
        "conversations",
}}


def test_the_four_runs_decide_what_they_decided_before_the_move():
    before = json.loads(gzip.decompress(BEFORE.read_bytes()))
    now = capture()
    assert sorted(now) == sorted(before) == sorted(SCENARIOS)
    for name in SCENARIOS:
        changed = INTENDED.get(name, {})
        before[name]["verdict"] = [changed.get(line, line) for line in before[name]["verdict"]]
        assert set(changed.values()) <= set(now[name]["verdict"]), f"{name}: an intended change did not happen"
        for part in ("exit_code", "verdict", "conversations", "checks", "findings"):
            assert now[name][part] == before[name][part], f"{name}: {part} differs from before the move"

