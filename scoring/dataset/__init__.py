"""Personas and goals: the YAML files a project writes, validated at the boundary.

    files       load_dataset(personas_dir, goals_dir) -> Dataset; canonical_json; json_schemas
    models      the pydantic models of a persona and a goal file (extra fields forbidden)
    facts       a goal's `{fact}` templates: checked when the file is read, filled in a run
    goal_sql    a goal's `success.sql`, run in a sandbox as hostile code
    sql_names   the record types, operations and JSON paths a success query names
    patterns    the regular expressions goal files write, matched in linear time (RE2)

Imports: the shared vocabulary of `simrun.scoring` only. Everything else reads its personas and
goals from here: the judge, the store (bundles, rescore) and the simulator.
"""
