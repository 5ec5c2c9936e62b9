"""The settings (simrun._settings): one set of models for the simulator, the judge and the
gate, read from budgets.toml and from a store with the same bounds.

A store is read strictly (the types simrun writes) and a value out of bounds there is refused with
the run and the field named, as budgets.toml names its file, line and field; the release criteria
a run kept are used only when they are criteria, as before."""

from __future__ import annotations

import pytest

from simrun._errors import ConfigError, StoreError
from simrun._settings import (
    Budgets,
    GateSection,
    ReleaseSection,
    SequentialSection,
    from_store,
    load_budgets,
    stored_release,
    stored_sequential,
)

KEPT = SequentialSection().model_dump()


def run_row(config: object) -> dict:
    return {"run_id": "r1", "config": config}


@pytest.mark.parametrize("key, value", [
    ("max_rounds", 0), ("max_rounds", 1), ("max_rounds", 1000), ("max_rounds", 1001), ("max_rounds", 10**12),
    ("per_round", 0), ("per_round", 100), ("per_round", 101),
    ("spending", 0.0), ("spending", 10.0), ("spending", 10.5),
    ("beta", 0.0), ("beta", 0.49), ("beta", 0.5),
    ("beta_spending", 0.0), ("beta_spending", 10.0), ("beta_spending", 11.0),
    ("exact", False),
])
def test_a_stored_sequential_setting_is_refused_exactly_when_budgets_toml_refuses_it(tmp_path, key, value):
    toml = tmp_path / "budgets.toml"
    toml.write_text(f"[gate.sequential]\n{key} = {str(value).lower()}\n")
    try:
        from_file = load_budgets(toml).gate.sequential
    except ConfigError as exc:
        assert exc.line == 2 and exc.field == f"gate.sequential.{key}", exc
        with pytest.raises(StoreError) as info:
            stored_sequential(run_row({"sequential": {**KEPT, key: value}}), "db.duckdb")
        assert str(info.value).startswith(f"db.duckdb: run r1: runs.config.sequential.{key}: "), info.value
        return
    assert stored_sequential(run_row({"sequential": {**KEPT, key: value}}), "db.duckdb") == from_file


@pytest.mark.parametrize("config", [{}, None, {"sequential": None}, ["not", "a", "config"]])
def test_a_run_not_made_in_rounds_has_no_sequential_settings(config):
    assert stored_sequential(run_row(config), "db.duckdb") is None


def test_a_stored_value_is_read_strictly_and_its_field_is_printed_safely():
    # What simrun writes has exact types: a "yes" or a 20.0 was put there by something else.
    for value in ({**KEPT, "exact": "yes"}, {**KEPT, "max_rounds": 20.0}, {**KEPT, "beta": "0.1"}):
        with pytest.raises(StoreError):
            stored_sequential(run_row({"sequential": value}), "db.duckdb")
    # A key a crafted file holds is shown as text, never as terminal control.
    with pytest.raises(StoreError) as info:
        from_store(SequentialSection, {**KEPT, "x\x1b[2Jy": 1}, "db.duckdb: run r1: runs.config.sequential")
    assert "\x1b" not in str(info.value) and "x?[2Jy" in str(info.value)


def test_a_model_built_with_no_arguments_is_the_defaults_of_an_empty_budgets_toml(tmp_path):
    toml = tmp_path / "budgets.toml"
    toml.write_text("")
    assert load_budgets(toml) == Budgets()
    assert Budgets().gate == GateSection() and Budgets().release == ReleaseSection()
    assert GateSection().sequential == SequentialSection()


CRITERIA = {"fail_on_runtime_error": True, "min_goal_reached": 0.5, "max_rate": {"dead_end": 0.3},
            "progress_ceiling": 0.2}


@pytest.mark.parametrize("kept, used", [
    (CRITERIA, True),
    ({k: v for k, v in CRITERIA.items() if k != "min_goal_reached"}, True),   # JSON merge drops a null
    ({**CRITERIA, "max_rate": {"runtime_error": 0}}, True),
    ({**CRITERIA, "progress_ceiling": 5}, False),                             # out of bounds
    ({**CRITERIA, "min_goal_reached": -0.1}, False),
    ({**CRITERIA, "max_rate": {"dead_end": 1.5}}, False),
    ({**CRITERIA, "max_rate": {"no_such_class": 0.1}}, False),
    ({**CRITERIA, "fail_on_runtime_error": "yes"}, False),                    # not the type simrun wrote
    ({**CRITERIA, "progress_ceiling": "0.2"}, False),
    ({k: v for k, v in CRITERIA.items() if k != "max_rate"}, False),          # a field missing
    ({**CRITERIA, "fail_on_everything": True}, False),
    ([CRITERIA], False),
])
def test_release_criteria_a_run_kept_are_used_only_when_they_pass_the_model_bounds_and_all(kept, used):
    criteria = stored_release(run_row({"release": kept}))
    assert (criteria is not None) == used
    if used:
        assert criteria == ReleaseSection.model_validate({"min_goal_reached": None, **kept})


def test_no_criteria_kept_is_none():
    assert stored_release(run_row({})) is None and stored_release(run_row(None)) is None
