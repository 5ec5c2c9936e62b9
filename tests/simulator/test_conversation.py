"""The conversation loop: every end reason, failures kept as data, and missing evidence never a pass."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect

import pytest

from simrun._errors import RuntimeFault, RuntimeUnavailable
from simrun.examples.libdesk import LibDesk
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.checks._scorer import ALL_CLASSES, score
from simrun.simulator._conversation import Cell, as_json_setup, converse
from simrun.simulator._runner import matrix
from simrun.simulator.adapters._python import PythonRuntime, load_target
from simrun.simulator.users._scripted import ScriptedUser
from tests.fixtures.minimal_runtime import OnlyReplies


def talk(demo, persona: str, goal: str, runtime, seed: int = 5, **goal_changes):
    g = demo.goal(goal).model_copy(update=goal_changes)
    return asyncio.run(converse(Cell(demo.persona(persona), g, 0, seed), ScriptedUser(), PythonRuntime(runtime)))


class Broken(OnlyReplies):
    def __init__(self, reply):
        self.reply = reply

    def turn(self, session, request):
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def test_goal_reached_ends_at_once(demo):
    c = talk(demo, "plain-paula", "single-add-bag", TripDesk())
    assert c.transcript.end == "goal_reached" and len(c.transcript.turns) == 1


def test_turn_cap(demo):
    c = talk(demo, "plain-paula", "new-trip-full", TripDesk(), max_turns=2)
    assert c.transcript.end == "turn_cap" and len(c.transcript.turns) == 2
    assert c.scorecard.goal_reached is False


def test_user_stops_when_stuck(demo):
    c = talk(demo, "plain-paula", "new-trip-full", OnlyReplies())
    assert c.transcript.end == "user_stopped" and c.transcript.stop.stop_reason == "gave_up"


def test_a_minimal_runtime_is_unverifiable_never_passed(demo):
    c = talk(demo, "plain-paula", "single-add-bag", OnlyReplies())
    assert c.scorecard.goal_reached is None and c.scorecard.goal_detail.startswith("UNVERIFIABLE")
    statuses = {cls: c.scorecard.checks[cls].status for cls in ALL_CLASSES}
    # A reply ending on "." with no ask/offers/card fields: dead_end cannot be decided either.
    for cls in ("dead_end", "not_understood", "wrong_record", "phantom_receipt", "card_not_actionable",
                "refusal_with_hedge", "audit_gap"):
        assert statuses[cls] == "unverifiable", cls
    assert "clean" not in {statuses[c] for c in ("phantom_receipt", "audit_gap")}


@pytest.mark.parametrize("reply, kind", [
    (RuntimeError("boom"), "crash"), ({"text": "hi"}, "missing_reply"), ("just a string", "malformed"),
    ({"reply": 42}, "missing_reply"), ({"reply": "ok", "when": object()}, "malformed"),
])
def test_runtime_failures_are_recorded_with_evidence(demo, reply, kind):
    c = talk(demo, "plain-paula", "single-add-bag", Broken(reply))
    assert c.transcript.end == "runtime_error" and c.scorecard.end == "runtime_error"
    assert c.transcript.error["kind"] == kind and c.transcript.error["turn"] == 1
    assert c.transcript.error.get("traceback" if kind == "crash" else "body")
    assert c.scorecard.goal_reached is not True


def test_the_reference_runtime_speaks_protocol_one():
    assert asyncio.run(PythonRuntime(TripDesk()).health())["protocol"] == 1


def test_a_runtime_of_another_protocol_is_refused():
    class Future(OnlyReplies):
        def health(self):
            return {"protocol": 2}

    with pytest.raises(RuntimeUnavailable, match="protocol 2.*protocol 1"):
        asyncio.run(PythonRuntime(Future()).health())


def test_bad_targets_say_what_is_wrong(tmp_path):
    with pytest.raises(RuntimeUnavailable, match="module:Class"):
        load_target("tripdesk")
    with pytest.raises(RuntimeUnavailable, match="cannot import"):
        load_target("no_such_module:X")
    with pytest.raises(RuntimeUnavailable, match="has no Nope"):
        load_target("simrun.examples.tripdesk:Nope")
    with pytest.raises(RuntimeUnavailable, match="bad runtime options"):
        load_target("simrun.examples.tripdesk:TripDesk", {"colour": "red"})
    path = tmp_path / "mine.py"
    path.write_text("class R:\n    def __init__(self, x=1):\n        self.x = x\n")
    assert load_target(f"{path}:R", {"x": 3}).x == 3


def test_a_failing_simulator_is_recorded_as_its_own_fault(demo):
    class Crashing(ScriptedUser):
        """The scripted user (the rest of the contract), as its own session, crashing on its second turn."""

        name = "crashing"
        calls = ()

        def session(self, *args):
            return self

        async def next_turn(self, turns):
            if turns:
                raise KeyError("lost my place")
            return await ScriptedUser().session(demo.persona("plain-paula"), demo.goal("new-trip-full"), 5, 0) \
                .next_turn(turns)

    c = asyncio.run(converse(Cell(demo.persona("plain-paula"), demo.goal("new-trip-full"), 0, 5), Crashing(),
                             PythonRuntime(TripDesk())))
    assert c.transcript.end == "simulator_error" and c.transcript.error["kind"] == "simulator_crash"
    assert "lost my place" in c.transcript.error["message"] and c.transcript.error["traceback"]
    assert c.scorecard.checks["simulator_error"].status == "fired"
    assert not c.scorecard.counts_for_runtime


class CrashesOnSecondTurn(TripDesk):
    """TripDesk, except that its second turn raises (after logging nothing for it)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = 0

    def turn(self, session, request):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("lost the plot")
        return super().turn(session, request)


