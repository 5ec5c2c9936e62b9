"""Findings, checks, rates and verdicts are the same for the same seeds as the code of 2026-12-04
decided them before simrun became one import package (issue 37): the four runs of the verdict
test (clean, a broken guarantee, a failed release criterion, a failed gate), made again with the
`simrun` command, against what tests/fixtures/stored_runs/before_library.json.gz stored."""

from __future__ import annotations

from tests.fixtures.stored_runs.capture import INTENDED, SCENARIOS, before_library, capture


def test_the_four_runs_decide_what_they_decided_before_the_move():
    before = before_library()
    now = capture()
    assert sorted(now) == sorted(before) == sorted(SCENARIOS)
    for name in SCENARIOS:
        assert set(INTENDED.get(name, {}).values()) <= set(now[name]["verdict"]), f"{name}: an intended change"
        for part in ("exit_code", "verdict", "conversations", "checks", "findings"):
            assert now[name][part] == before[name][part], f"{name}: {part} differs from before the move"

