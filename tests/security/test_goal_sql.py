"""Goal SQL is a sandbox, not a shell: a goal file from an untrusted pull request can read no
file, write none, attach no database, install nothing, change no setting, and never hang a run.

Every hostile query is tried where it would bite first: `simrun validate` (which loads the goal
and runs its SQL on empty tables). Each must be refused or stopped with one line naming the
file, the line and the field, and must leave no trace on the machine.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import duckdb
import pytest

from simrun._transcript import Transcript
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.checks._goal import goal_status
from simrun.scoring.dataset import _goal_sql as goal_sql
from simrun.scoring.dataset import _sql_sandbox as sql_sandbox
from simrun.scoring.dataset._files import load_dataset
from simrun.scoring.dataset._goal_sql import QueryRefused, check_goal_sql, parse_select
from simrun.simulator._conversation import converse
from simrun.simulator._runner import matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser
from tests.security.conftest import SECRET, one_line_error

GOAL = "goals/cancel-trip.yaml"


def with_sql(project: Path, query: str) -> int:
    """Put `query` as the cancel-trip goal's only success.sql; return the line it is on."""
    path = project / GOAL
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == "sql:")
    lines[at + 1] = "    - " + _yaml_string(query)
    path.write_text("\n".join(lines) + "\n")
    return at + 2


def _yaml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site-packages"
    folder.mkdir()
    return folder


HOSTILE = {
    "file read": "SELECT count(*) > 0 FROM read_text('{secret}')",
    "file read into a value": "SELECT content = 'x' FROM read_text('{secret}')",
    "csv read": "SELECT count(*) > 0 FROM read_csv('{secret}')",
    "file list": "SELECT count(*) > 0 FROM glob('{site}/*')",
    "file write": "COPY (SELECT 'import os; os.system(\"touch {site}/owned\")') TO '{site}/evil.pth'",
    "file write inside a select": "SELECT * FROM query('COPY (SELECT 1) TO ''{site}/evil.pth''')",
    "file write breaking out of the wrapper": ("SELECT 1) t; COPY (SELECT 'import os') TO '{site}/evil.pth'; "
                                               "SELECT * FROM (SELECT 1"),
    "attach breaking out of the wrapper": "SELECT 1) t; ATTACH '{site}/new.duckdb' AS x; SELECT * FROM (SELECT 1",
    "attach": "ATTACH '{site}/new.duckdb' AS x",
    "attach after a select": "SELECT true; ATTACH '{site}/new.duckdb' AS x",
    "create": "CREATE TABLE owned AS SELECT 1",
    "install": "INSTALL httpfs",
    "load": "LOAD httpfs",
    "set": "SET enable_external_access = true",
    "pragma": "PRAGMA enable_profiling",
    "two statements": "SELECT true; SELECT false",
    "a parenthesis that closes the wrapper": "SELECT true) t, (SELECT 1",
    "a parameter": "SELECT $1 = 1",
}


@pytest.mark.parametrize("name", HOSTILE)
def test_validate_refuses_each_hostile_query_in_one_line_and_leaves_no_trace(run_cli, project, secret_file, site,
                                                                            name):
    query = HOSTILE[name].format(secret=secret_file, site=site)
    line = with_sql(project, query)
    code, output = run_cli("validate")
    assert code == 2
    error = one_line_error(output)
    assert f"{GOAL}:{line} (success.sql.0)" in error
    assert SECRET not in output
    assert list(site.iterdir()) == []                 # no .pth, no database, nothing written
    assert not (project / "new.duckdb").exists()


def test_a_runaway_query_is_stopped_at_its_limit_and_named(run_cli, project):
    line = with_sql(project, "SELECT count(*) > 0 FROM range(1000000000000)")
    started = time.monotonic()
    code, output = run_cli("validate")
    assert code == 2
    assert time.monotonic() - started < goal_sql.QUERY_TIMEOUT_S + 5
    error = one_line_error(output)
    assert f"{GOAL}:{line} (success.sql.0)" in error and "ran past its 2 s limit" in error


def test_the_sandbox_holds_even_for_a_query_that_reached_the_connection(secret_file, site):
    # Defence in depth: were the parser ever fooled, the connection itself refuses, and so does
    # the sandbox process that a query is sent to.
    con = sql_sandbox.connect()
    sandbox = goal_sql._Sandbox()
    try:
        for statement in (f"SELECT * FROM read_text('{secret_file}')", f"COPY (SELECT 1) TO '{site}/x.pth'",
                          f"ATTACH '{site}/y.duckdb' AS y", "INSTALL httpfs", "LOAD httpfs",
                          "SET enable_external_access = true", "SET lock_configuration = false"):
            with pytest.raises(duckdb.Error) as info:
                con.execute(statement).fetchall()
            assert SECRET not in str(info.value)
            got = sandbox.ask(json.dumps({"sql": statement, "params": []}).encode() + b"\n", 5.0)
            assert "error" in got and SECRET not in json.dumps(got), (statement, got)
        assert sandbox.ask(b'{"sql": "SELECT current_setting(\'enable_external_access\')", "params": []}\n',
                           5.0) == {"rows": 1, "columns": 1, "first": False}
    finally:
        sandbox.end()
    assert list(site.iterdir()) == []
    assert con.execute("SELECT current_setting('enable_external_access')").fetchone() == (False,)


