"""The workflow `simrun init` writes, its steps run as CI runs them (issue 41).

simrun's sources are committed to a git repository in a temporary folder, and installed from
its git URL (file://, no network) into a fresh virtual environment that borrows this one's
dependencies (as tests/test_install.py does), so that pip records the URL and commit (PEP 610).
There `simrun init` writes a team's project; its workflow must install simrun from that very
URL and commit. The team's repository is committed, pushed to a bare origin, and each CI job is
a fresh clone: its `run:` steps are run in order with bash, in a fresh environment of their own,
with the environment GitHub gives them (event, branch, pull request). On main: install, run,
bless (the folder is made), keep the run in the history. On a pull request: run, and the gate
against main's run in the history; with no history and no baseline on main, the gate step says
why it did not gate, and the pull request passes or fails on its run's own verdict.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.fixtures.venvs import copy_sources, fresh_venv, offline_env

pytestmark = pytest.mark.xdist_group("ci-workflow")


def git(folder: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True,
                          env=env, timeout=120).stdout.strip()


def fresh_environment(where: Path) -> tuple[Path, dict[str, str]]:
    """A new virtual environment that borrows this one's dependencies (pip among them: a `pip`
    command there runs it), and the environment variables a CI step runs with there: its bin/
    first, pip offline."""
    return fresh_venv(where, borrow_packages=True), offline_env(where)


@pytest.fixture(scope="module")
def simrun_repo(tmp_path_factory) -> tuple[Path, str]:
    """simrun's sources as a git repository: (its folder, the commit)."""
    src = copy_sources(tmp_path_factory.mktemp("simrun-src"))
    git(src, "init", "-q", "-b", "main")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "simrun")
    return src, git(src, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def team_repo(simrun_repo, tmp_path_factory) -> dict:
    """A team's repository, its project written by `simrun init` from a simrun installed from a
    git URL, committed on main and pushed to a bare origin."""
    src, commit = simrun_repo
    # file://localhost/...: the host spelled out, as the pip of Python 3.11 needs it in a requirement.
    url = f"git+file://localhost{src}@{commit}"
    env_dir, env = fresh_environment(tmp_path_factory.mktemp("dev-venv") / "venv")
    done = subprocess.run(["pip", "install", "-q", "--no-deps", f"simrun @ {url}"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    team = tmp_path_factory.mktemp("team") / "desk"
    team.mkdir()
    git(team, "init", "-q", "-b", "main")
    done = subprocess.run(["simrun", "init", "--no-check", "--transport", "python", "--target",
                           "simrun.examples.tripdesk:TripDesk"], cwd=team, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (team / ".gitignore").write_text("*.duckdb\n*.duckdb.wal\nreports/\n")
    git(team, "add", "-A")
    git(team, "commit", "-q", "-m", "simrun init")
    origin = team.parent / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(team), str(origin)], check=True, timeout=120)
    return {"origin": origin, "url": url, "init_output": done.stdout, "team": team}


def steps_for(workflow: dict, event: str, env: dict[str, str]) -> list[dict]:
    """The `run:` steps a job runs for `event`, by each step's `if` (the forms the workflow uses)."""
    chosen = []
    for step in workflow["jobs"]["simrun"]["steps"]:
        if "run" not in step:
            continue            # actions: checkout, setup-python, upload-artifact are GitHub's own
        condition = str(step.get("if", ""))
        if "github.event_name == 'pull_request'" in condition and event != "pull_request":
            continue
        if "github.event_name == 'push'" in condition and event != "push":
            continue
        if "env.SIMRUN_HISTORY != ''" in condition and not env.get("SIMRUN_HISTORY"):
            continue
        chosen.append(step)
    return chosen


def ci_job(team_repo, root: Path, event: str, github: dict[str, str], history: str = "",
           ref: str = "main") -> list[tuple[str, subprocess.CompletedProcess]]:
    """A fresh clone at `ref`, a fresh environment, and the workflow's steps for `event`, in order."""
    clone = root / "checkout"
    subprocess.run(["git", "clone", "-q", str(team_repo["origin"]), str(clone)], check=True, timeout=120)
    git(clone, "checkout", "-q", "--detach", ref)
    workflow = yaml.safe_load((clone / ".github/workflows/simrun.yml").read_text())
    _, env = fresh_environment(root / "venv")
    env |= {"SIMRUN_EVENT": event, "SIMRUN_HISTORY": history, **github}
    ran, failed = [], False
    for step in steps_for(workflow, event, env):
        # As GitHub runs a job: after a failed step, only the steps that ask to run anyway.
        if failed and "!cancelled()" not in str(step.get("if", "")):
            continue
        done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=clone, env=env, capture_output=True,
                              text=True, timeout=600)
        ran.append((step["name"], done))
        failed = failed or done.returncode != 0
    return ran


def by_name(ran) -> dict[str, subprocess.CompletedProcess]:
    return dict(ran)


def test_init_writes_the_git_url_and_commit_simrun_was_installed_from(team_repo):
    workflow = (team_repo["team"] / ".github/workflows/simrun.yml").read_text()
    assert f"pip install 'simrun @ {team_repo['url']}'" in workflow
    assert "simrun==" not in workflow
    # A file:// URL is on this machine: init says so.
    assert "a git repository on this machine" in team_repo["init_output"]


def test_main_installs_runs_blesses_and_keeps_its_run_then_a_pull_request_is_gated_against_it(team_repo,
                                                                                                tmp_path):
    history = tmp_path / "history"
    ran = by_name(ci_job(team_repo, tmp_path / "main", "push", {"SIMRUN_BRANCH": "main"}, str(history)))
    assert list(ran) == ["Install simrun", "Run the matrix", "Bless the baseline of main",
                         "Keep main's run in the history"], \
        {k: (v.returncode, v.stdout[-1500:], v.stderr[-1500:]) for k, v in ran.items()}
    # init's starter goals find faults in TripDesk: main's run fails its verdict (exit 1), and main is
    # blessed and kept all the same, for pull requests to be gated against what main does.
    assert ran["Run the matrix"].returncode == 1 and "verdict: FAILED" in ran["Run the matrix"].stdout
    for name in ("Install simrun", "Bless the baseline of main", "Keep main's run in the history"):
        assert ran[name].returncode == 0, (name, ran[name].stdout[-3000:], ran[name].stderr[-3000:])
    assert "blessed run" in ran["Bless the baseline of main"].stdout
    assert (tmp_path / "main/checkout/baselines/main.json").is_file()      # bless made the folder
    kept = re.search(r"kept run (r[\w-]+)", ran["Keep main's run in the history"].stdout).group(1)
    assert [p.name for p in history.iterdir()] == [f"{kept}.duckdb"]

    # A pull request, on a fresh clone of its head: run, and gate against main's run in the history.
    git(team_repo["team"], "checkout", "-q", "-b", "change")
    (team_repo["team"] / "NOTES.md").write_text("a change\n")
    git(team_repo["team"], "add", "-A")
    git(team_repo["team"], "commit", "-q", "-m", "a change")
    git(team_repo["team"], "push", "-q", str(team_repo["origin"]), "change")
    git(team_repo["team"], "checkout", "-q", "main")
    pr = {"SIMRUN_PR": "7", "SIMRUN_BASE": "main", "SIMRUN_BRANCH": "7/merge"}
    ran = by_name(ci_job(team_repo, tmp_path / "pr", "pull_request", pr, str(history), ref="origin/change"))
    assert list(ran) == ["Install simrun", "Run the matrix", "Gate against main"]
    gate = ran["Gate against main"]
    assert f"gated against run {kept}, the newest of main in the history" in gate.stdout, gate.stderr[-3000:]
    # Its guarantees broken as main's were: the gate fails it (exit 1), naming them.
    assert "verdict: FAILED" in gate.stdout and "guarantees broken: integrity_leak" in gate.stdout
    assert gate.returncode == 1
    assert (tmp_path / "pr/checkout/gate.md").is_file() and (tmp_path / "pr/checkout/gate.xml").is_file()

    # With no history and no baseline committed on main: not gated, and it says why.
    ran = by_name(ci_job(team_repo, tmp_path / "first-pr", "pull_request", pr, "", ref="origin/change"))
    gate = ran["Gate against main"]
    assert gate.returncode == 0 and "::notice::not gated: main has no blessed baseline yet" in gate.stdout
    assert ran["Run the matrix"].returncode == 1        # it fails on its own verdict
