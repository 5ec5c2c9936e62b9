"""The DuckDB schema, as numbered migrations recorded in the database itself.

A migration is never edited once released: a change to the schema is a new migration. A file
written by a newer simrun (a version this code does not know) is refused, not guessed at.
"""

from __future__ import annotations

import duckdb

from simrun._errors import StoreError
from simrun.scoring.store._duck import one_row, transaction

MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "initial", """
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY,
    started_at TIMESTAMP NOT NULL,
    finished_at TIMESTAMP,
    status VARCHAR NOT NULL,                -- running | finished | interrupted
    config JSON NOT NULL,                   -- what was run; never secrets
    dataset_hash VARCHAR NOT NULL,
    dataset JSON NOT NULL,                  -- item -> content hash
    scorer_version VARCHAR NOT NULL,
    simrun_version VARCHAR NOT NULL,
    user_backend VARCHAR NOT NULL,
    runtime VARCHAR NOT NULL,
    seed BIGINT NOT NULL,
    repetitions INTEGER NOT NULL,
    budget_usd DECIMAL(18, 8) NOT NULL,
    spent_usd DECIMAL(18, 8) NOT NULL DEFAULT 0
);
CREATE TABLE conversations (
    run_id VARCHAR NOT NULL,
    conversation_id VARCHAR NOT NULL,       -- persona/goal/repetition
    persona VARCHAR NOT NULL,
    goal VARCHAR NOT NULL,
    repetition INTEGER NOT NULL,
    seed BIGINT NOT NULL,
    end_reason VARCHAR NOT NULL,
    goal_reached BOOLEAN,                   -- NULL: UNVERIFIABLE
    goal_detail VARCHAR NOT NULL,
    turns INTEGER NOT NULL,
    cost_usd DECIMAL(18, 8) NOT NULL DEFAULT 0,
    duration_ms DOUBLE NOT NULL,
    started_at TIMESTAMP NOT NULL,
    initial_state JSON,
    final_state JSON,
    audit JSON,
    stop JSON,
    error JSON,
    PRIMARY KEY (run_id, conversation_id)
);
CREATE TABLE turns (
    run_id VARCHAR NOT NULL,
    conversation_id VARCHAR NOT NULL,
    turn INTEGER NOT NULL,
    user_turn JSON NOT NULL,
    result JSON,                            -- the turn result as received
    state JSON,                             -- the store after the turn
    latency_ms DOUBLE NOT NULL,
    PRIMARY KEY (run_id, conversation_id, turn)
);
CREATE TABLE findings (
    run_id VARCHAR NOT NULL,
    conversation_id VARCHAR NOT NULL,
    turn INTEGER,                           -- NULL: about the whole conversation
    class VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,                  -- progress | guarantee | simulator
    detail VARCHAR NOT NULL,
    evidence JSON NOT NULL
);
CREATE TABLE checks (
    run_id VARCHAR NOT NULL,
    conversation_id VARCHAR NOT NULL,
    class VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    status VARCHAR NOT NULL,                -- fired | clean | unverifiable
    occurrences INTEGER NOT NULL,
    checked_turns INTEGER NOT NULL,
    unverifiable_turns INTEGER NOT NULL,
    PRIMARY KEY (run_id, conversation_id, class)
);
CREATE TABLE model_calls (
    run_id VARCHAR NOT NULL,
    conversation_id VARCHAR NOT NULL,
    turn INTEGER,
    backend VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    input_tokens BIGINT NOT NULL,
    cached_input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cost_usd DECIMAL(18, 8) NOT NULL,
    latency_ms DOUBLE NOT NULL,
    cache_status VARCHAR NOT NULL,
    request_hash VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL
);
"""),
    (2, "rescoring", """
ALTER TABLE runs ADD COLUMN rescored_at TIMESTAMP;      -- NULL: scored only as it ran
ALTER TABLE runs ADD COLUMN rescored_from VARCHAR;      -- the scorer version before the last rescore
"""),
    (3, "model calls for replay", """
ALTER TABLE model_calls ADD COLUMN cache_write_tokens BIGINT DEFAULT 0;
ALTER TABLE model_calls ADD COLUMN request JSON;        -- the exact request body, never credentials
ALTER TABLE model_calls ADD COLUMN answer JSON;         -- the model's structured answer: what replay gives back
ALTER TABLE model_calls ADD COLUMN response JSON;       -- the whole response, as received
ALTER TABLE runs ADD COLUMN conversations_planned INTEGER;
"""),
    (4, "resume and shards", """
ALTER TABLE runs ADD COLUMN run_key VARCHAR;            -- what the run is: an unfinished one with this key resumes
ALTER TABLE runs ADD COLUMN shard VARCHAR;              -- "i/n" for one shard of a matrix, NULL for all of it
"""),
    (5, "the loop's own end reason", """
-- How the conversation loop ended it, before the scorer's verdict (which may turn it into
-- simulator_error): rescoring starts again from this.
ALTER TABLE conversations ADD COLUMN loop_end VARCHAR;
"""),
    (6, "run identity and runtime sessions", """
ALTER TABLE runs ADD COLUMN labels JSON;                -- --label / run.labels: a list of names
ALTER TABLE runs ADD COLUMN runtime_version VARCHAR;    -- the runtime's /v1/health version
ALTER TABLE runs ADD COLUMN git_commit VARCHAR;         -- of the folder simrun ran in, if a git work tree
ALTER TABLE runs ADD COLUMN git_branch VARCHAR;
ALTER TABLE conversations ADD COLUMN session_id VARCHAR; -- the runtime's own session id, for its logs
"""),
    (7, "user model output form and competence", """
ALTER TABLE runs ADD COLUMN user_output VARCHAR;        -- the structured-output form the user model answered in
CREATE TABLE user_checks (                              -- `simrun check-user`: how competent a user model is
    check_id VARCHAR PRIMARY KEY,
    checked_at TIMESTAMP NOT NULL,
    user_backend VARCHAR NOT NULL,                      -- backend:model, as runs.user_backend
    user_output VARCHAR,
    conversations INTEGER NOT NULL,
    goal_reached INTEGER NOT NULL,
    judged INTEGER NOT NULL,                            -- conversations that ended for a reason of the user's
                                                        -- or the runtime's
    threshold DOUBLE NOT NULL,                          -- below this goal-reached share, reports warn
    simulator_errors JSON NOT NULL,                     -- kind -> conversations
    provider_errors INTEGER NOT NULL,
    turns_per_goal DOUBLE,                              -- mean turns of the conversations that reached their goal
    goals JSON NOT NULL,                                -- goal -> {played, reached, turns}: where the user fails
    cost_usd DECIMAL(18, 8) NOT NULL,
    conversation_costs JSON NOT NULL,                   -- per conversation: calls and tokens, for `simrun plan`
    examples JSON NOT NULL                              -- a few faults with the message that showed them
);
"""),
    (8, "the gate's verdicts between runs, remembered", """
CREATE TABLE gate_verdicts (                            -- the dashboard's verdict of a run against the one before
    key VARCHAR PRIMARY KEY,                            -- both runs' scores, the gate settings, simrun's version
    state VARCHAR NOT NULL,                             -- passed | failed | not compared
    headline VARCHAR NOT NULL,
    classes JSON NOT NULL,                              -- the classes the gate failed the run on
    judged_at TIMESTAMP NOT NULL
);
"""),
    (9, "why a class was UNVERIFIABLE", """
ALTER TABLE checks ADD COLUMN reason VARCHAR;           -- why turns could not be checked (NULL: they all could)
"""),
    (10, "goals that name what no store held", """
CREATE TABLE goal_problems (                            -- a problem in a goal file, found after the run
    run_id VARCHAR NOT NULL,
    goal VARCHAR NOT NULL,
    problem VARCHAR NOT NULL                            -- one line, with what the run's stores held
);
"""),
]