def test_the_sandbox_process_holds_no_secret_of_simruns(monkeypatch):
    # What a query might one day read of its process, there is nothing of simrun's to read.
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    sandbox = goal_sql._Sandbox()
    try:
        assert "rows" in sandbox.ask(b'{"sql": "SELECT 1", "params": []}\n', 5.0)
        environ = Path(f"/proc/{sandbox.process.pid}/environ").read_bytes()
    finally:
        sandbox.end()
    assert SECRET.encode() not in environ and b"OPENAI_API_KEY" not in environ


@pytest.mark.parametrize("query", [
    "SELECT length(repeat(repeat('x', 20000), 20000)) > 0",                          # one huge string
    "SELECT length(string_agg(repeat('y', 100000), '')) > 0 FROM range(20000)",      # many, joined
    "SELECT max(len(l)) > 0 FROM (SELECT list(i) AS l FROM range(400000000) t(i))",  # one huge list
])
def test_a_query_that_asks_for_gigabytes_is_stopped_at_its_memory_limit(query):
    # DuckDB's memory_limit bounds its buffers, not every allocation; the sandbox process's
    # address space is what bounds these. They fail, quickly, each time they are asked.
    started = time.monotonic()
    problem = check_goal_sql(query)
    assert problem is not None and "memory limit" in problem, problem
    assert time.monotonic() - started < goal_sql.QUERY_TIMEOUT_S + 3
    assert check_goal_sql("SELECT true") is None            # the sandbox serves the next query


def test_a_trailing_comment_or_semicolon_cannot_reshape_the_wrapped_query():
    for query in ("SELECT true -- ) , (SELECT 1", "SELECT true;"):
        assert check_goal_sql(query) is None
        assert goal_sql.sql_holds(query, {"records": {}, "events": []}) is True
    # What cannot be wrapped whole is refused, never run in part.
    assert check_goal_sql("SELECT true; -- ATTACH 'x' AS y").startswith("not valid SQL once placed over")


@pytest.mark.parametrize("query, says", [
    ("", "not empty"), ("x" * (goal_sql.MAX_QUERY_CHARS + 1), "at most"),
    ("SELECT 1; SELECT 2", "exactly one SELECT statement, found 2"), ("DELETE FROM records", "not DELETE"),
    ("SELECT ? ", "no parameters"),
])
def test_parse_select_refuses_what_is_not_one_plain_select(query, says):
    with pytest.raises(QueryRefused) as info:
        parse_select(query)
    assert says in str(info.value)


def test_a_query_slow_only_on_real_data_is_unverifiable_never_a_pass_and_bounded_each_time():
    # Fast on the empty tables of validation, endless once the store holds a record.
    query = "SELECT count(*) > 0 FROM records, range(1000000000000)"
    assert check_goal_sql(query) is None
    demo = load_dataset(Path(__file__).parents[2] / "personas", Path(__file__).parents[2] / "goals")
    goal = demo.goal("cancel-trip").model_copy(update={"success": demo.goal("cancel-trip").success.model_copy(
        update={"sql": (query,), "records": ()})})
    state = {"records": {"trip:T-1": {"type": "trip"}}, "events": []}
    empty = Transcript("p", goal.id, 1, 0, (), "")
    for records in ({"trip:T-1": {"type": "trip"}}, {"trip:T-9": {"type": "trip"}}):
        # Each store it is asked about costs its limit, no more: a stall is one conversation's.
        started = time.monotonic()
        reached, why = goal_status(goal, empty, {**state, "records": records})
        assert reached is None and why.startswith("UNVERIFIABLE: goal cancel-trip: success.sql[0] ran past")
        assert time.monotonic() - started < goal_sql.QUERY_TIMEOUT_S + 3
    assert check_goal_sql(query) is None        # and the goal still loads: the machine's speed is no bad input

    # In a whole conversation: it ends, and never as goal_reached.
    cell = next(c for c in matrix(demo, 1, 5) if c.goal.id == "cancel-trip")
    cell = type(cell)(cell.persona, goal, cell.repetition, cell.seed)
    conversation = asyncio.run(converse(cell, ScriptedUser(), PythonRuntime(TripDesk())))
    assert conversation.transcript.end != "goal_reached"
    assert conversation.scorecard.goal_reached is None
    assert "ran past" in conversation.scorecard.goal_detail


def test_a_query_past_its_limit_on_one_store_answers_on_the_next_and_still_loads():
    """The machine's speed never changes a verdict: a query that ran past its limit (here on a
    store that makes it slow; under load, any) costs that conversation, never the goal for the
    rest of the run, and never the next `load` of the goal (exit 2)."""
    query = "SELECT count(*) >= 0 FROM records a, records b, records c, records d, records e"
    many = {"records": {f"trip:T-{i}": {"type": "trip"} for i in range(400)}, "events": []}
    with pytest.raises(goal_sql.QueryFailed, match="ran past"):
        goal_sql.sql_holds(query, many)
    assert goal_sql.sql_holds(query, {"records": {"trip:T-1": {"type": "trip"}}, "events": []}) is True
    assert check_goal_sql(query) is None
