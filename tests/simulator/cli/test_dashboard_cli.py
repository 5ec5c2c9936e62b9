"""Run identity and `simrun dashboard` from the command line: labels from the flag and from
simrun.toml, the runtime's version and git's commit in `simrun runs` and the report, and the
dashboard over several databases, each named, none changed, bad ones refused in one line."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess

import pytest

from simrun.examples.tripdesk import __version__ as TRIPDESK_VERSION


def commit_all(folder, branch="release/1.4") -> str:
    def git(*args):
        return subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                               *args], check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q", "-b", branch)
    git("add", "-A")
    git("commit", "-qm", "the project")
    return git("rev-parse", "HEAD")


def page_data(path) -> dict:
    html = path.read_text()
    return json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S).group(1))


def test_a_run_is_labelled_and_knows_its_runtime_version_and_commit(run_cli, project):
    head = commit_all(project)
    code, output = run_cli("-n", "1", "--label", "release-1.4", "--label", "rc2")
    assert code == 0, output
    code, listing = run_cli("runs")
    assert code == 0 and "release-1.4, rc2" in listing and TRIPDESK_VERSION in listing
    assert f"{head[:8]} release/1.4" in listing
    report = next((project / "reports").glob("r*.html")).read_text()
    assert re.search(r'id="identity">labels <span class="chip">release-1.4</span><span class="chip">rc2</span>', report)
    assert f"runtime version <code>{TRIPDESK_VERSION}</code> · commit <code>{head}</code>" in report
    assert "on branch <code>release/1.4</code>" in report
    (run,) = page_data(project / "reports" / "index.html")["runs"]
    assert (run["labels"], run["version"], run["commit"], run["branch"]) == (
        ["release-1.4", "rc2"], TRIPDESK_VERSION, head[:12], "release/1.4")


def test_labels_from_simrun_toml_and_the_flag_replacing_them(run_cli, project):
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace("[run]", '[run]\nlabels = ["nightly", "<b>x</b>"]', 1))
    assert run_cli("-n", "1")[0] == 0
    assert run_cli("-n", "1", "--fresh", "--label", "release-2")[0] == 0
    runs = page_data(project / "reports" / "index.html")["runs"]
    assert [r["labels"] for r in runs] == [["nightly", "<b>x</b>"], ["release-2"]]
    code, listing = run_cli("runs")
    assert "nightly, <b>x</b>" in listing          # shown as written, never read as console markup


@pytest.mark.parametrize("args, says", [
    (["--label", ""], "error: --label: a label cannot be empty"),
    (["--label", "a\tb"], "error: --label: the label 'a\\tb' holds a control character"),
])
def test_a_bad_label_is_one_line_and_runs_nothing(run_cli, project, args, says):
    code, output = run_cli("-n", "1", *args)
    assert code == 2 and output.strip().startswith(says) and len(output.strip().splitlines()) == 1, output
    assert not (project / "simrun.duckdb").exists()


def test_a_bad_label_in_simrun_toml_names_its_line(run_cli, project):
    toml = project / "simrun.toml"
    lines = toml.read_text().splitlines()
    at = lines.index("[run]") + 2
    toml.write_text("\n".join(lines[:at - 1] + ['labels = ["ok", ""]'] + lines[at - 1:]) + "\n")
    code, output = run_cli("-n", "1")
    assert code == 2 and f"simrun.toml:{at} (run.labels" in output and "a label cannot be empty" in output, output


def test_the_dashboard_reads_several_databases_and_changes_none(run_cli, project):
    for name, label in (("a.duckdb", "release-1.0"), ("b.duckdb", "release-1.1")):
        code, output = run_cli("-n", "1", "--db", name, "--label", label)
        assert code == 0, output
    before = {n: hashlib.sha256((project / n).read_bytes()).hexdigest() for n in ("a.duckdb", "b.duckdb")}
    code, output = run_cli("dashboard", "--db", "a.duckdb", "--db", "b.duckdb", "--out", "site/all.html")
    assert code == 0 and "dashboard: site/all.html" in output, output
    data = page_data(project / "site" / "all.html")
    assert [(r["labels"], r["file"]) for r in data["runs"]] == [(["release-1.0"], 0), (["release-1.1"], 1)]
    assert data["files"] == ["a.duckdb", "b.duckdb"]      # as given
    assert data["runs"][1]["verdict"] == "passed"      # the same run again: the gate passes it
    assert {n: hashlib.sha256((project / n).read_bytes()).hexdigest() for n in before} == before
    code, output = run_cli("dashboard", "--db", "a.duckdb")   # default --out: the project's reports folder
    assert code == 0 and (project / "reports" / "index.html").exists()


@pytest.mark.parametrize("args, says", [
    (["--db", "missing.duckdb"], "missing.duckdb: no such database"),
    (["--out", "reports"], "--out: reports is a folder; name the page to write"),
    (["--baseline", "nope.json"], "nope.json: no such baseline file"),
])
def test_dashboard_misuse_is_one_line(run_cli, project, args, says):
    (project / "reports").mkdir(exist_ok=True)
    assert run_cli("-n", "1")[0] == 0
    code, output = run_cli("dashboard", *args)
    lines = output.strip().splitlines()
    assert code == 2 and len(lines) == 1 and says in lines[0], output


def test_the_dashboard_draws_a_blessed_baseline_in_its_datasets_charts(run_cli, project):
    assert run_cli("-n", "1")[0] == 0
    code, output = run_cli("baseline", "bless", "latest", "--out", "base.json")
    assert code == 0, output
    code, output = run_cli("dashboard", "--baseline", "base.json")
    assert code == 0, output
    data = page_data(project / "reports" / "index.html")
    (group,) = data["groups"]
    assert group["baseline"]["goal_reached"] == 1.0 and group["baseline"]["dead_end"] == 0.0
    assert "baseline run" in (project / "reports" / "index.html").read_text()
