"""Answers kept per goal object: worked out once, and never another goal's, even a copy's."""

from __future__ import annotations

from simrun.scoring.dataset._per_goal import per_goal
from simrun.simulator._conversation import as_json_setup


def test_an_answer_is_worked_out_once_per_goal_and_a_changed_copy_gets_its_own(demo):
    goal = demo.goal("single-add-bag")
    calls = []

    def work(g):
        calls.append(g)
        return g.instructions

    assert per_goal(goal, "test: brief", work) == per_goal(goal, "test: brief", work) == goal.instructions
    assert len(calls) == 1
    changed = goal.model_copy(update={"instructions": "something else entirely"})
    assert per_goal(changed, "test: brief", work) == "something else entirely" and len(calls) == 2


def test_the_setup_sent_to_a_runtime_is_a_fresh_object_each_time(demo):
    goal = demo.goal("single-add-bag")
    first = as_json_setup(goal)
    first.clear()                      # a runtime that changes what it was sent changes nothing else
    assert as_json_setup(goal) and as_json_setup(goal) is not as_json_setup(goal)


def test_a_copy_with_other_steps_looks_its_own_steps_up(demo):
    goal = next(g for g in demo.goals if len(g.steps) >= 2)
    first = goal.step_by_id(goal.step_id(0))
    assert first is goal.steps[0]
    swapped = goal.model_copy(update={"steps": [goal.steps[1], goal.steps[0], *goal.steps[2:]]})
    # Step ids by position (step-1, ...) or their own: either way the copy answers from its own list.
    assert swapped.step_by_id(swapped.step_id(0)) is swapped.steps[0]
    assert goal.step_by_id(goal.step_id(0)) is first
