"""Answers kept per goal value: worked out once, and never another goal's, even a copy's."""

from __future__ import annotations

from simrun.scoring.dataset import Goal, _per_goal
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
    # The step itself, or the same step of another load of the same goal (kept by value: equal).
    assert first == goal.steps[0] != goal.steps[1]
    swapped = goal.model_copy(update={"steps": [goal.steps[1], goal.steps[0], *goal.steps[2:]]})
    # Step ids by position (step-1, ...) or their own: either way the copy answers from its own list.
    assert swapped.step_by_id(swapped.step_id(0)) == swapped.steps[0] == goal.steps[1]
    assert goal.step_by_id(goal.step_id(0)) == first


def test_an_answer_is_kept_by_the_goals_value_not_its_object(demo, tmp_path):
    """Two loads of one goal file are one goal: the second load is not worked out again, and its
    answer is the first's. Nothing is keyed on an object's identity, which is reused once the
    object is collected."""
    goal = demo.goal("single-add-bag")
    again = Goal.model_validate(goal.model_dump())       # another object, the same value
    assert again is not goal and again == goal
    calls = []

    def work(g):
        calls.append(g)
        return [g.title]

    first = per_goal(goal, "test: by value", work)
    assert per_goal(again, "test: by value", work) is first and calls == [goal]
    assert per_goal(again, "test: by value", work) is first and calls == [goal]     # and kept beside it


def test_values_python_takes_for_one_are_two_goals(demo):
    """`1`, `1.0` and `true` are equal to Python, and a goal's facts fill its messages with
    each written its own way: the match is by the goal's exact JSON."""
    goal = demo.goal("single-add-bag")
    ones = [goal.model_copy(update={"facts": {**goal.facts, "count": value}}) for value in (1, 1.0, True)]
    assert ones[0] == ones[1] == ones[2]        # what Python's == says
    answers = [per_goal(g, "test: count", lambda g: g.resolve("{count} bags")) for g in ones]
    assert answers == ["1 bags", "1.0 bags", "True bags"]


def test_the_kept_answers_are_bounded(demo, monkeypatch):
    monkeypatch.setattr(_per_goal, "KEPT", 3)
    monkeypatch.setattr(_per_goal, "_kept", {})
    goal = demo.goal("single-add-bag")
    for i in range(10):
        per_goal(goal, f"test: {i}", lambda g, i=i: i)
    copies = [goal.model_copy(update={"title": f"copy {i}"}) for i in range(20)]
    for copy in copies:
        per_goal(copy, "test: 9", lambda g: g.title)
    assert len(_per_goal._kept) <= 3
    assert all(len(kept) <= _per_goal.GOALS_PER_KEY for kept in _per_goal._kept.values())
    assert per_goal(copies[-1], "test: 9", lambda g: "worked out again") == "copy 19"    # the most recent stays
