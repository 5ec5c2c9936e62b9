"""What a run tested: labels, the runtime's version and the git commit and branch, stored on the
run, kept when it is resumed, and never a reason for a run to fail."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from decimal import Decimal

import pytest

from simrun._errors import ConfigError
from simrun._labels import clean_labels
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.store._database import Store
from simrun.simulator import _identity as identity
from simrun.simulator._identity import GitState, git_state, given_labels, runtime_version
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser


class Versioned(TripDesk):
    """TripDesk reporting a version of our choosing in its health answer."""

    def __init__(self, version, **kwargs):
        super().__init__(**kwargs)
        self.version = version

    def health(self):
        return {**super().health(), "version": self.version}


def git(folder, *args):
    subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
                   check=True, capture_output=True)


def test_labels_are_one_line_of_bounded_text_in_the_order_given():
    assert clean_labels([" release-1.4 ", "main", "release-1.4", "<script>x</script>"]) == (
        "release-1.4", "main", "<script>x</script>")
    for bad, says in (("", "empty"), ("   ", "empty"), ("a\nb", "control character"), ("a\tb", "control character"),
                      ("x" * 101, "longer than 100")):
        with pytest.raises(ValueError, match=says):
            clean_labels([bad])
    with pytest.raises(ValueError, match="at most 20"):
        clean_labels([f"l{i}" for i in range(21)])
    with pytest.raises(ConfigError, match=r"^labels: a label cannot be empty"):
        given_labels([""])


@pytest.mark.parametrize("health, version", [
    ({"protocol": 1, "version": "1.4.2"}, "1.4.2"),
    ({"protocol": 1, "version": 3}, "3"),
    ({"protocol": 1, "version": 1.5}, "1.5"),
    ({"protocol": 1, "version": "  1.4\n\x1b[31m build 7 "}, "1.4 [31m build 7"),
    ({"protocol": 1, "version": "v" * 500}, "v" * 100),
    ({"protocol": 1, "version": True}, None),
    ({"protocol": 1, "version": {"major": 1}}, None),
    ({"protocol": 1, "version": ""}, None),
    ({"protocol": 1}, None),
    ("not a dict", None),
])
def test_the_runtime_version_is_bounded_text_or_nothing(health, version):
    assert runtime_version(health) == version


def committed(repo, branch: str, *files: str) -> str:
    """`repo` made a work tree on `branch` with `files` committed (a file `f` if none): its HEAD."""
    repo.mkdir(exist_ok=True)
    git(repo, "init", "-q", "-b", branch)
    for name in files or ("f",):
        if not (repo / name).exists():
            (repo / name).write_text("x")
    git(repo, "add", *(files or ("f",)))
    git(repo, "commit", "-qm", "first")
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_git_gives_the_commit_and_branch_of_a_work_tree(tmp_path):
    repo = tmp_path / "repo"
    head = committed(repo, "release/1.4")
    (repo / "sub").mkdir()
    assert git_state(repo / "sub") == GitState(head, "release/1.4")
    git(repo, "checkout", "-q", "--detach")
    assert git_state(repo) == GitState(head, None)        # a detached HEAD has no branch
    outside = tmp_path / "outside"
    outside.mkdir()
    assert git_state(outside) == GitState()               # not a work tree
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert git_state(empty) == GitState()                 # a work tree with no commit yet


def test_no_git_or_a_hanging_git_is_silently_no_commit(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    assert git_state(".") == GitState()
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\nsleep 30\n")
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setattr(identity, "GIT_TIMEOUT_S", 0.5)
    started = time.monotonic()
    assert git_state(".") == GitState()
    assert time.monotonic() - started < 5


def run(store, demo, version="2.0", **kwargs):
    return asyncio.run(run_matrix(demo, PythonRuntime(Versioned(version)), ScriptedUser(), store, repetitions=1,
                                  seed=1, budget=Decimal(0), **kwargs))


def test_a_run_stores_what_it_tested(demo):
    with Store(":memory:") as store:
        result = run(store, demo, labels=("release-1.4", "<b>x</b>"), git=GitState("a" * 40, "main"))
        stored = store.run(result.run_id)
        assert (stored["labels"], stored["runtime_version"], stored["git_commit"], stored["git_branch"]) == (
            ["release-1.4", "<b>x</b>"], "2.0", "a" * 40, "main")
        listed = store.runs()[0]
        assert (listed["labels"], listed["runtime_version"], listed["git_commit"]) == (
            ["release-1.4", "<b>x</b>"], "2.0", "a" * 40)


def test_resuming_keeps_the_identity_and_labels_do_not_change_what_run_it_is(demo):
    with Store(":memory:") as store:
        first = run(store, demo, labels=("release-1.4",), git=GitState("a" * 40, "main"))
        store.finish_run(first.run_id, status="interrupted", spent_usd=Decimal(0))
        again = run(store, demo, labels=("something-else",), git=GitState("b" * 40, "other"))
        assert again.run_id == first.run_id and again.resumed == first.conversations
        stored = store.run(first.run_id)
        assert (stored["labels"], stored["git_commit"], stored["git_branch"]) == (["release-1.4"], "a" * 40, "main")


def test_a_new_runtime_version_is_a_new_run_and_a_named_run_is_refused(demo):
    with Store(":memory:") as store:
        first = run(store, demo, version="1.0")
        store.finish_run(first.run_id, status="interrupted", spent_usd=Decimal(0))
        with pytest.raises(ConfigError, match=f"run {first.run_id} tested runtime version 1.0; the runtime now "
                                              "reports 2.0"):
            run(store, demo, version="2.0", resume=first.run_id)
        fresh = run(store, demo, version="2.0")
        assert fresh.run_id != first.run_id and fresh.resumed is None
        assert store.run(fresh.run_id)["runtime_version"] == "2.0"
        assert store.run(first.run_id)["status"] == "interrupted"     # kept as it was, to resume on 1.0


def test_a_work_tree_that_differs_from_its_commit_is_recorded_dirty_and_untracked_files_do_not_count(tmp_path):
    repo = tmp_path / "repo"
    head = committed(repo, "main")
    (repo / "notes.txt").write_text("untracked")
    assert git_state(repo) == GitState(head, "main")            # as `git describe --dirty`: untracked is clean
    (repo / "f").write_text("changed")
    assert git_state(repo) == GitState(f"{head}-dirty", "main")
    git(repo, "add", "f")                                        # staged, not committed: still not the commit
    assert git_state(repo) == GitState(f"{head}-dirty", "main")


def test_a_dirty_run_says_so_in_runs_the_report_and_the_dashboard(project, cli):
    head = committed(project, "main", "simrun.toml", "budgets.toml")
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text() + "\n# changed, not committed\n")
    done = cli("-n", "1")
    assert done.exit_code == 0, done.output
    listed = cli("runs")
    assert f"{head[:8]}-dirty main" in listed.output, listed.output
    report = (project / re.search(r"report: (\S+)", done.output).group(1)).read_text()
    assert f"<code>{head}-dirty</code>" in report
    page = cli("dashboard", "--out", "index.html")
    assert page.exit_code == 0, page.output
    assert f"{head[:10]}-dirty main" in (project / "index.html").read_text()
