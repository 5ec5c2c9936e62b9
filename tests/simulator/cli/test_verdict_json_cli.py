"""`--verdict-json` writes the run's verdict as a typed document, and every surface says what it
says: on the four runs of the verdict test (clean, a broken guarantee, a failed release
criterion, a failed gate), the command line's lines, the Markdown of the step summary, the JUnit
XML, the report's verdict section and the dashboard's mark give the same status, the same exit
code and one rendered reason per reason of the document.

The runs are those of tests/fixtures/stored_runs/capture.py (the same faults, seeds and
repetitions), so their words are also the words stored there before the verdicts were typed.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

from simrun._untrusted_text import markdown_text
from simrun.scoring.gate._run_verdict import verdict_of_run
from simrun.scoring.gate._verdict_text import junit_xml, verdict_json
from simrun.scoring.store._database import Store
from tests.fixtures.stored_runs.capture import RUN, before_library
from tests.simulator.cli.test_verdict_cli import broken_goal, with_baseline

ICONS = {"passed": "✅", "failed": "❌"}
RUN_ID = re.compile(r"\br[0-9]{8}-[0-9]{6}-[0-9a-f]+\b")


def faults(project: Path, spec: str) -> None:
    """The reference runtime with `spec` planted (as capture.py plants it), or clean for ""."""
    toml = project / "simrun.toml"
    text = re.sub(r'\nfaults = "[^"]*"\nfault_seed = 7', "", toml.read_text())
    if spec:
        text = text.replace("[runtime.options]", f'[runtime.options]\nfaults = "{spec}"\nfault_seed = 7', 1)
    toml.write_text(text)


def run_with_json(cli, project: Path, monkeypatch, name: str, *extra: str):
    """One run as the command line makes it, with its verdict's JSON and its step summary."""
    summary = project / f"{name}.summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = cli(*RUN, "--verdict-json", f"{name}.json", *extra)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert "verdict: " in result.output, result.output
    doc = json.loads((project / f"{name}.json").read_text())
    return result, doc, summary.read_text()


def texts(doc: dict, part: str) -> list[str]:
    return [line["text"] for line in doc[part]]


def cli_agrees(output: str, exit_code: int, doc: dict) -> None:
    """The command line's verdict lines: the status line, then one line per line of the document."""
    word = doc["status"].upper()
    lines = output[output.index("verdict: "):].splitlines()
    assert lines[0] == f"verdict: {word} (exit {doc['exit_code']})" and exit_code == doc["exit_code"]
    assert [x.removeprefix(f"{word}: ") for x in lines if x.startswith(f"{word}: ")] == texts(doc, "reasons")
    assert [x.removeprefix("held: ") for x in lines if x.startswith("held: ")] == texts(doc, "held")
    assert [x.removeprefix("not checked: ") for x in lines if x.startswith("not checked: ")] \
        == texts(doc, "not_checked")


def markdown_agrees(md: str, doc: dict) -> None:
    """The step summary (and the Markdown of `simrun gate`): the heading, one item per line."""
    icon = ICONS.get(doc["status"], "⚠️")
    head, listed = md.split("\n\n", 2)[:2]                 # the heading, and the list under it
    assert head == f"## {icon} simrun {doc['status'].upper()}: run `{doc['run_id']}` (exit {doc['exit_code']})"
    items = listed.splitlines()
    # Each line as text, never as Markdown (tests/security/test_workflow_commands.py).
    assert [x[4:-2] for x in items if x.startswith("- **")] == [markdown_text(t) for t in texts(doc, "reasons")]
    assert [x.removeprefix("- held: ") for x in items if x.startswith("- held: ")] \
        == [markdown_text(t) for t in texts(doc, "held")]
    assert [x.removeprefix("- not checked: ") for x in items if x.startswith("- not checked: ")] \
        == [markdown_text(t) for t in texts(doc, "not_checked")]


def junit_agrees(xml: str, doc: dict) -> None:
    """JUnit fails exactly when the exit status is not 0: each reason is a failing testcase with its
    words, but a failed gate's, which the gate's suite fails class by class."""
    root = ET.fromstring(xml.split("?>", 1)[1])
    failing = [(c.get("classname"), c.get("name"), c.find("failure").get("message"))
               for c in root.iter("testcase") if c.find("failure") is not None]
    assert (int(root.get("failures")) > 0) == (doc["exit_code"] != 0) and int(root.get("failures")) == len(failing)
    run_failures = [message for classname, _, message in failing if not classname.startswith("simrun.gate.")]
    gate_failures = [name for classname, name, _ in failing if classname.startswith("simrun.gate.")]
    gated = [r for r in doc["reasons"] if r["kind"] == "gate_regression"]
    assert run_failures == [r["text"] for r in doc["reasons"] if r["kind"] != "gate_regression"]
    assert sorted(gate_failures) == sorted(cls for r in gated for cls in r["classes"])


