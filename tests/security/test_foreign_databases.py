"""A DuckDB file from elsewhere runs nothing before it is checked (the security model's first
rule for databases): every command that reads one (`runs`, `show`, `report`, `dashboard`,
`merge`, `gate --baseline RUN`) refuses a file whose catalog is not simrun's, in one line that
never quotes what the file holds or what a view in it could read."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from simrun._errors import StoreError
from simrun.scoring.store._database import Store
from tests.security.conftest import SECRET, one_line_error

# Each way of planting something simrun never writes, as the SQL that plants it ({secret}: the
# path of a local file a view or macro would read).
CRAFTS = {
    "migrations view": [   # the setup query itself reads the view
        "ALTER TABLE schema_migrations RENAME TO sm",
        "CREATE VIEW schema_migrations AS SELECT CAST(content AS INTEGER) AS version, 'x' AS name, "
        "now() AS applied_at FROM read_text('{secret}')"],
    "column view": ["ALTER TABLE runs RENAME TO r0",
                    "CREATE VIEW runs AS SELECT r.* REPLACE (t.content AS labels) FROM r0 r, read_text('{secret}') t"],
    "macro": ["CREATE MACRO leak() AS TABLE SELECT content FROM read_text('{secret}')"],
    "generated column": ["CREATE TABLE extra (a VARCHAR, b VARCHAR GENERATED ALWAYS AS (upper(a)))"],
    "unknown table": ["CREATE TABLE notes AS SELECT 1 AS n"],
    "unknown column": ["ALTER TABLE runs ADD COLUMN note VARCHAR"],
    "changed default": ["ALTER TABLE model_calls ALTER COLUMN cache_write_tokens SET DEFAULT 7"],
    "check constraint": ["CREATE TABLE gate_verdicts2 (k VARCHAR CHECK (length(k) > 0))"],
    "sequence": ["CREATE SEQUENCE counter"],
    "schema": ["CREATE SCHEMA other"],
    "type": ["CREATE TYPE mood AS ENUM ('a', 'b')"],
}


def _craft(db: Path, secret_file: Path, how: str) -> None:
    con = duckdb.connect(str(db))
    try:
        for sql in CRAFTS[how]:
            con.execute(sql.replace("{secret}", str(secret_file)))
    finally:
        con.close()


@pytest.mark.parametrize("how", CRAFTS)
def test_the_store_refuses_any_object_simrun_never_writes(tmp_path, secret_file, how):
    db = tmp_path / "crafted.duckdb"
    Store(db).close()                     # simrun's own schema, every migration applied
    _craft(db, secret_file, how)
    for read_only in (True, False):
        with pytest.raises(StoreError) as raised:
            Store(db, read_only=read_only, create=False)
        assert SECRET not in str(raised.value) and "crafted" in str(raised.value)


@pytest.mark.parametrize("how", ["migrations view", "macro"])
def test_a_crafted_write_ahead_log_beside_a_new_file_is_checked_too(tmp_path, secret_file, how):
    """A new file is not checked (it holds nothing), but a file whose name has a write-ahead log
    beside it is not new: the log could hold what a crafted file held."""
    db = tmp_path / "crafted.duckdb"
    con = duckdb.connect(str(db))
    con.execute("PRAGMA disable_checkpoint_on_shutdown")        # keep the log: nothing checkpointed
    con.execute("SET wal_autocheckpoint = '1TB'")
    for sql in CRAFTS[how] if how != "migrations view" else CRAFTS[how][1:]:
        con.execute(sql.replace("{secret}", str(secret_file)))
    con.close()
    target = tmp_path / "new.duckdb"
    Path(f"{db}.wal").rename(f"{target}.wal")
    try:
        with Store(target) as store:       # DuckDB may drop a log that is not its file's...
            assert store.con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone() == (0,)
            assert SECRET not in str(store.con.execute("SELECT * FROM schema_migrations").fetchall())
    except StoreError as raised:            # ...or replay it, and then the check refuses it
        assert SECRET not in str(raised) and "crafted" in str(raised)


def test_a_store_of_simrun_s_own_opens_and_its_queries_reach_no_file(tmp_path, secret_file):
    with Store(tmp_path / "own.duckdb") as store:
        with pytest.raises(duckdb.Error) as raised:
            store.con.execute(f"SELECT * FROM read_text('{secret_file}')").fetchall()
        assert SECRET not in str(raised.value)
        with pytest.raises(duckdb.Error):          # and nothing can turn it back on
            store.con.execute("SET enable_external_access = true")


@pytest.mark.parametrize("how", ["migrations view", "column view", "generated column", "unknown column"])
def test_no_command_that_reads_a_foreign_store_runs_or_quotes_it(run_cli, project, secret_file, how):
    code, output = run_cli("--budget", "5usd", "-n", "1")
    assert code == 0, output
    db = project / "simrun.duckdb"
    run_id = duckdb.connect(str(db), read_only=True).execute("SELECT run_id FROM runs").fetchone()[0]
    _craft(db, secret_file, how)
    shutil.copy(db, project / "shard.duckdb")
    commands = [["runs"], ["show", "latest"], ["report", "latest"], ["dashboard", "--db", str(db)],
                ["merge", str(project / "shard.duckdb"), "--out", str(project / "joined.duckdb")],
                ["gate", "--baseline", run_id, "--candidate", run_id, "--db", str(db)]]
    for command in commands:
        code, output = run_cli(*command)
        assert code == 2, (command, output)
        assert SECRET not in output, (command, output)
        assert "crafted" in one_line_error(output), (command, output)
    assert not (project / "joined.duckdb").exists()


def test_duckdb_s_quoted_values_never_reach_an_error_line(tmp_path):
    from simrun.scoring.store._duck import reason

    con = duckdb.connect()
    for sql in (f"SELECT CAST('{SECRET}' AS INTEGER)", f"SELECT '{SECRET}'::JSON->>'a'",
                f"SELECT CAST('\"{SECRET}' AS DATE)"):
        with pytest.raises(duckdb.Error) as raised:
            con.execute(sql).fetchall()
        assert SECRET in str(raised.value)      # DuckDB quotes it...
        assert SECRET not in reason(raised.value) and reason(raised.value)   # ...simrun does not
