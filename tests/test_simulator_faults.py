"""simulator_error: a simulated user that breaks its brief is caught by code, ends the
conversation at once, and is kept out of the runtime's rates (never counted as a pass)."""

from __future__ import annotations

import pytest

from simrun._transcript import NOT_THE_RUNTIME
from simrun.simulator.users._scripted import SIMULATOR_FAULTS
from tests.conftest import run_demo

RATE = 0.3


@pytest.mark.parametrize("fault", SIMULATOR_FAULTS)
def test_simulator_fault_is_caught_and_kept_apart(demo, clean_run, fault):
    run = run_demo(demo, user_faults={fault: RATE})
    planted = set(run.user.planted.get(fault, []))
    assert len(planted) >= 10, f"{fault} was planted only {len(planted)} times"
    if fault == "contradict_facts":
        # A contradiction counts only where the user had a later message to correct it in.
        planted = {run.key(c) for c in run.conversations if run.key(c) in planted
                   and c.transcript.turns[-1].user.meta.get("fault") != fault}
    caught = {run.key(c) for c in run.conversations if c.scorecard.end == "simulator_error"}
    assert caught == planted
    assert run.fired("simulator_error") == planted
    for c in run.conversations:
        if run.key(c) in planted:
            assert not c.scorecard.counts_for_runtime
            assert c.scorecard.goal_reached is not True or fault in ("contradict_facts",)
        else:
            clean = next(b.transcript for b in clean_run.conversations if b.cell.id == c.cell.id)
            assert _exchanges(c.transcript) == _exchanges(clean)
    # No runtime class fires because the user misbehaved.
    for cls in ("dead_end", "loop", "refused_offer", "not_understood", "unanswered", "wrong_record",
                "stale_click", "phantom_receipt", "card_not_actionable", "refusal_with_hedge",
                "audit_gap", "integrity_leak"):
        assert run.fired(cls) == set(), cls


def test_simulator_error_is_not_the_runtimes():
    assert "simulator_error" in NOT_THE_RUNTIME


def _exchanges(transcript):
    return [(t.user, t.result, t.state) for t in transcript.turns], transcript.end
