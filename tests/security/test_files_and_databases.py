"""Files and databases from elsewhere: shard files to merge, a crafted DuckDB file, bundles to
import, and a disk that fills up. Each is one line and exit 2, or works; none runs SQL it was
not meant to, writes outside its folder, or leaves an empty run behind."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import duckdb
import pytest

from simrun.scoring.dataset._files import load_dataset
from simrun.scoring.store._database import Store
from tests.security.conftest import one_line_error


def runs_in(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT run_id, dataset_hash, status FROM runs ORDER BY started_at").fetchall()
    finally:
        con.close()


# --- simrun merge ------------------------------------------------------------------------------

def test_merge_takes_shard_paths_as_data_never_as_sql(run_cli, project):
    hostile = "x'; COPY (SELECT 42) TO 'pwned.csv'; --"
    paths = []
    for i in range(2):
        folder = project / f"shard {i} it's"
        folder.mkdir()
        code, output = run_cli("--budget", "5usd", "-n", "1", "--shard", f"{i}/2", "--db", str(folder / "s.duckdb"))
        assert code == 0, output
        paths.append(folder / "s.duckdb")
    shutil.move(paths[1], project / f"{hostile}.duckdb")
    paths[1] = project / f"{hostile}.duckdb"
    code, output = run_cli("merge", str(paths[0]), str(paths[1]), "--out", str(project / "joined.duckdb"))
    assert code == 0, output
    assert not (project / "pwned.csv").exists()
    (run_id, _, status), = runs_in(project / "joined.duckdb")
    assert status == "finished"


@pytest.mark.parametrize("table, column, value, says", [
    ("turns", "result", '{"reply": "hi", "score": NaN}', "the number nan"),
    ("turns", "state", '{"records": {}, "events": [], "x": 1e999}', "the number inf"),
    ("conversations", "final_state", '{"records": {"a": {"name": "a\\u0000b"}}, "events": []}', "a NUL character"),
    ("conversations", "audit", '[{"turn": 1, "n": -Infinity}]', "the number -inf"),
    ("runs", "config", "nan", "text that is not JSON"),
])
def test_merge_refuses_a_shard_holding_json_no_store_keeps(run_cli, project, table, column, value, says):
    """DuckDB keeps NaN, infinities, 1e999 and even a bare `nan` in a JSON column without a word;
    a shard changed after its job wrote it would bring them into the joined run (and `nan` in a
    run's settings raised on reading). Refused in one line naming the file, table and column, and
    nothing is written."""
    paths = []
    for i in range(2):
        db = project / f"s{i}.duckdb"
        code, output = run_cli("--budget", "5usd", "-n", "1", "--shard", f"{i}/2", "--db", str(db))
        assert code == 0, output
        paths.append(db)
    con = duckdb.connect(str(paths[1]))
    con.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = (SELECT min(rowid) FROM {table})", [value])
    assert con.execute(f"SELECT count(*) FROM {table} WHERE {column}::VARCHAR = ?", [value]).fetchone() == (1,)
    con.close()
    code, output = run_cli("merge", str(paths[0]), str(paths[1]), "--out", str(project / "joined.duckdb"))
    assert code == 2, output
    line = one_line_error(output)
    assert str(paths[1]) in line and f"{table}.{column}" in line and says in line, line
    assert not (project / "joined.duckdb").exists() or runs_in(project / "joined.duckdb") == []


# --- a crafted database ------------------------------------------------------------------------

def test_a_crafted_run_id_never_names_a_file_outside_the_reports_folder(run_cli, project, one_run):
    con = duckdb.connect(str(one_run))
    (run_id,) = con.execute("SELECT run_id FROM runs").fetchone()
    for table in ("runs", "conversations", "turns", "findings", "checks", "model_calls"):
        con.execute(f"UPDATE {table} SET run_id = '../../escaped' WHERE run_id = ?", [run_id])
    con.close()
    code, output = run_cli("report", "../../escaped")
    assert code == 2
    assert "did not write" in one_line_error(output)
    assert not (project / "escaped.html").exists() and not (project.parent / "escaped.html").exists()
    code, output = run_cli("dashboard", "--db", str(one_run))     # nor does it become a link
    assert code == 2 and "holds a run id '../../escaped' that simrun did not write" in one_line_error(output)


def _craft(db: Path, table: str, column: str, value: str) -> str:
    """Put `value` in `column` of one row of `table`; the conversation it belongs to."""
    con = duckdb.connect(str(db))
    try:
        (rowid, cid), = con.execute(f"SELECT rowid, conversation_id FROM {table} WHERE conversation_id = "
                                    f"(SELECT min(conversation_id) FROM {table}) ORDER BY rowid LIMIT 1").fetchall()
        con.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", [value, rowid])
        return cid
    finally:
        con.close()


@pytest.mark.parametrize("table, column, says", [("turns", "result", "turn 1's result"),
                                                 ("turns", "state", "turn 1's state"),
                                                 ("conversations", "final_state", "final_state"),
                                                 ("conversations", "audit", "audit")])
def test_a_json_column_holding_no_json_is_one_line_naming_it(run_cli, project, one_run, table, column, says):
    """DuckDB takes a bare `nan` (and more that no JSON reader reads) into a JSON column: every
    command that reads the transcript says where, in one line, where it had raised a
    JSONDecodeError traceback (show, rescore, export)."""
    cid = _craft(one_run, table, column, "nan")
    for command in (("show", "latest", cid), ("rescore", "latest"), ("export", "latest", "--out", "b.json")):
        code, output = run_cli(*command)
        line = one_line_error(output)
        assert code == 2, output
        assert f"conversation {cid!r}: {says} holds text that is not JSON" in line, line
        assert "simrun.duckdb" in line and "Traceback" not in output and "JSONDecodeError" not in output


def test_a_run_holding_nan_is_not_exported_into_a_bundle_import_refuses(run_cli, project, one_run):
    """A store written before the store's encoder refused NaN (or a crafted one) may hold it: the
    bundle would be one `simrun import` refuses; said at export, naming the item and field."""
    cid = _craft(one_run, "turns", "result", '{"reply": "hi", "score": NaN}')
    code, output = run_cli("export", "latest", "--out", "b.json")
    line = one_line_error(output)
    assert code == 2 and f"({cid!r}).record.turns.0.result.score" in line and "the number nan" in line, line
    assert not (project / "b.json").exists()


def test_a_database_with_a_view_that_reads_files_is_not_read(run_cli, project, one_run, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-77\n")
    con = duckdb.connect(str(one_run))
    con.execute("ALTER TABLE runs RENAME TO runs_data")
    con.execute(f"CREATE VIEW runs AS SELECT r.* REPLACE (t.content AS runtime) FROM runs_data r, "
                f"read_text('{secret}') t")
    con.close()
    for command in (["runs"], ["report", "latest"], ["show", "latest"], ["dashboard", "--db", str(one_run)]):
        code, output = run_cli(*command)
        assert code == 2, (command, output)
        assert "views or macros simrun never writes (runs)" in one_line_error(output)
        assert "TOP-SECRET" not in output


# --- simrun import -----------------------------------------------------------------------------

@pytest.fixture()
def bundle(after, project) -> dict:
    """A finished demo run (one repetition), and its bundle in project/b.json."""
    runs = after(("--budget", "5usd", "-n", "1"), ("export", "latest", "--out", "b.json"))
    assert all(r.exit_code == 0 for r in runs), [r.output for r in runs]
    return json.loads((project / "b.json").read_text())


def test_import_recomputes_the_dataset_hash_and_never_trusts_the_bundle(run_cli, project, bundle):
    bundle["dataset_hash"] = "0000000000000000"
    (project / "claims.json").write_text(json.dumps(bundle))
    code, output = run_cli("import", "claims.json")
    assert code == 0, output
    current = load_dataset(project / "personas", project / "goals").hash
    assert runs_in(project / "simrun.duckdb")[-1][1] == current
    assert "0000000000000000" in output                         # and says what it set aside


def _first_turn(b: dict) -> dict:
    return b["items"][0]["record"]["turns"][0]


MALFORMED = {
    "a bad date": (lambda b: b["items"][0]["record"].__setitem__("started_at", "2026-13-45T99:00:00"),
                   "record.started_at"),
    "a wrong type": (lambda b: b["items"][0].__setitem__("repetition", "twice"), "repetition"),
    "a turn result off the protocol": (lambda b: _first_turn(b)["result"].__setitem__("next_steps", "o-1"),
                                       "not a protocol 1 answer: next_steps"),
    "a store off the protocol": (lambda b: _first_turn(b)["state"].__setitem__("events", {"e": 1}),
                                 "record.turns.1.state"),
    "a negative cost": (lambda b: b["items"][0]["record"].__setitem__("cost_usd", -5), "cost_usd"),
    # Numbers past what the store's columns keep: each failed the import's write with DuckDB's
    # "transaction is aborted", or cost a conversation recorded as the runtime's fault.
    "a repetition past the store's": (lambda b: b["items"][0].__setitem__("repetition", 10**12), "repetition"),
    "a cost past the store's": (lambda b: b["items"][0]["record"].__setitem__("cost_usd", 1e300), "cost_usd"),
    "a seed past BIGINT": (lambda b: b["items"][0].__setitem__("seed", 2**63), "seed"),
    "a turn index past INTEGER": (lambda b: _first_turn(b).__setitem__("index", 2**31), "turns.0.index"),
    "a run's repetitions past the bound": (lambda b: b["run"].__setitem__("repetitions", 10**12), "run.repetitions"),
    "a run's seed past BIGINT": (lambda b: b["run"].__setitem__("seed", -2**63 - 1), "run.seed"),
    "an infinite duration": (lambda b: b["items"][0]["record"].__setitem__("duration_ms", 1e999), "duration_ms"),
    "a negative latency": (lambda b: _first_turn(b).__setitem__("latency_ms", -1.0), "latency_ms"),
    # What a live answer cannot bring in (each is refused as it is read), in any field of a
    # bundle: imported, `Infinity` was kept in a JSON column, which is not JSON.
    "an infinity in a user turn's meta": (lambda b: _first_turn(b)["user"]["meta"].__setitem__("x", math.inf),
                                          "turns.0.user.meta.x): not storable: the number inf"),
    "a NaN in a store": (lambda b: _first_turn(b)["state"].__setitem__("extra", math.nan),
                         "turns.0.state.extra): not storable: the number nan"),
    "a NUL in a reply": (lambda b: _first_turn(b)["result"].__setitem__("reply", "a\x00b"),
                         "turns.0.result.reply): not storable: a NUL character"),
    "a NUL in a prompt": (lambda b: b["items"][0].__setitem__("prompt", "a\x00b"), "prompt): not storable"),
    "an integer past the bound in an audit": (
        lambda b: b["items"][0]["record"]["audit"][0].__setitem__("extra", 10 ** 1200),
        "record.audit.0.extra): not storable: an integer of more than 1000 digits"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_bundle_is_one_line_and_leaves_no_run(run_cli, project, bundle, name):
    mutate, says = MALFORMED[name]
    mutate(bundle)
    (project / "bad.json").write_text(json.dumps(bundle))
    before = runs_in(project / "simrun.duckdb")
    code, output = run_cli("import", "bad.json")
    assert code == 2
    assert says in one_line_error(output)
    assert runs_in(project / "simrun.duckdb") == before


@pytest.mark.parametrize("content, says", [
    (b'{"format_version": 1, "items": [\xff]}', "not UTF-8 text"),
    (b'{"format_version": 1, "items": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deep"),
    (b"[1, 2", "not valid JSON"),
])
def test_a_bundle_that_is_not_json_of_the_right_kind_is_one_line(run_cli, project, one_run, content, says):
    (project / "bad.json").write_bytes(content)
    before = runs_in(one_run)
    code, output = run_cli("import", "bad.json")
    assert code == 2
    assert says in one_line_error(output)
    assert runs_in(one_run) == before


# --- a full disk -------------------------------------------------------------------------------

def test_a_full_disk_says_so_not_a_secondary_rollback_error(run_cli, project):
    db = project / "simrun.duckdb"
    Store(db).close()                         # the schema, then every further write fails
    os.symlink("/dev/full", f"{db}.wal")
    code, output = run_cli("--budget", "5usd", "-n", "1")
    assert code == 2
    line = one_line_error(output.strip().splitlines()[-1])
    assert "No space left on device" in line
    assert "rollback" not in output.lower() and "no transaction" not in output
