"""Personas and goals: bad input is refused before anything runs, naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoring.dataset.files import json_schemas, load_dataset
from scoring.dataset.models import MANNERS
from scoring.errors import ConfigError

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
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "grumbles" in l)
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
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "operaton" in l)
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
