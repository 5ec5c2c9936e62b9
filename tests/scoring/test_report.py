"""The HTML report: self-contained, escaped, and showing every rate and the worst transcripts."""

from __future__ import annotations

import re

from scoring.report import build_report
from scoring.scorer import ALL_CLASSES
from scoring.store import Store

from tests.scoring.test_store import stored_run


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
    import tripdesk.runtime as rt

    original = rt.Session._finish

    def hostile(self, out):
        result = original(self, out)
        result["reply"] = '<script>alert(1)</script><img src=x onerror="alert(2)"> ' + result["reply"]
        return result

    monkeypatch.setattr(rt.Session, "_finish", hostile)
    db = tmp_path / "s.duckdb"
    run_id = stored_run(db, demo, dead_end=1.0)
    with Store(db) as store:
        html = build_report(store, run_id, tmp_path / "reports").read_text()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script>") == 1   # the report's own filter script, nothing else
