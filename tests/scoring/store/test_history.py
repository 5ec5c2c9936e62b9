"""History: finished runs kept beyond the job that ran them, one file each, in a folder or a
bucket (moto's S3 server, started for real on 127.0.0.1), read back by `simrun runs --history`,
`simrun dashboard --history` and `simrun gate --history` as a database is read."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import duckdb
import pytest

from simrun._errors import StoreError
from simrun.scoring.store import Store, history_store, keep_run
from simrun.scoring.store import _history as H
from tests.conftest import run_cli_in
from tests.fixtures.s3_server import s3_server

pytestmark = pytest.mark.xdist_group("history")

SECRET = "history-secret-key-0000000000"


def a_checkout(root: Path, name: str, *labels: str) -> tuple[Path, str]:
    """A fresh folder, as a CI job's checkout: one run of the demo in its own database."""
    folder = root / name
    folder.mkdir()
    flags = [flag for label in labels for flag in ("--label", label)]
    code, output = run_cli_in(folder, "--budget", "5usd", "-n", "1", *flags)
    assert code in (0, 1), output
    return folder, re.search(r"run: (r[\w-]+)", output).group(1)


@pytest.fixture(scope="module")
def checkouts(tmp_path_factory) -> list[tuple[Path, str]]:
    """Three runs of main, each in a checkout of its own (its database dies with it)."""
    root = tmp_path_factory.mktemp("jobs")
    return [a_checkout(root, f"job{i}", "branch:main") for i in range(3)]


def kept_in(history: str, checkouts) -> None:
    for folder, run in checkouts:
        code, output = run_cli_in(folder, "history", "keep", "latest", "--history", history)
        assert code == 0, output
        assert f"kept run {run}" in output
    # Kept whole, never overwritten: keeping the same run again is refused, and the file stays.
    folder, run = checkouts[0]
    code, output = run_cli_in(folder, "history", "keep", run, "--history", history)
    assert code == 2 and "never overwritten" in output


def listed_and_drawn(history: str, checkouts, where: Path) -> None:
    code, output = run_cli_in(where, "runs", "--history", history)
    assert code == 0, output
    assert [line.split()[0] for line in output.splitlines() if line.startswith("r2")] == \
        [run for _, run in reversed(checkouts)]
    assert output.count("branch:main") == 3
    code, output = run_cli_in(where, "dashboard", "--history", history, "--out", "board/index.html")
    assert code == 0, output
    page = (where / "board/index.html").read_text()
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    assert [r["id"] for r in data["runs"]] == [run for _, run in checkouts]
    # Each run after the first is judged against the one before it on main.
    assert [r.get("verdict") for r in data["runs"]] == [None, "passed", "passed"]


def test_three_checkouts_keep_their_runs_in_one_folder(checkouts, tmp_path):
    history = str(tmp_path / "history")
    kept_in(history, checkouts)
    assert sorted(p.name for p in Path(history).iterdir()) == sorted(f"{run}.duckdb" for _, run in checkouts)
    listed_and_drawn(history, checkouts, tmp_path)


def test_three_checkouts_keep_their_runs_in_a_bucket(checkouts, tmp_path, monkeypatch):
    import boto3

    with s3_server() as endpoint:
        # The standard environment, as the workflow's secrets and variables set it.
        for key, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1",
                           "AWS_ENDPOINT_URL": endpoint}.items():
            monkeypatch.setenv(key, value)
        boto3.client("s3").create_bucket(Bucket="team-history")
        kept_in("s3://team-history/simrun", checkouts)
        names = [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket="team-history")["Contents"]]
        assert sorted(names) == sorted(f"simrun/{run}.duckdb" for _, run in checkouts)
        listed_and_drawn("s3://team-history/simrun", checkouts, tmp_path)
        # A bucket that is not there: one line naming it, and never the credentials.
        code, output = run_cli_in(tmp_path, "runs", "--history", "s3://no-such-bucket/simrun")
        assert code == 2 and "cannot list the history s3://no-such-bucket/simrun" in output
        assert SECRET not in output


