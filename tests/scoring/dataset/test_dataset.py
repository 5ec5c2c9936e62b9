"""Personas and goals: bad input is refused before anything runs, naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simrun._errors import ConfigError
from simrun.scoring.dataset._files import json_schemas, load_dataset
from simrun.scoring.dataset._models import MANNERS
from tests.conftest import ROOT


def load(project: Path):
    return load_dataset(project / "personas", project / "goals")


def error(project: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(project)
    return info.value


def test_the_demo_set_is_big_enough_and_covers_every_manner(demo):
    assert len(demo.personas) >= 6 and len(demo.goals) >= 8
    assert set().union(*(set(p.manners) for p in demo.personas)) == set(MANNERS)
    tags = {t for g in demo.goals for t in g.tags}
    assert {"seed", "question", "correction", "single-message"} <= tags
    seed_goal = demo.goal("new-trip-full")
    assert [s.operation for s in seed_goal.steps] == ["open_trip", "name_trip", "add_bag", "rebook"]


def test_malformed_yaml_names_file_and_line(project):
    path = project / "personas" / "terse-tom.yaml"
    path.write_text("id: terse-tom\nname: Tom\nmanners: {terse: 0.9\nclicks: 0.7\n")
    exc = error(project)
    assert exc.path == str(path) and exc.line == 4
    assert "not valid YAML" in str(exc) and str(exc).startswith(f"{path}:4")


def test_unknown_manner_names_the_line_and_the_known_manners(project):
    path = project / "personas" / "grumpy-greg.yaml"
    text = path.read_text().replace("complains: 0.6", "grumbles: 0.6")
    path.write_text(text)
    exc = error(project)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "grumbles" in row)
    assert (exc.path, exc.line, exc.field) == (str(path), line, "manners.grumbles")
    assert "unknown manner 'grumbles'" in str(exc) and "changes_mind" in str(exc)


def test_unknown_field_is_refused_with_the_allowed_ones(project):
    path = project / "personas" / "plain-paula.yaml"
    path.write_text(path.read_text() + "clickz: 0.3\n")
    exc = error(project)
    assert exc.field == "clickz" and exc.line == len(path.read_text().splitlines())
    assert "allowed here" in str(exc) and "clicks" in str(exc)


def test_success_check_naming_a_missing_fact(project):
    path = project / "goals" / "cancel-trip.yaml"
    text = path.read_text().replace("match: {status: cancelled}", "match: {status: \"{trip_status}\"}")
    path.write_text(text)
    exc = error(project)
    assert exc.path == str(path) and exc.line is not None
    assert "trip_status" in str(exc) and "names a fact the goal does not define" in str(exc)


def test_success_sql_naming_a_missing_column(project):
    path = project / "goals" / "cancel-trip.yaml"
    text = path.read_text().replace("WHERE operation = 'cancel_trip'", "WHERE operaton = 'cancel_trip'")
    path.write_text(text)
    exc = error(project)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "operaton" in row)
    assert (exc.path, exc.line, exc.field) == (str(path), line, "success.sql.0")
    assert "operaton" in str(exc)


def test_a_missing_required_field(project):
    path = project / "goals" / "ask-bags.yaml"
    path.write_text(path.read_text().replace("title: Ask how many bags a trip has; the store holds the answer\n", ""))
    exc = error(project)
    assert exc.field == "title" and "required" in str(exc)


def test_duplicate_ids_name_both_files(project):
    (project / "personas" / "copy.yaml").write_text((project / "personas" / "terse-tom.yaml").read_text())
    exc = error(project)
    assert "terse-tom" in str(exc) and "also used by" in str(exc)


def test_a_step_question_must_exist(project):
    path = project / "goals" / "ask-bags.yaml"
    path.write_text(path.read_text().replace("  - question: bags", "  - question: luggage"))
    exc = error(project)
    assert "no question with id 'luggage'" in str(exc) and exc.line is not None


def test_dataset_hash_follows_content_not_formatting(project, demo):
    assert load(project).hash == demo.hash
    path = project / "personas" / "plain-paula.yaml"
    path.write_text("# a comment changes nothing\n" + path.read_text())
    assert load(project).hash == demo.hash
    path = path.rename(path.with_name("renamed-same-content.yaml"))     # nor does the file's name
    assert load(project).hash == demo.hash and load(project).item_hashes == demo.item_hashes
    path.write_text(path.read_text().replace("clicks: 0.5", "clicks: 0.6"))
    assert load(project).hash != demo.hash


def test_published_json_schemas_are_current():
    for name, body in json_schemas().items():
        published = json.loads((ROOT / "schemas" / f"{name}.schema.json").read_text())
        assert published == body, f"schemas/{name}.schema.json is stale: run `simrun schema`"


# Values YAML can write and neither JSON nor the store can hold, each where a goal keeps data
# that goes to the runtime or into the store. They were met at the runtime's first answer and
# counted as the runtime's fault (runtime_error, and a release failed on it).
UNSTORABLE = [(".nan", "the number nan"), (".inf", "the number inf"), ("-.inf", "the number -inf"),
              ('"a\\0b"', "a NUL character"), ("9" * 1001, "more than 1000 digits"),
              ("!!binary aGVsbG8=", "a bytes"), ("!!set {a, b}", "a set")]
PLACES = [("setup:\n  today: 2026-12-01\n", "setup:\n  today: 2026-12-01\n  miles: {value}\n", "setup.miles"),
          ("  destination: Lisbon\n", "  destination: Lisbon\n  seats: {value}\n", "facts.seats"),
          ("arguments: {traveler: \"{traveler}\", destination: \"{destination}\"}",
           "arguments: {{traveler: \"{{traveler}}\", destination: \"{{destination}}\", class: {value}}}",
           "steps.0.arguments.class")]


@pytest.mark.parametrize("value, says", UNSTORABLE)
@pytest.mark.parametrize("old, new, field", PLACES)
def test_a_goal_value_json_or_the_store_cannot_hold_is_refused_naming_its_line(project, value, says, old,
                                                                              new, field):
    path = project / "goals" / "new-trip-full.yaml"
    text = path.read_text()
    assert old in text
    text = text.replace(old, new.format(value=value), 1)
    path.write_text(text)
    exc = error(project)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if value in row)
    assert (exc.path, exc.line, exc.field) == (str(path), line, field), str(exc)
    assert says in str(exc) and "sent to the runtime as JSON" in str(exc)


def test_what_json_and_the_store_can_hold_loads_dates_and_the_longest_integer_too(project):
    path = project / "goals" / "new-trip-full.yaml"
    path.write_text(path.read_text().replace(
        "setup:\n  today: 2026-12-01\n",
        f"setup:\n  today: 2026-12-01\n  at: 2026-12-01T10:00:00\n  miles: {'9' * 1000}\n  ratio: -1.5e300\n"
        "  none: null\n  flag: true\n  note: \"caf\\u00e9 \\U0001F600\"\n", 1))
    goal = next(g for g in load(project).goals if g.id == "new-trip-full")
    assert goal.setup["miles"] == 10 ** 1000 - 1 and goal.setup["note"] == "café 😀"


def test_a_persona_string_the_store_cannot_hold_is_refused_naming_its_line(project):
    path = project / "personas" / "plain-paula.yaml"
    path.write_text(path.read_text() + 'forbidden: ["fine", "not\\0fine"]\n')
    exc = error(project)
    assert (exc.field, exc.line) == ("forbidden.1", len(path.read_text().splitlines()))
    assert "a NUL character" in str(exc)
