"""The HTML report: self-contained, escaped, and showing every rate and the worst transcripts."""

from __future__ import annotations

import html as html_lib
import re
from dataclasses import replace

from simrun.scoring.checks._scorer import ALL_CLASSES
from simrun.scoring.pages._report import build_report
from simrun.scoring.store._database import Store
from tests.scoring.store.test_store import stored_run


def test_report_is_self_contained_and_complete(tmp_path, demo):
    db = tmp_path / "s.duckdb"
    run_id = stored_run(db, demo, phantom_receipt=0.5)
    with Store(db) as store:
        path = build_report(store, run_id, tmp_path / "reports")
    html = path.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "http://" not in html and "https://" not in html and "@import" not in html
    for cls in ALL_CLASSES:
        assert f"<td>{cls}</td>" in html or f'href="#class-{cls}">{cls}</a>' in html
    assert 'href="#class-phantom_receipt"' in html and 'id="class-phantom_receipt"' in html
    assert "phantom_receipt</b> reported as done but not committed" in html
    assert "Conversations are ranked by" in html
    assert 'id="f-class"' in html and 'id="f-persona"' in html and 'id="f-goal"' in html


def test_replies_are_shown_as_text(tmp_path, demo, monkeypatch):
    from simrun.examples.tripdesk.session import Session

    original = Session._finish

    def hostile(self, out):
        result = original(self, out)
        result["reply"] = '<script>alert(1)</script><img src=x onerror="alert(2)"> ' + result["reply"]
        return result

    monkeypatch.setattr(Session, "_finish", hostile)
    db = tmp_path / "s.duckdb"
    run_id = stored_run(db, demo, dead_end=1.0)
    with Store(db) as store:
        html = build_report(store, run_id, tmp_path / "reports").read_text()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script>") == 1   # the report's own filter script, nothing else


def test_the_report_and_the_gate_always_agree(tmp_path, demo, monkeypatch):
    """Against a baseline, the report shows the verdict `simrun gate` gives, for a pass and a fail."""
    import shutil

    from typer.testing import CliRunner

    from simrun.cli._main import app
    from tests.conftest import ROOT

    for name in ("personas", "goals"):
        shutil.copytree(ROOT / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    cli = CliRunner()
    toml = tmp_path / "simrun.toml"
    for faults in ("dead_end=0.1", "dead_end=0.1", "dead_end=0.6"):
        toml.write_text(f'[run]\nrepetitions = 2\n[runtime.options]\nfaults = "{faults}"\nfault_seed = {len(faults)}\n')
        assert cli.invoke(app, ["--fresh"]).exit_code in (0, 1)
    with Store(tmp_path / "simrun.duckdb", create=False) as store:
        first, same, worse = [r["run_id"] for r in reversed(store.runs())]
    for candidate in (same, worse):
        gate = cli.invoke(app, ["gate", "--baseline", first, "--candidate", candidate])
        made = cli.invoke(app, ["report", candidate, "--baseline", first])
        assert made.exit_code == 0, made.output
        html = (tmp_path / "reports" / f"{candidate}.html").read_text()
        # The page's verdict is the exit status the gate gave, whatever decided it (here a
        # release ceiling can fail a run whose comparison passed: two repetitions of 10% dead ends
        # sometimes show more than 10%), and the comparison says what the gate printed of it.
        verdict = re.search(r'<section id="verdict"[^>]*data-exit="(\d)"', html)
        assert verdict and int(verdict.group(1)) == gate.exit_code
        comparison = re.search(r"Comparison: ((passed|FAILED)[^<]*)</b>", html)
        assert comparison and html_lib.unescape(comparison.group(1)) in gate.output
    assert gate.exit_code == 1 and "dead_end</td>" in html and ">regression</td>" in html
    index = (tmp_path / "reports" / "index.html").read_text()
    assert all(run in index for run in (first, same, worse)) and 'id="trends"' in index
    assert "http://" not in index and "https://" not in index


def test_charts_are_inline_svg_and_pass_k_is_shown(tmp_path, demo):
    db = tmp_path / "s.duckdb"
    run_id = stored_run(db, demo, dead_end=0.3)
    with Store(db) as store:
        html = build_report(store, run_id, tmp_path / "reports").read_text()
    assert html.count("<svg ") >= 5 and "xmlns" not in html
    assert 'id="pass-k"' in html and "pass^k" in html
    assert "<figcaption>dead_end</figcaption>" in html and "<figcaption>goal_reached</figcaption>" in html
    assert "turns to the goal" in html and "cost per conversation" in html


def test_each_reason_of_the_verdict_links_the_evidence_behind_it():
    from simrun.scoring.gate._verdict_lines import Kind, Line
    from simrun.scoring.pages._report import evidence_anchor

    fired = ["dead_end", "audit_gap", "phantom_receipt"]
    gate = object()
    # The first class the reason concerns that fired, wherever it is in the list of classes that fired.
    broken = Line(Kind.GUARANTEES_BROKEN, "guarantees broken: phantom_receipt in 3 conversation(s), audit_gap in 1",
                  classes=("phantom_receipt", "audit_gap"))
    assert evidence_anchor(broken, fired, None) == "#fired-phantom_receipt"
    ceiling = Line(Kind.RELEASE_CRITERION, "release.max_rate.dead_end: dead_end 25.0% (5/20), above the ceiling",
                   classes=("dead_end",), criterion="release.max_rate.dead_end")
    assert evidence_anchor(ceiling, fired, gate) == "#fired-dead_end"
    regression = Line(Kind.GATE_REGRESSION, "gate against the baseline r1 (b.json), on 70 cells: regressions: "
                      "dead_end", classes=("dead_end",))
    assert evidence_anchor(regression, fired, gate) == "#gate"
    new = Line(Kind.NEW_NOT_GATED, "new, not gated: goal g (added): release.max_rate.loop", classes=("loop",))
    assert evidence_anchor(new, fired, gate) == "#gate"
    # No gate on the page, or no class it concerns that fired: the class rates.
    refused = Line(Kind.BASELINE_REFUSED, "gate: the baseline b.json cannot judge this run: other dataset")
    assert evidence_anchor(refused, fired, None) == "#rates"
    runtime = Line(Kind.RELEASE_CRITERION, "release.fail_on_runtime_error: the runtime failed in 2",
                   classes=("runtime_error",))
    assert evidence_anchor(runtime, fired, None) == "#rates"
    # The link follows the record, not its words: a reason reworded to name another class still
    # leads to the class it concerns.
    assert evidence_anchor(replace(ceiling, text="audit_gap said otherwise"), fired, gate) == "#fired-dead_end"