def test_a_pull_request_is_gated_against_main_in_the_history_and_before_any_says_why_not(checkouts, tmp_path):
    history = tmp_path / "history"
    pr, run = a_checkout(tmp_path, "pr", "pr:12", "base:main")
    code, output = run_cli_in(pr, "gate", "--candidate", "latest", "--history", str(history.with_name("none")))
    assert code == 2 and "no such history folder" in output
    history.mkdir()
    code, output = run_cli_in(pr, "gate", "--candidate", "latest", "--history", str(history),
                              "--verdict-json", "v.json")
    # No run of main yet: not gated, says why, and judged on the absolute criteria alone.
    assert "not gated: the history" in output and "no finished run of main" in output
    assert code == json.loads((pr / "v.json").read_text())["exit_code"] == 0
    # Another pull request's run in the history is never the baseline.
    other, other_run = a_checkout(tmp_path, "other-pr", "pr:11", "base:main")
    keep_run(other / "simrun.duckdb", None, str(history))
    code, output = run_cli_in(pr, "gate", "--candidate", "latest", "--history", str(history))
    assert "not gated" in output
    folder, main_run = checkouts[-1]
    keep_run(folder / "simrun.duckdb", None, str(history))
    code, output = run_cli_in(pr, "gate", "--candidate", "latest", "--history", str(history),
                              "--verdict-json", "v.json")
    assert code == 0 and f"gated against run {main_run}, the newest of main" in output, output
    # The verdict names its baseline by its place in the history, never by a temporary copy.
    named = f"run {main_run} of the history {history}"
    assert json.loads((pr / "v.json").read_text())["baseline"] == named, (pr / "v.json").read_text()
    assert tempfile.gettempdir() + "/simrun-" not in output


def test_the_dashboard_compares_a_pull_request_with_main_never_another_branch(checkouts, tmp_path):
    history = tmp_path / "history"
    for folder, _ in checkouts[:1]:
        keep_run(folder / "simrun.duckdb", None, str(history))
    first, _ = a_checkout(tmp_path, "pr1", "pr:1", "base:main")
    second, _ = a_checkout(tmp_path, "pr2", "pr:2", "base:main")
    for folder in (first, second):
        keep_run(folder / "simrun.duckdb", None, str(history))
    code, output = run_cli_in(tmp_path, "dashboard", "--history", str(history), "--out", "b/index.html")
    assert code == 0, output
    page = (tmp_path / "b/index.html").read_text()
    rows = page.split('<tr data-run="')[1:]
    against = {re.search(r"(r\d{8}-\d{6}-\w{6})", row).group(1): re.search(r"vs (r[\w-]+)", row).group(1)
               for row in rows if "vs r" in row}
    main_run = checkouts[0][1]
    assert set(against.values()) == {main_run} and len(against) == 2


# --- history files are untrusted input --------------------------------------------------------------

@pytest.fixture
def one_kept(checkouts, tmp_path) -> Path:
    history = tmp_path / "history"
    keep_run(checkouts[0][0] / "simrun.duckdb", None, str(history))
    return history


def test_a_file_that_is_not_a_run_simrun_kept_is_refused_naming_it(one_kept, checkouts):
    name = "r20260101-000000-abcdef.duckdb"
    (one_kept / name).write_bytes(b"not a database")
    with pytest.raises(StoreError, match=rf"{name}: cannot open the database"):
        with history_store(str(one_kept)):
            pass
    # A store holding two runs, under one run's name.
    (one_kept / name).unlink()
    two = one_kept.parent / "two.duckdb"
    shutil.copy(checkouts[1][0] / "simrun.duckdb", two)
    with Store(two) as store, Store(checkouts[2][0] / "simrun.duckdb", create=False) as other:
        row = other.run(None)
        store.create_run("r20260101-000000-abcdef", config={}, dataset_hash=row["dataset_hash"], dataset={},
                         scorer_version="x", simrun_version="x", user_backend="x", runtime="x", seed=1,
                         repetitions=1, budget_usd=0)
    shutil.copy(two, one_kept / name)
    with pytest.raises(StoreError, match=rf"{name}: a history file holds the one run its name says"):
        with history_store(str(one_kept)):
            pass


