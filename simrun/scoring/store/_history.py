"""History: finished runs kept beyond the machine that ran them, one file per run.

A CI job's database dies with its runner. `simrun history keep` copies one finished run into
its own DuckDB file, `<run id>.duckdb`, and puts it in a history: a folder, or an object store
named by a URL (`s3://bucket/prefix`, and whatever obstore reaches besides: `gs://`, `az://`,
`https://`). Each file is written whole (a temporary file moved into place, or one PUT) and
never overwritten: a second keep of the same run is refused by the store itself (a link that
fails on an existing name; a conditional PUT, `If-None-Match: *`).

Reading a history (`history_store`) gives one Store, as a database would: every file is
fetched into a temporary folder, bounded in size and number, opened as any store from elsewhere
is (`_catalog.py`: external access off, a crafted catalog refused, every JSON value held to the
store's rule), must hold exactly the one run its name says, and is copied into one temporary
database that `simrun runs`, `simrun dashboard` and `simrun gate` read.

Credentials and endpoint come from the standard environment of each store (for S3:
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL);
they are never written anywhere. obstore is the optional extra `simrun[history]`.

A run's line is the branch it tested: `branch:NAME` among its labels (the generated workflow
sets it), else the git branch it ran on. A pull request's run (`pr:N`) is compared with the
line it would merge into (`base:NAME`, else main), never with another pull request's runs.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb

from simrun._errors import ConfigError, StoreError
from simrun._secrets import cut, register
from simrun._writing import write_file
from simrun.scoring.store._database import Store, reading
from simrun.scoring.store._duck import first_unstorable, reason, transaction
from simrun.scoring.store._rows import labels_of
from simrun.scoring.store._run_ids import RUN_ID

# A history file is one run; a bundle is bounded at 1 GiB, and so is one run's file here.
MAX_HISTORY_FILE_BYTES = 1 << 30
# Files read into one database at most: a daily main for ten years, with room to spare.
MAX_HISTORY_RUNS = 5000
TABLES = ("runs", "conversations", "turns", "findings", "checks", "model_calls", "goal_problems")
SUFFIX = ".duckdb"
EXTRA = "pip install 'simrun[history]'"
DEFAULT_LINE = "main"
# The credentials the object stores read from the environment (S3, GCS, Azure).
SECRET_VARIABLES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID", "GOOGLE_SERVICE_ACCOUNT_KEY",
                    "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_KEY", "AZURE_STORAGE_TOKEN")


# --- lines: which runs a run is compared with ----------------------------------------------------

def _label(labels: Sequence[str], key: str) -> str | None:
    return next((label[len(key) + 1:] for label in labels if label.startswith(f"{key}:") and label[len(key) + 1:]),
                None)


def line_of(labels: Sequence[str], git_branch: str | None) -> str | None:
    """The line a run belongs to: `pr:N` for a pull request's run, else its branch
    (`branch:NAME` label, else the git branch it ran on), else None."""
    pr = _label(labels, "pr")
    if pr is not None:
        return f"pr:{pr}"
    return _label(labels, "branch") or git_branch or None


def compared_line(labels: Sequence[str], git_branch: str | None) -> str | None:
    """The line whose runs this run is compared with: a pull request's base (`base:NAME`, else
    main), else its own line."""
    if _label(labels, "pr") is not None:
        return _label(labels, "base") or DEFAULT_LINE
    return line_of(labels, git_branch)


def newest_of_line(store: Store, line: str, *, before: Any = None) -> str | None:
    """The newest finished, unsharded run of `line` (started before `before`, if given)."""
    rows = store.con.execute("SELECT run_id, labels, git_branch, started_at FROM runs "
                             "WHERE status = 'finished' AND shard IS NULL ORDER BY started_at DESC").fetchall()
    for run_id, labels, branch, started in rows:
        if before is not None and started >= before:
            continue
        if line_of(labels_of(labels), branch) == line:
            return str(run_id)
    return None


# --- where a history is --------------------------------------------------------------------------

def is_url(location: str) -> bool:
    return "://" in location and not location.startswith("file://")


def _folder(location: str) -> Path:
    return Path(location.removeprefix("file://"))


def _object_store(location: str) -> Any:
    try:
        from obstore.store import from_url
    except ImportError:
        raise ConfigError(f"the history {location} is in an object store, which needs obstore: {EXTRA}",
                          field="history") from None
    # The store reads its credentials from the environment itself; any error line that quotes one
    # must not carry it to the console.
    for name in SECRET_VARIABLES:
        register(os.environ.get(name))
    # An endpoint the team set to plain http (a MinIO or moto on its own network) is meant: allow it.
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
    try:
        if endpoint.startswith("http://"):
            return from_url(location, client_options={"allow_http": True})
        return from_url(location)
    except Exception as exc:     # obstore's errors are its own classes; each is one line here
        raise ConfigError(f"cannot open the history {location}: {_why(exc)}", field="history") from None


def _hint(location: str) -> str:
    """What to set, when an S3 history is reached with no credentials in the environment (the
    store then asks the machine's metadata service, which a CI runner does not have)."""
    if location.startswith(("s3://", "s3a://")) and not (os.environ.get("AWS_ACCESS_KEY_ID")
                                                          or os.environ.get("AWS_PROFILE")
                                                          or os.environ.get("AWS_WEB_IDENTITY_TOKEN_FILE")):
        return ("; no AWS_ACCESS_KEY_ID in the environment: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                "(and AWS_ENDPOINT_URL for a store of your own)")
    return ""


def _why(exc: BaseException) -> str:
    # Through the one door: a store's error may quote a request, and so a credential.
    return cut(" ".join(str(exc).split()), 300) or type(exc).__name__


# --- keeping a run -------------------------------------------------------------------------------

def keep_run(database: str | Path, run: str | None, location: str) -> tuple[str, str]:
    """Copy a finished run of `database` into its own file in the history at `location`;
    return (run id, where it was written). A run already there is refused, never overwritten."""
    with reading(database) as store:
        row = store.run(run)
    run_id = row["run_id"]
    if row["status"] != "finished":
        raise StoreError(f"run {run_id} is {row['status']}, not finished; only a finished run is kept in history")
    if row["shard"]:
        raise StoreError(f"run {run_id} is shard {row['shard']}; merge the shards (`simrun merge`) and keep the "
                         "merged run")
    name = f"{run_id}{SUFFIX}"
    with tempfile.TemporaryDirectory(prefix="simrun-history-") as folder:
        single = Path(folder) / name
        _copy_runs(single, [(Path(database), run_id)])
        if single.stat().st_size > MAX_HISTORY_FILE_BYTES:
            raise StoreError(f"run {run_id} takes {single.stat().st_size} bytes, more than a history file may "
                             f"({MAX_HISTORY_FILE_BYTES}), so no history could read it back; it is not kept")
        data = single.read_bytes()
    if is_url(location):
        import obstore

        where = f"{location.rstrip('/')}/{name}"
        try:
            obstore.put(_object_store(location), name, data, mode="create")
        except Exception as exc:
            if type(exc).__name__ == "AlreadyExistsError":
                raise StoreError(f"{where}: run {run_id} is in the history already; a kept run is never "
                                 "overwritten") from None
            raise StoreError(f"cannot write {where}: {_why(exc)}{_hint(location)}") from None
        return run_id, where
    path = _folder(location) / name
    if os.path.lexists(path):
        raise StoreError(f"{path}: run {run_id} is in the history already; a kept run is never overwritten")
    write_file(path, data, what="the history file", root=_folder(location), make_folders=True, overwrite=False)
    return run_id, str(path)


def _copy_runs(out: Path, sources: list[tuple[Path, str]]) -> None:
    """A new database at `out` holding the given run of each file, copied table by table (the
    columns both have: an older file lacks the newest ones)."""
    with Store(out, attach=tuple(p for p, _ in sources)) as store:
        con = store.con
        try:
            with transaction(con):
                for n, (path, run_id) in enumerate(sources):
                    # A parameter, never the path pasted into SQL: a file name may hold a quote.
                    con.execute(f"ATTACH ? AS src{n} (READ_ONLY)", [str(path)])
                    try:
                        for table in TABLES:
                            theirs = {c[0] for c in con.execute(f"DESCRIBE src{n}.{table}").fetchall()} \
                                if _has_table(con, f"src{n}", table) else set()
                            if not theirs:
                                continue
                            columns = [c[0] for c in con.execute(f"DESCRIBE {table}").fetchall() if c[0] in theirs]
                            names = ", ".join(columns)
                            con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM src{n}.{table} "
                                        "WHERE run_id = ?", [run_id])
                    finally:
                        con.execute(f"DETACH DATABASE IF EXISTS src{n}")
        except duckdb.Error as exc:
            raise StoreError(f"cannot copy the runs into {out}: {reason(exc)}") from None


def _has_table(con: duckdb.DuckDBPyConnection, database: str, table: str) -> bool:
    return bool(con.execute("SELECT 1 FROM duckdb_tables() WHERE database_name = ? AND table_name = ?",
                            [database, table]).fetchone())


# --- reading a history ---------------------------------------------------------------------------

def _listing(location: str) -> list[tuple[str, int]]:
    """(name, size) of each history file, in name order (a run id is its start time)."""
    if is_url(location):
        import obstore

        store = _object_store(location)
        found: list[tuple[str, int]] = []
        try:
            for batch in obstore.list(store):
                for meta in batch:
                    name = str(meta["path"])
                    if "/" not in name and name.endswith(SUFFIX):
                        found.append((name, int(meta["size"])))
                    if len(found) > MAX_HISTORY_RUNS:
                        break
        except Exception as exc:
            raise StoreError(f"cannot list the history {location}: {_why(exc)}{_hint(location)}") from None
        return sorted(found)
    folder = _folder(location)
    if not folder.is_dir():
        raise StoreError(f"{folder}: no such history folder; `simrun history keep` creates it with the first run "
                         "it keeps")
    found = []
    for entry in os.scandir(folder):
        # A link is not a run simrun kept: it could point anywhere on the machine.
        if entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False):
            found.append((entry.name, entry.stat(follow_symlinks=False).st_size))
        if len(found) > MAX_HISTORY_RUNS:
            break
    return sorted(found)


