"""What a success query names, read from DuckDB's parse tree, and only what it names plainly."""

from __future__ import annotations

import pytest

from simrun.scoring.dataset._sql_names import sql_names


def test_types_operations_and_json_paths_are_read_whatever_the_spelling():
    names = sql_names("""
        SELECT count(*) = 1 FROM events e JOIN records r ON r.id = e.record
        WHERE e.operation IN ('rebook', 'add_bag') AND 'cancel_trip' <> operation AND r.type = 'trip'
          AND 'traveler' = type AND e.arguments->>'date' = '2027-03-12'
          AND json_extract_string(arguments, '$.segment.name') = 'x' AND r.data->'segments'->>'outbound' IS NULL
          AND json_extract(data, '/bags') > 1 AND data->'legs'->0->>'x' = 'y' AND data->>'$.name' = 'n'""")
    assert names.types == {"trip", "traveler"}
    assert names.operations == {"rebook", "add_bag"}                  # `<>` names nothing it needs
    assert names.record_fields == {"segments", "segments.outbound", "bags", "legs", "name"}
    assert names.argument_fields == {"date", "segment.name"}


@pytest.mark.parametrize("query", [
    "SELECT count(*) > 0 FROM records WHERE type = lower('TRIP')",   # not a plain literal
    "SELECT count(*) > 0 FROM records WHERE data->>('na' || 'me') = 'x'",
    "SELECT count(*) > 0 FROM records WHERE data->'$[*]' IS NOT NULL",
    "SELEC nothing",
])
def test_what_is_not_plain_names_nothing(query):
    names = sql_names(query)
    assert not (names.types or names.operations or names.record_fields or names.argument_fields)
