"""`simrun baseline bless`, `gate`, `rescore`, `export` and `import`, end to end in a project folder."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import duckdb

from simrun.cli._main import app
from simrun.scoring.checks._scorer import SCORER_VERSION
from simrun.scoring.gate._summary import GATE_CLASSES
from tests.conftest import ROOT


def set_faults(project: Path, faults: str | None) -> None:
    toml = project / "simrun.toml"
    text = re.sub(r"(?m)^#? ?faults = .*$", f'faults = "{faults}"' if faults else "# faults = none", toml.read_text())
    toml.write_text(text)


def run(cli, *args, repetitions: int = 1) -> str:
    result = cli("-n", str(repetitions), *args)
    assert result.exit_code in (0, 1), result.output
    return re.search(r"run: (\S+)", result.output).group(1)


def one_error_line(result, *says: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for text in says:
        assert text in lines[0], lines[0]


def rows(project: Path, sql: str, *params) -> list[tuple]:
    con = duckdb.connect(str(project / "simrun.duckdb"), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def test_bless_then_gate_passes_writing_markdown_junit_and_the_step_summary(cli, project, monkeypatch):
    set_faults(project, "dead_end=0.1,not_understood=0.1")
    # The gate is what this test is about: the planted faults' rates are left out of the release
    # criteria (a progress class above 10% fails a run by default, and the gate gives that verdict too).
    budgets = project / "budgets.toml"
    budgets.write_text(budgets.read_text().replace("[release]", "[release]\nprogress_ceiling = 1.0"))
    base = run(cli, "--seed", "1", repetitions=2)
    cand = run(cli, "--seed", "2", repetitions=2)
    blessed = cli("baseline", "bless", base, "--out", "baseline.json")
    assert blessed.exit_code == 0 and f"blessed run {base}" in blessed.output
    data = json.loads((project / "baseline.json").read_text())
    assert data["run_id"] == base and data["scorer_version"] == SCORER_VERSION
    assert data["matrix"]["cells"] == 70 and data["matrix"]["conversations"] == 140
    assert data["dataset_hash"] == rows(project, "SELECT dataset_hash FROM runs WHERE run_id = ?", base)[0][0]

    summary = project / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = cli("gate", "--baseline", "baseline.json", "--candidate", cand, "--markdown", "gate.md",
                 "--junit", "gate.xml")
    assert result.exit_code == 0, result.output
    assert "passed: no class rose significantly, overall or in any goal or persona, and every guarantee held" \
        in result.output
    md = (project / "gate.md").read_text()
    # The candidate's verdict first (issue 23), then the gate's tables.
    assert md.startswith(f"## ✅ simrun PASSED: run `{cand}` (exit 0)") and "\n### ✅ simrun gate passed" in md
    assert summary.read_text() == "earlier step\n" + md + "\n"
    suites = ET.parse(project / "gate.xml").getroot().findall("testsuite")
    cases = suites[1].findall("testcase")
    assert [c.get("name") for c in cases] == list(GATE_CLASSES) and not any(c.find("failure") is not None
                                                                              for c in cases)
    assert not any(c.find("failure") is not None for c in suites[0].findall("testcase"))
    # A stored run works as a baseline too, and gives the same verdict.
    assert cli("gate", "--baseline", base, "--candidate", cand, "--markdown", "again.md").exit_code == 0
    tables = lambda text: text.split("\n### ", 1)[1].split("\n", 3)[3]      # noqa: E731
    assert tables((project / "again.md").read_text()) == tables(md)


def test_a_planted_regression_exits_1(cli, project):
    set_faults(project, "dead_end=0.05")
    base = run(cli, "--seed", "1", repetitions=2)
    set_faults(project, "dead_end=0.6")
    cand = run(cli, "--seed", "2", repetitions=2)
    result = cli("gate", "--baseline", base, "--candidate", cand, "--junit", "gate.xml")
    assert result.exit_code == 1, result.output
    assert "FAILED: regressions: dead_end" in result.output
    run_suite, gate_suite = ET.parse(project / "gate.xml").getroot().findall("testsuite")
    assert [f.get("message").split(":")[0] for f in gate_suite.findall(".//failure")] == ["dead_end"]
    # A run at 60% dead_end also fails its release ceiling (issue 23): the run's suite says so.
    assert [c.get("name") for c in run_suite.findall("testcase") if c.find("failure") is not None] \
        == ["release.max_rate.dead_end"]


def test_a_broken_guarantee_fails_the_gate(cli, project):
    base = run(cli, "--seed", "1")
    set_faults(project, "audit_gap=0.05")
    cand = run(cli, "--seed", "2")
    result = cli("gate", "--baseline", base, "--candidate", cand)
    assert result.exit_code == 1 and "FAILED: guarantees broken: audit_gap" in result.output


def test_misuse_is_one_line_and_exit_2(cli, project):
    base = run(cli, "--seed", "1")
    assert cli("baseline", "bless", base, "--out", "baseline.json").exit_code == 0
    cand = run(cli, "--seed", "2")

    one_error_line(cli("gate", "--baseline", "missing.json", "--candidate", cand),
                   "missing.json: no such baseline file", "simrun baseline bless")
    one_error_line(cli("gate", "--baseline", "r-nope", "--candidate", cand), "no baseline 'r-nope'")
    one_error_line(cli("gate", "--baseline", "baseline.json", "--candidate", "r-nope"),
                   "no candidate run 'r-nope'")

    data = json.loads((project / "baseline.json").read_text())
    (project / "old-scorer.json").write_text(json.dumps({**data, "scorer_version": "0"}))
    one_error_line(cli("gate", "--baseline", "old-scorer.json", "--candidate", cand),
                   "scorer mismatch", "scored by scorer version 0", "simrun rescore RUN")

    goal = project / "goals" / "ask-bags.yaml"
    goal.write_text(goal.read_text().replace("title: ", "title: Edited ", 1))
    other = run(cli, "--seed", "3")
    # A baseline of format 2 keeps only the dataset hash: it cannot tell what another dataset shares.
    old = {k: v for k, v in data.items() if k not in ("items", "user_backend", "seed")} | {"format_version": 2}
    (project / "format-2.json").write_text(json.dumps(old))
    one_error_line(cli("gate", "--baseline", "format-2.json", "--candidate", other),
                   "dataset mismatch", data["dataset_hash"], "keeps only that hash", "bless a new baseline")

    one_error_line(cli("baseline", "bless", "r-nope", "--out", "x.json"), "no run 'r-nope'")
    # Bless makes the folders it writes to (a first bless on main has no baselines/ yet), but not
    # through a file or a link.
    assert cli("baseline", "bless", base, "--out", "new/dir/x.json").exit_code == 0
    one_error_line(cli("baseline", "bless", base, "--out", "baseline.json/x.json"), "is not a folder")
    one_error_line(cli("gate", "--baseline", "baseline.json", "--candidate", cand, "--budgets", "nope.toml"),
                   "no such file: nope.toml")


def test_rescore_restores_the_scores_and_records_the_scorer_version(cli, project):
    set_faults(project, "dead_end=0.3,phantom_receipt=0.2,crash=0.05")
    run_id = run(cli, "--seed", "5")
    checks = ("SELECT conversation_id, class, status, occurrences, checked_turns FROM checks "
              "WHERE run_id = ? ORDER BY ALL")
    findings = "SELECT conversation_id, turn, class, detail FROM findings WHERE run_id = ? ORDER BY ALL"
    before = rows(project, checks, run_id), rows(project, findings, run_id)
    assert before[1], "the faults left findings to restore"
    con = duckdb.connect(str(project / "simrun.duckdb"))
    con.execute("DELETE FROM findings WHERE run_id = ?", [run_id])
    con.execute("UPDATE checks SET status = 'clean', occurrences = 0 WHERE run_id = ?", [run_id])
    con.execute("UPDATE runs SET scorer_version = '0' WHERE run_id = ?", [run_id])
    con.close()

    result = cli("rescore", run_id)
    assert result.exit_code == 0, result.output
    assert re.search(rf"rescored run {run_id}: 70 conversations with scorer {SCORER_VERSION} \(was 0\); "
                     r"[1-9]\d* changed", result.output), result.output
    assert (rows(project, checks, run_id), rows(project, findings, run_id)) == before
    version, previous, when = rows(project, "SELECT scorer_version, rescored_from, rescored_at FROM runs "
                                            "WHERE run_id = ?", run_id)[0]
    assert (version, previous) == (SCORER_VERSION, "0") and when is not None
    again = cli("rescore", "latest")
    assert again.exit_code == 0 and "; 0 changed" in again.output
    assert f"verdict of run {run_id}: FAILED: guarantees broken: phantom_receipt" in again.output, again.output

    goal = project / "goals" / "rename-trip.yaml"
    goal.write_text(goal.read_text().replace("title: ", "title: Edited ", 1))
    one_error_line(cli("rescore", run_id), "other versions of goal:rename-trip")
    one_error_line(cli("rescore", "r-nope"), "no run 'r-nope'")


def test_export_import_round_trip_scores_the_same(cli, project):
    set_faults(project, "dead_end=0.2,not_understood=0.2,crash=0.05")
    original = run(cli, "--seed", "7")
    result = cli("export", original, "--out", "bundle.json")
    assert result.exit_code == 0 and "70 items" in result.output, result.output
    bundle = json.loads((project / "bundle.json").read_text())
    assert bundle["format_version"] == 1
    assert bundle["dataset_hash"] == rows(project, "SELECT dataset_hash FROM runs WHERE run_id = ?", original)[0][0]
    for item in bundle["items"]:
        said = [t["user"]["text"] if t["user"]["kind"] == "message" else f"[click {t['user']['offer']}]"
                for t in item["record"]["turns"]]
        assert [item["prompt"], *item["turns"]] == said
        assert len(item["turn_responses"]) == len(said)
        replies = [r for r in item["turn_responses"] if r is not None]
        assert item["response"] == (replies[-1] if replies else None)
    assert any(item["turns"] for item in bundle["items"])

    imported = cli("import", "bundle.json")
    assert imported.exit_code == 0, imported.output
    new = re.search(r"into run (\S+)", imported.output).group(1)
    assert new != original
    # What the imported run now says, as its report would: the planted crashes fail it.
    assert f"verdict of run {new}: FAILED: release.fail_on_runtime_error" in imported.output, imported.output
    for sql in ("SELECT conversation_id, persona, goal, repetition, seed, end_reason, goal_reached, goal_detail, "
                "turns, session_id FROM conversations WHERE run_id = ? ORDER BY ALL",
                "SELECT conversation_id, turn, user_turn::VARCHAR, result::VARCHAR, state::VARCHAR FROM turns "
                "WHERE run_id = ? ORDER BY ALL",
                "SELECT conversation_id, class, status, occurrences, checked_turns, unverifiable_turns FROM checks "
                "WHERE run_id = ? ORDER BY ALL",
                "SELECT conversation_id, turn, class, detail, evidence::VARCHAR FROM findings "
                "WHERE run_id = ? ORDER BY ALL"):
        assert rows(project, sql, new) == rows(project, sql, original), sql
    assert rows(project, "SELECT count(*) FROM findings WHERE run_id = ?", new)[0][0] > 0
    gate = cli("gate", "--baseline", original, "--candidate", new, "--markdown", "gate.md")
    # The gate passes; the candidate's planted crashes and dead ends fail its release criteria (issue 23:
    # `simrun gate` gives the candidate's whole verdict), and nothing else.
    assert "passed: no class rose significantly" in gate.output, gate.output
    reasons = [line for line in gate.output.splitlines() if line.startswith("FAILED: ")]
    assert gate.exit_code == 1 and reasons and all(r.startswith("FAILED: release.") for r in reasons), gate.output
    assert all("+0.0 pts" in line for line in (project / "gate.md").read_text().splitlines()
               if line.startswith("| `"))


def test_import_text_only_items_and_refuse_unknown_goals(cli, project):
    dataset_hash = None
    base = run(cli, "--seed", "1")
    dataset_hash = rows(project, "SELECT dataset_hash FROM runs WHERE run_id = ?", base)[0][0]
    item = {"id": "hand/1", "persona": "plain-paula", "goal": "single-add-bag",
            "prompt": "Add a bag to my Lisbon trip", "turns": ["Thanks"],
            "response": "Anything else?", "turn_responses": ["Done: you now have 2 bags.", "Anything else?"]}
    (project / "hand.json").write_text(json.dumps({"format_version": 1, "dataset_hash": dataset_hash,
                                                   "items": [item]}))
    result = cli("import", "hand.json")
    assert result.exit_code == 0, result.output
    new = re.search(r"into run (\S+)", result.output).group(1)
    statuses = dict(rows(project, "SELECT class, status FROM checks WHERE run_id = ?", new))
    # Text alone: no store, no audit, no verdicts: those checks are UNVERIFIABLE, never passes.
    assert statuses["audit_gap"] == "unverifiable" and statuses["phantom_receipt"] == "unverifiable"
    assert rows(project, "SELECT goal_reached, turns FROM conversations WHERE run_id = ?", new) == [(None, 2)]

    (project / "short.json").write_text(json.dumps({"format_version": 1, "dataset_hash": dataset_hash,
                                                    "items": [{**item, "turn_responses": ["only one"]}]}))
    one_error_line(cli("import", "short.json"), "2 user turns and 1 turn_responses")
    (project / "unknown.json").write_text(json.dumps({"format_version": 1, "dataset_hash": dataset_hash,
                                                      "items": [{**item, "goal": "fly-to-mars"}]}))
    one_error_line(cli("import", "unknown.json"), "needs goal 'fly-to-mars'")
    (project / "future.json").write_text(json.dumps({"format_version": 9, "dataset_hash": "x", "items": []}))
    one_error_line(cli("import", "future.json"), "format_version 9")
    (project / "bad.json").write_text(json.dumps({"format_version": 1, "dataset_hash": "x",
                                                  "items": [{**item, "prompt": None}]}))
    one_error_line(cli("import", "bad.json"), "bad.json (items.0 ('hand/1').prompt)")
    one_error_line(cli("import", "nope.json"), "nope.json: no such bundle")
    one_error_line(cli("export", "r-nope", "--out", "x.json"), "no run 'r-nope'")


def test_baseline_subcommands_are_documented():
    reference = (ROOT / "docs" / "reference" / "cli.md").read_text()     # moved there from the README
    for group in app.registered_groups:
        for command in group.typer_instance.registered_commands:
            assert f"`simrun {group.name} {command.name}" in reference


def test_one_goal_broken_outright_fails_the_gate_naming_it_and_the_report_shows_what_changed(cli, project):
    """The issue's case, end to end: the same seeds, every rename-trip conversation a dead end in
    the candidate (a runtime that breaks one goal), everything else clean."""
    base = run(cli, "--seed", "1", repetitions=2)
    assert cli("baseline", "bless", base, "--out", "baseline.json").exit_code == 0
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text()
                    .replace('target = "simrun.examples.tripdesk:TripDesk"',
                             'target = "benchmarks.gate_demo:ByGoal"')
                    .replace("[runtime.options]", '[runtime.options]\nfaults = {}\ngoal = "rename-trip"\n'
                             'goal_faults = {dead_end = 1.0}\nfault_seed = 1'))
    cand = run(cli, "--seed", "1", repetitions=2)
    result = cli("gate", "--baseline", "baseline.json", "--candidate", cand, "--markdown", "gate.md")
    assert result.exit_code == 1, result.output
    assert "dead_end rose in goal rename-trip: 0/14 → 14/14" in result.output
    assert "regressions: dead_end (over all cells, and in goal rename-trip)" in result.output
    md = (project / "gate.md").read_text()
    flipped = re.findall(r"^- `([a-z-]+/rename-trip/\d)` dead_end$", md, re.M)
    assert len(flipped) == 14 and re.search(r"\d+ flipped .*: dead_end 14", md), md
    made = cli("report", cand, "--baseline", base)
    assert made.exit_code == 0, made.output
    html = (project / "reports" / f"{cand}.html").read_text()
    assert html.count('class="flip-pair"') == 14 and html.count('class="side-conv"') == 28
    assert "first difference at turn" in html and 'class="turn diverged"' in html


def test_a_baseline_records_who_played_the_user_and_another_user_is_refused_naming_both(cli, project):
    """Like with like, by instrument too: a candidate measured with a model-played user is not
    gated against a baseline measured with the scripted one (exit 2, naming both); the same
    candidate against a baseline of its own user is gated."""
    base = run(cli, "--seed", "1")
    (project / "baselines").mkdir()
    assert cli("baseline", "bless", base, "--out", "baselines/main.json").exit_code == 0
    blessed = json.loads((project / "baselines" / "main.json").read_text())
    assert (blessed["format_version"], blessed["user_backend"], blessed["seed"]) == (6, "scripted", 1)
    cand = run(cli, "--seed", "2")
    con = duckdb.connect(str(project / "simrun.duckdb"))
    con.execute("UPDATE runs SET user_backend = 'openai:gpt-4.1-mini' WHERE run_id = ?", [cand])
    con.close()
    one_error_line(cli("gate", "--baseline", "baselines/main.json", "--candidate", cand),
                   "user mismatch", "with the user scripted", "with openai:gpt-4.1-mini", "--user scripted")
    # A baseline blessed before the user was kept (format 3) cannot tell, and gates as before.
    older = {k: v for k, v in blessed.items() if k not in ("user_backend", "seed")} | {"format_version": 3}
    (project / "baselines" / "format-3.json").write_text(json.dumps(older))
    assert cli("gate", "--baseline", "baselines/format-3.json", "--candidate", cand).exit_code in (0, 1)