def _fetch(location: str, name: str, size: int, target: Path) -> None:
    """The file, copied into `target`, refused past the bound before and while it is read."""
    where = f"{location.rstrip('/')}/{name}"
    if size > MAX_HISTORY_FILE_BYTES:
        raise StoreError(f"{where}: {size} bytes is larger than a history file may be "
                         f"({MAX_HISTORY_FILE_BYTES} bytes); remove it from the history")
    got = 0
    with open(target, "xb") as out:
        if is_url(location):
            import obstore

            try:
                for chunk in obstore.get(_object_store(location), name):
                    got += len(chunk)
                    if got > MAX_HISTORY_FILE_BYTES:
                        break
                    out.write(chunk)
            except Exception as exc:
                raise StoreError(f"cannot read {where}: {_why(exc)}{_hint(location)}") from None
        else:
            flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
            with os.fdopen(os.open(_folder(location) / name, flags), "rb") as source:
                while chunk := source.read(1 << 20):
                    got += len(chunk)
                    if got > MAX_HISTORY_FILE_BYTES:
                        break
                    out.write(chunk)
    if got > MAX_HISTORY_FILE_BYTES:
        raise StoreError(f"{where}: larger than a history file may be ({MAX_HISTORY_FILE_BYTES} bytes); "
                         "remove it from the history")


