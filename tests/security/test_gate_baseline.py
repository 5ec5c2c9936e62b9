"""The gate cannot be talked into passing (issue 10, part 5).

A baseline may come from the pull request it judges. Before any verdict it is checked against
the candidate: the same classes (every one the scorer knows), the same cells (or a subset the
user stated, and the verdict shows), and counts that fit in the repetitions. Anything else is one
line and exit 2. `--baseline-ref REF` reads the baseline from git (the protected branch), never
through a shell, with its size bounded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest

from tests.simulator.cli.test_gate_cli import one_error_line, run


@pytest.fixture()
def blessed(after, project):
    """A baseline run blessed to baseline.json, and a candidate run of the same matrix."""
    base, bless, cand = after(("-n", "1", "--seed", "1"), ("baseline", "bless", "latest", "--out", "baseline.json"),
                              ("-n", "1", "--seed", "2"))
    assert base.exit_code in (0, 1) and cand.exit_code in (0, 1), (base.output, cand.output)
    assert bless.exit_code == 0, bless.output
    ids = [re.search(r"run: (\S+)", r.output).group(1) for r in (base, cand)]
    return *ids, json.loads((project / "baseline.json").read_text())


def write(project: Path, data: dict, name: str = "hostile.json") -> str:
    (project / name).write_text(json.dumps(data))
    return name


def test_a_baseline_without_every_class_is_refused(cli, project, blessed):
    # Dropping a class made the gate blind to it: the loader counted it as never scored, so it
    # was left untested and the candidate passed whatever it did there.
    _, cand, data = blessed
    blind = {**data, "classes": [c for c in data["classes"] if c != "dead_end"],
             "cells": {k: {c: v for c, v in counts.items() if c != "dead_end"} for k, counts in data["cells"].items()}}
    one_error_line(cli("gate", "--baseline", write(project, blind), "--candidate", cand),
                   "hostile.json", "dead_end", "every class the scorer knows")
    extra = {**data, "classes": [*data["classes"], "made_up"],
             "cells": {k: {**counts, "made_up": [0, 1, 0]} for k, counts in data["cells"].items()}}
    one_error_line(cli("gate", "--baseline", write(project, extra), "--candidate", cand), "made_up")


def test_a_baseline_of_other_cells_is_compared_on_the_cells_it_shares_and_says_so(cli, project, blessed):
    _, cand, data = blessed
    kept = sorted(data["cells"])[:10]
    subset = {**data, "cells": {k: data["cells"][k] for k in kept},
              **({"repetitions": {k: data["repetitions"][k] for k in kept}} if "repetitions" in data else {}),
              "matrix": {**data["matrix"], "cells": 10, "conversations": 10,
                         "personas": sorted({k.split("/")[0] for k in kept}),
                         "goals": sorted({k.split("/")[1] for k in kept})}}
    name = write(project, subset)
    # Issue 23: no flag is needed (--shared-cells-only is kept as an alias that changes nothing).
    alias = cli("gate", "--baseline", name, "--candidate", cand, "--shared-cells-only")
    assert alias.exit_code in (0, 1) and "compared on 10 of 70 cells" in alias.output, alias.output
    stated = cli("gate", "--baseline", name, "--candidate", cand, "--markdown", "gate.md")
    assert stated.exit_code in (0, 1), stated.output
    md = (project / "gate.md").read_text()
    assert "compared on 10 of 70 cells" in stated.output and "compared on 10 of 70 cells" in md
    left_out = sorted(set(json.loads((project / "baseline.json").read_text())["cells"]) - set(kept))
    assert left_out[0] in md


def test_counts_that_do_not_fit_the_repetitions_are_refused(cli, project, blessed):
    _, cand, data = blessed
    cell = sorted(data["cells"])[0]

    def with_counts(**counts) -> dict:
        return {**data, "cells": {**data["cells"], cell: {**data["cells"][cell], **counts}}}

    cases = {
        "scored 9 in a cell of 1 repetition": (with_counts(loop=[0, 9, 0]), "repetitions"),
        "unverifiable beyond the repetitions": (with_counts(loop=[0, 1, 4]), "repetitions"),
        "negative": (with_counts(loop=[0, -1, 0]), "loop"),
        "fired beyond scored": (with_counts(loop=[2, 1, 0]), "fired 2 > scored 1"),
        "a count that is a bool": (with_counts(loop=[True, 1, 0]), "loop"),
        "a count that is text": (with_counts(loop=["0", 1, 0]), "loop"),
        "conversations that do not add up": ({**data, "matrix": {**data["matrix"], "conversations": 3}},
                                             "conversations"),
    }
    for why, (bad, says) in cases.items():
        result = cli("gate", "--baseline", write(project, bad), "--candidate", cand)
        assert result.exit_code == 2, (why, result.output)
        one_error_line(result, "hostile.json", says)


def test_text_a_baseline_carries_into_the_summary_is_checked(cli, project, blessed):
    # The run id lands in Markdown posted on the pull request: markup there is refused.
    _, cand, data = blessed
    for field, value in (("run_id", "r1 <img src=x onerror=alert(1)>"), ("dataset_hash", "`]( javascript:x)"),
                         ("scorer_version", "1\n## passed")):
        one_error_line(cli("gate", "--baseline", write(project, {**data, field: value}), "--candidate", cand),
                       "hostile.json", field)


def test_malformed_baseline_files_are_one_line(cli, project, blessed):
    _, cand, data = blessed
    deep = project / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    one_error_line(cli("gate", "--baseline", "deep.json", "--candidate", cand), "deep.json")
    twice = project / "twice.json"
    text = json.dumps(data)
    first = sorted(data["cells"])[0]
    # The same cell twice: JSON keeps the last one silently; simrun refuses.
    twice.write_text(text.replace(f'"{first}": ', f'"{first}": {json.dumps(data["cells"][first])}, "{first}": ', 1))
    one_error_line(cli("gate", "--baseline", "twice.json", "--candidate", cand), "twice.json", "twice")
    big = project / "big.json"
    big.write_text(json.dumps(data) + " " * (65 * 2**20))
    one_error_line(cli("gate", "--baseline", "big.json", "--candidate", cand), "big.json", "MB")


def test_a_stored_run_with_counts_beyond_its_repetitions_is_refused(cli, project):
    base = run(cli, "--seed", "1")
    cand = run(cli, "--seed", "2")
    con = duckdb.connect(str(project / "simrun.duckdb"))
    # A crafted database: more conversations in a cell than the run had repetitions.
    con.execute("UPDATE conversations SET persona = 'plain-paula', goal = 'ask-bags', "
                "repetition = CAST(hash(conversation_id) % 1000 AS INTEGER) "
                "WHERE run_id = ? AND goal = 'ask-bags'", [base])
    con.close()
    one_error_line(cli("gate", "--baseline", base, "--candidate", cand), base, "repetitions")


# --- --baseline-ref: the baseline read from git ---------------------------------------------

def git(project: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", *args], cwd=project, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture()
def repo(project, blessed):
    """The project as a git repository whose main branch holds the blessed baseline."""
    git(project, "init", "-q", "-b", "main")
    (project / "baselines").mkdir()
    shutil.copy(project / "baseline.json", project / "baselines" / "main.json")
    git(project, "add", "baselines/main.json")
    git(project, "commit", "-q", "-m", "bless")
    return blessed


def test_baseline_ref_reads_the_protected_branch_not_the_working_tree(cli, project, repo):
    base, cand, data = repo
    # The pull request rewrote the baseline so that the candidate passes whatever it did.
    worse = {**data, "cells": {k: {c: [v[1], v[1], v[2]] for c, v in counts.items()}
                               for k, counts in data["cells"].items()}}
    (project / "baselines" / "main.json").write_text(json.dumps(worse))
    from_ref = cli("gate", "--baseline-ref", "main:baselines/main.json", "--candidate", cand, "--markdown", "ref.md")
    from_run = cli("gate", "--baseline", base, "--candidate", cand, "--markdown", "run.md")
    assert from_ref.exit_code == from_run.exit_code, from_ref.output
    assert "main:baselines/main.json" in from_ref.output
    ref_md, run_md = (project / "ref.md").read_text(), (project / "run.md").read_text()
    # Past the lines that name where the baseline came from, the verdicts are the same (issue 23: the
    # candidate's verdict comes first, then the gate's tables under their own heading).
    tables = lambda md: md.split("\n### ", 1)[1].split("\n", 3)[3]      # noqa: E731
    assert tables(ref_md) == tables(run_md)


def test_baseline_ref_errors_are_one_line(cli, project, repo, monkeypatch):
    _, cand, _ = repo
    one_error_line(cli("gate", "--baseline-ref", "main:baselines/nope.json", "--candidate", cand),
                   "main:baselines/nope.json", "git")
    one_error_line(cli("gate", "--baseline-ref", "no-such-branch:baselines/main.json", "--candidate", cand),
                   "no-such-branch:baselines/main.json")
    # An option in disguise never reaches git.
    one_error_line(cli("gate", "--baseline-ref", "--output=/tmp/pwned", "--candidate", cand), "--baseline-ref")
    assert not Path("/tmp/pwned").exists()
    one_error_line(cli("gate", "--baseline-ref", "main:baselines/main.json", "--baseline", "baseline.json",
                       "--candidate", cand), "--baseline", "--baseline-ref")
    (project / "baselines" / "big.json").write_text(" " * (65 * 2**20) + "{}")
    git(project, "add", "baselines/big.json")
    git(project, "commit", "-q", "-m", "big")
    one_error_line(cli("gate", "--baseline-ref", "main:baselines/big.json", "--candidate", cand), "MB")
    monkeypatch.setenv("PATH", str(project / "no-bin"))
    one_error_line(cli("gate", "--baseline-ref", "main:baselines/main.json", "--candidate", cand), "git")