def test_after_a_runtime_error_the_store_and_audit_are_still_read(demo):
    c = talk(demo, "plain-paula", "new-trip-full", CrashesOnSecondTurn())
    t = c.transcript
    assert t.end == "runtime_error" and t.error["turn"] == 2
    assert t.error["read_after"] == "the store, the audit stream"
    assert [e["turn"] for e in t.audit] == [1]
    assert "trip:T-1" in t.final_state["records"]
    assert c.scorecard.checks["audit_gap"].status == "clean"
    assert t.session_id == "s-1"


def test_an_audit_gap_before_a_runtime_error_is_found(demo):
    class GapThenCrash(CrashesOnSecondTurn):
        def audit(self, session):
            return {"turns": []}

    c = talk(demo, "plain-paula", "new-trip-full", GapThenCrash())
    assert c.transcript.end == "runtime_error"
    assert [f.turn for f in c.scorecard.checks["audit_gap"].findings] == [1]


def test_when_the_runtime_is_gone_after_an_error_the_audit_stays_unverifiable(demo):
    class GoneAfterCrash(CrashesOnSecondTurn):
        def audit(self, session):
            if self.calls >= 2:
                raise ConnectionError("nobody home")
            return super().audit(session)

    c = talk(demo, "plain-paula", "new-trip-full", GoneAfterCrash())
    assert c.transcript.end == "runtime_error" and c.transcript.audit is None
    assert c.transcript.error["read_after"].startswith("the store, then it failed again")
    assert c.scorecard.checks["audit_gap"].status == "unverifiable"