def _checked(path: Path, where: str, run_id: str) -> None:
    """The file must be a store simrun wrote, holding exactly the run its name says, every JSON
    value storable: read as any store from elsewhere is."""
    try:
        with reading(path) as store:
            store.path = where
            ids = [r[0] for r in store.con.execute("SELECT run_id FROM runs").fetchall()]
            if ids != [run_id]:
                raise StoreError(f"{where}: a history file holds the one run its name says ({run_id}); this one "
                                 f"holds {len(ids)} run(s){' of another id' if len(ids) == 1 else ''}")
            found = first_unstorable(store.con, TABLES)
            if found is not None:
                table, column, problem = found
                raise StoreError(f"{where}: {table}.{column} holds {problem}, which a store cannot keep; the file "
                                 "was changed since simrun wrote it")
    except StoreError as exc:
        # Named by where it is kept, never by the temporary copy read here.
        message = str(exc).replace(f"{path}: ", "").replace("Pass another --db", "Remove it from the history")
        raise StoreError(message if message.startswith(where) else f"{where}: {message}") from None


@contextlib.contextmanager
def history_store(location: str) -> Iterator[Store]:
    """Every run kept at `location`, in one temporary database, read as a database is."""
    files = _listing(location)
    if len(files) > MAX_HISTORY_RUNS:
        raise StoreError(f"the history {location} holds more than {MAX_HISTORY_RUNS} runs, more than simrun reads "
                         "at once; move the oldest elsewhere")
    with tempfile.TemporaryDirectory(prefix="simrun-history-") as folder:
        sources: list[tuple[Path, str]] = []
        for n, (name, size) in enumerate(files):
            run_id = name[:-len(SUFFIX)]
            where = f"{location.rstrip('/')}/{name}"
            if not RUN_ID.fullmatch(run_id):
                raise StoreError(f"{where}: not a name simrun gives a history file (<run id>.duckdb, e.g. "
                                 "r20261130-013451-d29928.duckdb); remove it from the history")
            copy = Path(folder) / f"{n}{SUFFIX}"
            _fetch(location, name, size, copy)
            _checked(copy, where, run_id)
            sources.append((copy, run_id))
        combined = Path(folder) / "history.duckdb"
        _copy_runs(combined, sources)
        for path, _ in sources:
            path.unlink()
        with Store(combined) as store:
            store.path = location       # messages name the history the user gave
            yield store
