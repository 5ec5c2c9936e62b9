"""`simrun check-runtime` in the words of the assistant's transport (issue 40): a function has
hooks, not routes that answer 404; its state is built by simrun, from what it gives; goal reached
needs only what the project's goals read; what the trace receiver saw is told per convention."""

from __future__ import annotations

import asyncio

from simrun.scoring.dataset._models import Goal
from simrun.simulator._conformance import Conformance, check_runtime, goal_reads
from simrun.simulator.adapters import CallableRuntime


def reply(messages, session):
    return "What is the RX number?"


def records(session):
    return {"RX-1": {"type": "prescription"}}


def goal(**success) -> Goal:
    return Goal.model_validate({"id": "g", "title": "t", "instructions": "Do it.", "success": success,
                                "steps": [{"record": "RX-1", "operation": "refill", "say": ["Refill RX-1."]}]})


EVENTS_ONLY = goal(sql=["SELECT count(*) > 0 FROM events WHERE operation = 'refill'"])
RECORDS = goal(records=[{"id": "RX-1", "match": {"type": "prescription"}}])


def test_a_function_is_told_of_its_hooks_never_of_404s():
    report = asyncio.run(check_runtime(CallableRuntime(f"{__name__}:reply", traces=True, trace_wait_s=0,
                                                       state=f"{__name__}:records"), EVENTS_ONLY, [EVENTS_ONLY]))
    assert report.operations["audit"] == "not given: a callable assistant keeps no audit log simrun can read"
    assert report.operations["state"] == ("built by simrun from its tool spans (events unknown: their spans were "
                                          "not read) and the state hook (runtime.state)")
    assert not any("404" in said for said in report.operations.values())
    bare = asyncio.run(check_runtime(CallableRuntime(f"{__name__}:reply"), EVENTS_ONLY))
    assert bare.operations["state"].startswith("not given: no traces and no state hook")
    assert bare.receipts_line() is not None and "tool call ids of the writes a reply claims" in bare.receipts_line()


def test_goal_reached_needs_only_what_the_projects_goals_read():
    assert goal_reads([EVENTS_ONLY]) == {"events"} and goal_reads([RECORDS]) == {"records"}
    report = Conformance("callable:x", foreign=True, goal_reads={"events"})
    report.operations["audit"] = "not given"
    assert report.unverifiable()["goal_reached"] == ["events"]        # no turns: nothing given
    report = Conformance("callable:x", foreign=True)
    assert report.unverifiable()["goal_reached"] == ["events", "records"]     # goals unknown: both


def test_what_the_receiver_saw_is_told_per_convention_with_what_was_unread():
    report = Conformance("callable:x", foreign=True, tools=("move_pickup",),
                         reads=(("OpenInference", "on by default"), ("OpenTelemetry GenAI", "an env var")),
                         traces={"spans": 9, "tool_events": 0, "reads": 0, "orphans": 0, "bad": 0, "dropped": 0,
                                 "repeats": 0, "unnamed": 2, "unread": 4, "unread_as": ["attributes pharmacy.*"],
                                 "conventions": {"OpenInference": {"spans": 5, "tool_calls": 0}}})
    lines = [line for line, _ in report.trace_lines()]
    assert "traces: OpenInference: 5 spans, 0 tool calls read" in lines
    assert any(line.startswith("traces: no tool call was read from the OpenInference spans, while [runtime.tools] "
                               "names move_pickup") for line in lines)
    assert any(line.startswith("traces: 4 spans of no convention simrun reads (attributes pharmacy.*)")
               and "simrun reads tool spans of OpenInference, OpenTelemetry GenAI" in line for line in lines)
    assert any("content capture (OpenInference: on by default;" in line for line in lines)