class OlderSchema(StoreError):
    """A file written by an older simrun, opened read-only: it cannot be brought up to date in place."""


def check_current(con: duckdb.DuckDBPyConnection) -> int:
    """For a read-only connection, where nothing can be applied: the file's schema must be this
    simrun's (OlderSchema when it lacks migrations; a StoreError when it is newer)."""
    newest = max(v for v, _, _ in MIGRATIONS)
    try:
        version = one_row(con.execute("SELECT max(version) FROM schema_migrations"))[0] or 0
    except duckdb.CatalogException:
        version = 0
    if version > newest:
        raise StoreError(f"this database has schema version {version}, written by a newer simrun; "
                         f"this simrun knows up to {newest}. Upgrade simrun, or use another --db.")
    if version < newest:
        raise OlderSchema(f"this database has schema version {version}, from an older simrun")
    return version


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply every migration the database lacks; return the schema version."""
    con.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)")
    applied = {row[0] for row in con.execute("SELECT version FROM schema_migrations").fetchall()}
    newest = max(v for v, _, _ in MIGRATIONS)
    if applied and max(applied) > newest:
        raise StoreError(f"this database has schema version {max(applied)}, written by a newer simrun; "
                         f"this simrun knows up to {newest}. Upgrade simrun, or use another --db.")
    missing = [(version, name, sql) for version, name, sql in MIGRATIONS if version not in applied]
    if missing:
        # One transaction for all of them: a file is brought up to date whole or not at all, and
        # a new file's ten commits (each a checkpoint's worth of work) cost more than its schema.
        with transaction(con):
            for version, name, sql in missing:
                con.execute(sql)
                con.execute("INSERT INTO schema_migrations VALUES (?, ?, now())", [version, name])
    return newest