class Counted:
    """A runtime, with the calls made to each of its methods counted."""

    def __init__(self, runtime) -> None:
        self.runtime, self.calls = runtime, {}

    def __getattr__(self, name):
        method = getattr(self.runtime, name)

        def counted(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return method(*args)
        return counted


@pytest.mark.parametrize("desk", [TripDesk, LibDesk])
def test_the_store_sent_with_each_turn_gives_the_run_of_a_runtime_that_is_asked_for_it(demo, library, desk):
    """A reference runtime sends the store with its start reply and each turn (protocol 1's
    optional `state`): one request a turn, not two, none for the first store, and the same seeds
    give the same transcripts, turn results (less the snapshot), stores and findings as with a
    runtime that sends none and is asked."""
    dataset = demo if desk is TripDesk else library
    faults = {"loop": 0.2, "phantom_receipt": 0.2, "crash": 0.1} if desk is TripDesk else \
        {"loop": 0.2, "wrong_record": 0.2, "crash": 0.1}
    runs = {}
    for snapshot in (True, False):
        runtime = Counted(desk(faults=faults, fault_seed=3, snapshot=snapshot))
        user, adapter = ScriptedUser(), PythonRuntime(runtime)

        async def go(user=user, adapter=adapter):
            return [await converse(cell, user, adapter) for cell in matrix(dataset, 1, 1)]
        runs[snapshot] = (asyncio.run(go()), runtime.calls)
    (sent, sent_calls), (asked, asked_calls) = runs[True], runs[False]
    assert [untimed(c.transcript) for c in sent] == [untimed(c.transcript) for c in asked]
    assert [c.scorecard for c in sent] == [c.scorecard for c in asked]
    assert any(c.scorecard.findings for c in sent)            # faults planted and found: not an empty compare
    assert all("state" not in (t.result or {}) for c in sent for t in c.transcript.turns)
    answered = sum(t.result is not None for c in sent for t in c.transcript.turns)
    crashed = sum(c.transcript.end == "runtime_error" for c in sent)
    assert crashed and answered
    # Asked for only after a crash: never at the start (the start reply carried it), nor after a turn answered.
    assert sent_calls["state"] == crashed
    assert asked_calls["state"] == asked_calls["start"] + crashed + answered
    assert sent_calls["turn"] == asked_calls["turn"] and sent_calls["start"] == asked_calls["start"]


def untimed(transcript):
    """A transcript less what differs from one run to the next: the timings, and a crash's
    traceback (which quotes the runtime's own lines)."""
    error = transcript.error and {k: v for k, v in transcript.error.items() if k not in ("traceback", "elapsed_ms")}
    return dataclasses.replace(transcript, error=error, turns=tuple(dataclasses.replace(t, latency_ms=None)
                                                                    for t in transcript.turns))


class SendsNull(TripDesk):
    def start(self, request):
        return {**super().start(request), "state": None}

    def turn(self, session, request):
        return {**super().turn(session, request), "state": None}


def test_a_snapshot_of_null_is_no_snapshot_and_the_store_is_asked_for(demo):
    runtime = Counted(SendsNull())
    c = talk(demo, "plain-paula", "single-add-bag", runtime)
    assert c.transcript.end == "goal_reached" and runtime.calls["state"] == 2
    assert "state" not in c.transcript.turns[0].result


class StartsWithABadStore(TripDesk):
    def start(self, request):
        return {**super().start(request), "state": {"records": [], "events": "none"}}


def test_a_start_reply_whose_store_is_malformed_ends_its_conversation_as_runtime_error(demo):
    """The store sent with the start reply is read like the reply itself: checked against
    protocol 1's store shape, and a bad one is the runtime's fault, not the run's."""
    c = talk(demo, "plain-paula", "single-add-bag", Counted(StartsWithABadStore()))
    assert c.transcript.end == "runtime_error" and c.transcript.error["kind"] == "malformed"
    assert "start reply" in c.transcript.error["message"] and not c.transcript.turns


def test_the_store_sent_with_the_start_reply_is_the_first_store(demo):
    runtime = Counted(TripDesk())
    c = talk(demo, "plain-paula", "single-add-bag", runtime)
    assert "state" not in runtime.calls and c.transcript.end == "goal_reached"
    fresh = TripDesk(snapshot=False)
    sid = fresh.start({"setup": as_json_setup(demo.goal("single-add-bag"))})["session"]
    assert c.transcript.initial_state == fresh.state(sid)


class GoneAtTheAudit(PythonRuntime):
    """A runtime that answers every turn, then hangs when its audit stream is asked for."""

    async def audit(self, session):
        raise RuntimeFault("timeout", "no answer within 30 s")


def test_the_loop_scores_as_a_rescore_does_even_when_the_end_changed_after_its_last_goal_check(demo):
    """The judge decides the goal from the transcript it is given, never from the loop's answer of
    an earlier moment. Here the conversation's end changes after the loop's last goal check (the
    runtime hangs at the audit), while the store stays the very same object: the goal's reason
    must say the runtime was gone, as rescoring the stored transcript says it."""
    c = asyncio.run(converse(Cell(demo.persona("plain-paula"),
                                  demo.goal("open-and-ask-date").model_copy(update={"max_turns": 1}), 0, 5),
                             ScriptedUser(), GoneAtTheAudit(TripDesk())))
    assert c.transcript.end == "runtime_error" and c.transcript.error["kind"] == "timeout"
    assert c.transcript.final_state is c.transcript.turns[-1].state     # the store the loop last checked
    rescored = score(c.transcript, c.cell.goal, c.cell.persona)
    assert c.scorecard == rescored
    assert c.scorecard.goal_reached is False and "it was never asked: the runtime was gone" in c.scorecard.goal_detail


def test_the_judge_takes_nothing_of_the_loop():
    """`score` is the judge's: the transcript, the goal, the persona; none of the loop's answers
    (its goal checks, its user-turn checks) passed through it."""
    assert list(inspect.signature(score).parameters) == ["transcript", "goal", "persona"]