def test_a_crafted_catalog_a_link_a_bad_name_and_an_oversized_file_are_refused(one_kept, tmp_path, monkeypatch):
    crafted = tmp_path / "crafted.duckdb"
    con = duckdb.connect(str(crafted))
    con.execute("CREATE VIEW runs AS SELECT 1 AS run_id")
    con.close()
    name = "r20260101-000000-abcdef.duckdb"
    shutil.copy(crafted, one_kept / name)
    with pytest.raises(StoreError, match="crafted"):
        with history_store(str(one_kept)):
            pass
    (one_kept / name).unlink()
    # A link is not a run simrun kept: it is passed over, whatever it points at.
    os.symlink("/etc/passwd", one_kept / name)
    with history_store(str(one_kept)) as store:
        assert len(store.runs()) == 1
    (one_kept / name).unlink()
    (one_kept / "../../etc.duckdb".replace("/", "_")).write_bytes(b"x")
    with pytest.raises(StoreError, match="not a name simrun gives a history file"):
        with history_store(str(one_kept)):
            pass
    (one_kept / ".._.._etc.duckdb").unlink()
    monkeypatch.setattr(H, "MAX_HISTORY_FILE_BYTES", 1000)
    with pytest.raises(StoreError, match="larger than a history file may be"):
        with history_store(str(one_kept)):
            pass


def test_only_a_finished_whole_run_is_kept_and_one_no_history_could_read_back_is_not(tmp_path, checkouts,
                                                                                     monkeypatch):
    with pytest.raises(StoreError, match="no run 'r20260101-000000-abcdef'"):
        keep_run(checkouts[0][0] / "simrun.duckdb", "r20260101-000000-abcdef", str(tmp_path / "h"))
    monkeypatch.setattr(H, "MAX_HISTORY_FILE_BYTES", 1000)
    with pytest.raises(StoreError, match="more than a history file may"):
        keep_run(checkouts[0][0] / "simrun.duckdb", None, str(tmp_path / "h"))
    assert not (tmp_path / "h").exists()


def test_an_object_store_without_the_extra_names_it(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_obstore(name, *args, **kwargs):
        if name.startswith("obstore"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_obstore)
    from simrun._errors import ConfigError
    with pytest.raises(ConfigError, match=r"pip install 'simrun\[history\]'"):
        H._object_store("s3://bucket/prefix")


def test_run_history_of_simrun_toml_is_where_history_keep_keeps_a_run(checkouts, tmp_path):
    folder, run = checkouts[1]
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(folder / "simrun.duckdb", project / "simrun.duckdb")
    (project / "simrun.toml").write_text('[run]\nhistory = "kept"\n')
    code, output = run_cli_in(project, "history", "keep")
    assert code == 0, output
    assert (project / "kept" / f"{run}.duckdb").is_file()
    (project / "simrun.toml").write_text("[run]\n")
    code, output = run_cli_in(project, "history", "keep")
    assert code == 2 and "--history" in output and "run.history" in output


def test_with_run_history_set_simrun_keeps_each_finished_run_itself_and_a_shard_never(tmp_path):
    """run.history in simrun.toml: every finished run is kept there by `simrun` itself, once, one
    file each; a shard is kept once merged, and a run of a history that cannot take it is still
    judged and stored, with a line saying why it was not kept."""
    from tests.conftest import demo_project

    project = demo_project(tmp_path / "team")
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace("[run]\n", '[run]\nhistory = "kept"\n', 1))
    code, output = run_cli_in(project, "-n", "1")
    assert code == 0, output
    run = re.search(r"run: (r[\w-]+)", output).group(1)
    assert f"history: run {run} kept -> " in output
    assert sorted(p.name for p in (project / "kept").iterdir()) == [f"{run}.duckdb"]
    code, listed = run_cli_in(project, "runs", "--history", "kept")
    assert code == 0 and run in listed, listed
    code, output = run_cli_in(project, "-n", "1", "--shard", "0/2", "--db", "shard0.duckdb")
    assert code in (0, 1), output
    assert "history:" not in output and len(list((project / "kept").iterdir())) == 1
    (project / "kept").rename(project / "elsewhere")
    (project / "kept").write_text("a file, not a folder")
    code, output = run_cli_in(project, "-n", "1")
    assert code == 0, output                          # the run stands; only keeping it failed
    assert re.search(r"history: run r[\w-]+ not kept in .*kept: ", output), output