def report_agrees(page: str, doc: dict) -> None:
    """The report's first element: the status, the exit code, and one item per line, by kind."""
    section = page.split("<body>", 1)[1].split("</section>", 1)[0]
    status = doc["status"]
    assert section.strip().startswith(f'<section id="verdict" class="{status.replace(" ", "-")}" '
                                      f'data-status="{status}" data-exit="{doc["exit_code"]}">')
    items = [(cls, kind, html.unescape(re.sub(r"<[^>]+>", "", body)))
             for cls, kind, body in re.findall(r'<li class="([a-z-]+)" data-kind="([a-z_]+)">(.*?)</li>', section)]
    want = ([("reason", r["kind"], r["text"]) for r in doc["reasons"]]
            + [("held", h["kind"], f"held: {h['text']}") for h in doc["held"]]
            + [("not-checked", n["kind"], f"not checked: {n['text']}") for n in doc["not_checked"]])
    assert items == want


def test_every_surface_says_what_the_verdict_json_says_on_the_four_runs(cli, project, monkeypatch):
    before = before_library()
    runs = {}
    runs["clean"] = run_with_json(cli, project, monkeypatch, "clean")
    faults(project, "phantom_receipt=0.3")
    runs["broken_guarantee"] = run_with_json(cli, project, monkeypatch, "broken_guarantee")
    faults(project, "dead_end=0.3")
    runs["failed_release"] = run_with_json(cli, project, monkeypatch, "failed_release")
    faults(project, "")
    baseline = runs["clean"][1]["run_id"]     # the clean run, as capture.py blesses one
    (project / "baselines").mkdir()
    assert cli("baseline", "bless", baseline, "--out", "baselines/main.json").exit_code == 0
    with_baseline(project, "baselines/main.json")
    broken_goal(project, "rename-trip")
    runs["failed_gate"] = run_with_json(cli, project, monkeypatch, "failed_gate")

    expected = {"clean": ("passed", []), "broken_guarantee": ("failed", ["guarantees_broken"]),
                "failed_release": ("failed", ["release_criterion"]), "failed_gate": ("failed", ["gate_regression"])}
    for name, (result, doc, summary) in runs.items():
        status, kinds = expected[name]
        # A versioned document, with a status and typed reasons.
        assert doc["schema_version"] == 1 and doc["status"] == status and result.exit_code == doc["exit_code"]
        assert [r["kind"] for r in doc["reasons"]] == kinds, (name, doc["reasons"])
        for line in doc["reasons"] + doc["held"] + doc["not_checked"]:
            assert set(line) == {"kind", "classes", "scope", "criterion", "figures", "text"}
            assert all(isinstance(v, (int, float)) for v in line["figures"].values()), line
        # The words are those before the verdicts were typed (capture.py's runs, run ids masked).
        said = result.output[result.output.index("verdict: "):].splitlines()
        assert [RUN_ID.sub("RUN", x) for x in said[:len(before[name]["verdict"]) - 3]] \
            == before[name]["verdict"][:-3], name
        cli_agrees(result.output, result.exit_code, doc)
        markdown_agrees(summary, doc)
        report_agrees((project / "reports" / f"{doc['run_id']}.html").read_text(), doc)
        with Store(project / "simrun.duckdb", create=False) as store:
            # The verdict `simrun report` gives the run now (the criteria it ran with, no baseline
            # given): the very document; its JUnit agrees with it too.
            if name != "failed_gate":
                again = verdict_of_run(store, doc["run_id"])
                assert json.loads(verdict_json(again)) == doc
                junit_agrees(junit_xml(again), doc)

    # The figures are numbers a script can use without reading the words.
    (ceiling,) = runs["failed_release"][1]["reasons"]
    assert ceiling["classes"] == ["dead_end"] and ceiling["criterion"] == "release.max_rate.dead_end"
    assert ceiling["figures"]["rate"] > ceiling["figures"]["ceiling"] == 0.10
    (broken,) = runs["broken_guarantee"][1]["reasons"]
    assert broken["classes"] == ["phantom_receipt"] and broken["figures"]["phantom_receipt.conversations"] > 0

    # The failed gate: `simrun gate --verdict-json` writes the same document, the gate's per-class
    # results in it; its JUnit and Markdown agree; the dashboard's mark says it failed, exit 1.
    result, doc, _ = runs["failed_gate"]
    (regression,) = doc["reasons"]
    assert regression["classes"] == ["dead_end"] and regression["figures"]["cells"] == 70
    assert doc["gate"]["baseline"]["run_id"] == baseline and not doc["gate"]["passed"]
    (dead_end,) = [c for c in doc["gate"]["classes"] if c["failed"]]
    assert dead_end["class"] == "dead_end" and dead_end["regressed_overall"]
    assert [s["name"] for s in dead_end["regressed_in"]] == ["rename-trip"]
    gate = cli("gate", "--baseline", "baselines/main.json", "--candidate", doc["run_id"], "--verdict-json",
               "gate.json", "--junit", "gate.xml", "--markdown", "gate.md")
    assert gate.exit_code == 1, gate.output
    assert json.loads((project / "gate.json").read_text()) == doc
    cli_agrees(gate.output, gate.exit_code, doc)
    junit_agrees((project / "gate.xml").read_text(), doc)
    markdown_agrees((project / "gate.md").read_text(), doc)
    dashboard = (project / "reports" / "index.html").read_text()
    ship = re.search(rf'<p class="ship[^"]*" data-run="{doc["run_id"]}">(.*?)</p>', dashboard, re.S).group(1)
    assert f'class="run-verdict" data-status="{doc["status"]}"' in ship and f"(exit {doc['exit_code']})" in ship
    assert html.unescape(re.sub(r"<[^>]+>", "", ship)).count(regression["text"]) == 1
