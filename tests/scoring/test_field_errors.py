"""Every hand-written file (persona, goal, simrun.toml, budgets.toml) names an unknown key, its
line, and the nearest known key, through one formatter (simrun/_field_errors.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from simrun._errors import ConfigError
from simrun._field_errors import did_you_mean
from simrun._settings import load_budgets, load_project
from simrun.scoring.dataset._files import load_model
from simrun.scoring.dataset._models import Goal, Persona
from tests.conftest import ROOT


def refused(load, path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(path)
    return info.value


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_misspelt_required_key_is_named_not_the_key_it_left_missing(tmp_path):
    # `sucess:` leaves `success` missing; the error must blame the line that is wrong.
    path = tmp_path / "g.yaml"
    shutil.copy(ROOT / "goals" / "rename-trip.yaml", path)
    path.write_text(path.read_text().replace("success:", "sucess:"))
    exc = refused(lambda p: load_model(p, Goal), path)
    assert (exc.path, exc.line, exc.field) == (str(path), line_of(path, "sucess:"), "sucess")
    assert str(exc).startswith(f"{path}:{exc.line} (sucess): unknown field 'sucess'; did you mean 'success'?")
    assert "this field is required" not in str(exc)


@pytest.mark.parametrize("where, typo, meant", [
    ("steps.0", "    recrod: trip:T-2\n", "record"),                 # nested in a list
    ("success.records.0", "      mach: {name: x}\n", "match"),     # two levels down
])
def test_a_nested_unknown_key_is_named_with_the_keys_allowed_there(tmp_path, where, typo, meant):
    text = (ROOT / "goals" / "rename-trip.yaml").read_text()
    anchor = "    record: trip:T-2\n" if where == "steps.0" else "      match: {name: \"{new_name}\"}\n"
    path = tmp_path / "g.yaml"
    path.write_text(text.replace(anchor, anchor + typo, 1))
    exc = refused(lambda p: load_model(p, Goal), path)
    key = typo.split(":")[0].strip()
    assert exc.field == f"{where}.{key}" and exc.line == line_of(path, typo.strip())
    assert f"unknown field {key!r}; did you mean {meant!r}?" in str(exc) and "allowed here:" in str(exc)


def test_a_key_near_nothing_known_lists_what_is_allowed_without_guessing(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("id: p\nname: P\nxyzzy: 1\n")
    exc = refused(lambda p: load_model(p, Persona), path)
    assert (exc.line, exc.field) == (3, "xyzzy")
    assert "unknown field 'xyzzy' (allowed here: id, name, description" in str(exc)
    assert "did you mean" not in str(exc)


def test_a_misspelt_manner_suggests_the_manner(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("id: p\nname: P\nmanners:\n  wordi: 0.5\n")
    exc = refused(lambda p: load_model(p, Persona), path)
    assert (exc.line, exc.field) == (4, "manners.wordi")
    assert "unknown manner 'wordi'; did you mean 'wordy'?" in str(exc) and "changes_mind" in str(exc)


@pytest.mark.parametrize("text, line, field, says", [
    ('[run]\nrepetitons = 3\n', 2, "run.repetitons", "unknown setting 'repetitons'; did you mean 'repetitions'?"),
    ('[runtime]\ntransport = "http"\nurl = "http://h"\nstartup_timeout = 5\n', 4, "runtime.startup_timeout",
     "unknown setting 'startup_timeout'; did you mean 'startup_timeout_s'?"),
    ('[runtme]\ntransport = "http"\n', 1, "runtme", "unknown setting 'runtme'; did you mean 'runtime'?"),
    ('[runtime]\ntransport = "htp"\n', 2, "runtime.transport", "'htp' is not one of 'python', 'http'"),
])
def test_simrun_toml_names_the_unknown_setting_and_the_nearest(tmp_path, text, line, field, says):
    path = tmp_path / "simrun.toml"
    path.write_text(text)
    exc = refused(load_project, path)
    assert (exc.path, exc.line, exc.field) == (str(path), line, field)
    assert says in str(exc)
    if "htp" in text:
        assert "did you mean 'http'?" in str(exc)


@pytest.mark.parametrize("text, line, field, says", [
    ('[gate]\nalpah = 0.1\n', 2, "gate.alpah", "unknown setting 'alpah'; did you mean 'alpha'?"),
    # A key under a mapping of models (prices.<backend>) is checked against the model's fields.
    ('[prices."openai:m"]\ninput_per_mtok = 1\noutput_per_mtok = 2\ncached_per_mtok = 1\n', 4,
     'prices.openai:m.cached_per_mtok', "did you mean 'cached_input_per_mtok'?"),
    ('[release.max_rate]\ndead_ends = 0.1\n', 2, "release.max_rate.dead_ends",
     "unknown key 'dead_ends'; did you mean 'dead_end'?"),
])
def test_budgets_toml_names_the_unknown_setting_and_the_nearest(tmp_path, text, line, field, says):
    path = tmp_path / "budgets.toml"
    path.write_text(text)
    exc = refused(load_budgets, path)
    assert (exc.line, exc.field) == (line, field)
    assert says in str(exc)


def test_did_you_mean_only_suggests_a_close_word():
    assert did_you_mean("sucess", ["success", "steps"]) == "; did you mean 'success'?"
    assert did_you_mean("zzz", ["success", "steps"]) == ""
