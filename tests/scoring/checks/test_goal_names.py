"""A goal that names what no store held is named, one line each, with what was seen."""

from __future__ import annotations

from pathlib import Path

import pytest

from simrun.scoring.checks._goal_names import Seen, goal_problems
from simrun.scoring.dataset._files import load_model
from simrun.scoring.dataset._models import Goal
from tests.conftest import ROOT

TRIP = frozenset({"type", "name", "bags", "status", "destination", "traveler", "segments", "segments.outbound",
                  "segments.outbound.date", "segments.return", "segments.return.date"})
SEEN = Seen(fields={"trip": TRIP, "traveler": frozenset({"type", "name"})},
            types_of={"trip:T-1": "trip", "trip:T-2": "trip", "traveler:P-1": "traveler"},
            operations=frozenset({"name_trip", "rebook", "add_bag", "remove_bag", "open_trip", "cancel_trip"}),
            arguments={"rebook": frozenset({"date", "segment"})})


def goal(tmp_path: Path, *edits: tuple[str, str], name: str = "rename-trip") -> Goal:
    text = (ROOT / "goals" / f"{name}.yaml").read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / "g.yaml"
    path.write_text(text)
    return load_model(path, Goal)


def test_the_demo_goals_name_nothing_unseen(demo):
    assert [line for g in demo.goals for line in goal_problems(g, SEEN)] == []


def test_a_match_field_is_checked_against_the_type_of_the_record_it_names(tmp_path):
    g = goal(tmp_path, ("match: {name: Lisbon offsite}", "match: {name: Lisbon offsite, bag: 1}"))
    assert goal_problems(g, SEEN) == ["goal rename-trip: no record of type trip ever had field `bag` (did you mean "
                                      "`bags`?); fields seen: bags, destination, name, segments, status, traveler, "
                                      "type"]
    # The same field on a traveler: travelers never had bags.
    g = goal(tmp_path, ("- id: trip:T-1\n      match: {name: Lisbon offsite}",
                        "- id: traveler:P-1\n      match: {bags: 1}"))
    assert goal_problems(g, SEEN) == ["goal rename-trip: no record of type traveler ever had field `bags`; "
                                      "fields seen: name, type"]


def test_a_nested_path_names_the_step_that_is_wrong_and_what_is_under_its_parent(tmp_path):
    g = goal(tmp_path, ("match: {name: Lisbon offsite}", "match: {segments.outbond.date: 2027-03-10}"))
    assert goal_problems(g, SEEN) == ["goal rename-trip: no record of type trip ever had field `segments.outbond` "
                                      "(did you mean `outbound`?); fields seen under segments: outbound, return"]


def test_a_record_with_no_id_is_checked_against_every_type_and_a_type_by_value(tmp_path):
    g = goal(tmp_path, ("- id: trip:T-1\n      match: {name: Lisbon offsite}",
                        "- match: {type: trips, nam: x}"))
    lines = goal_problems(g, SEEN)
    assert lines == ["goal rename-trip: no record of type `trips` ever existed (did you mean `trip`?); types seen: "
                     "traveler, trip",
                     "goal rename-trip: no record ever had field `nam` (did you mean `name`?); fields seen: bags, "
                     "destination, name, segments, status, traveler, type"]


def test_operations_of_steps_and_names_in_sql_are_checked(tmp_path):
    g = goal(tmp_path, ("operation: name_trip", "operation: rename_trip"),
             ("  records:\n    - id: trip:T-2", "  sql:\n    - \"SELECT count(*) = 1 FROM events e JOIN records r "
              "ON r.id = e.record WHERE operation = 'rebook' AND arguments->>'dates' = 'x' AND r.type = 'trip' "
              "AND r.data->>'bag' = '1'\"\n  records:\n    - id: trip:T-2"))
    assert goal_problems(g, SEEN) == [
        "goal rename-trip: no event, offer or ask ever had operation `rename_trip` (did you mean `name_trip`?); "
        "operations seen: add_bag, cancel_trip, name_trip, open_trip, rebook, remove_bag",
        "goal rename-trip: no record of type trip ever had field `bag` (did you mean `bags`?); fields seen: bags, "
        "destination, name, segments, status, traveler, type",
        "goal rename-trip: no event or ask of operation rebook ever had argument `dates` (did you mean `date`?); "
        "arguments seen: date, segment"]


def test_questions_name_fields_too(tmp_path):
    g = goal(tmp_path, name="ask-bags")
    assert goal_problems(g, SEEN) == []
    wrong = goal(tmp_path, ("field: bags", "field: bag_count"), name="ask-bags")
    assert goal_problems(wrong, SEEN) == [
        "goal ask-bags: no record of type trip ever had field `bag_count`; fields seen: bags, destination, name, "
        "segments, status, traveler, type"]


@pytest.mark.parametrize("seen", [Seen({}, {}, frozenset(), {}),
                                  Seen({"trip": frozenset({"name"})}, {}, frozenset(), {})])
def test_what_the_run_could_not_show_is_not_held_against_the_goal(tmp_path, seen):
    # No records at all: no field is named; no operation seen (a runtime with no events): none named.
    g = goal(tmp_path, ("operation: name_trip", "operation: rename_trip"))
    assert goal_problems(g, seen) == []


def test_a_hostile_runtime_s_names_are_shown_short_and_on_one_line(tmp_path):
    hostile = "x" * 5_000 + "\n\u202eevil"
    seen = Seen(fields={"trip": frozenset({"name", hostile})}, types_of={"trip:T-1": "trip"},
                operations=frozenset({"name_trip", hostile}), arguments={})
    g = goal(tmp_path, ("match: {name: Lisbon offsite}", "match: {name: Lisbon offsite, bag: 1}"))
    (line,) = goal_problems(g, seen)
    assert len(line) < 300 and "\n" not in line and "\u202e" not in line
