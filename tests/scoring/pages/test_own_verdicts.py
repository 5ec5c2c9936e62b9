"""Each run's own verdict on the dashboard's runs table: judged once, remembered beside the page,
and a crafted memory never reaches the page as anything but text it could hold."""

from __future__ import annotations

import json

from simrun.scoring.pages import _own_verdicts as O
from simrun.scoring.pages._dashboard import build_dashboard
from simrun.scoring.store import Store
from tests.scoring.pages.test_dashboard import SETTINGS, a_run


def test_each_run_s_own_verdict_is_judged_once_then_remembered(tmp_path, demo, monkeypatch):
    db = tmp_path / "s.duckdb"
    runs = [a_run(db, demo, seed=seed, dead_end=0.6) for seed in (1, 2, 3)]
    out = tmp_path / "reports" / "index.html"
    calls = []
    real = O.verdict_of_run
    monkeypatch.setattr(O, "verdict_of_run", lambda store, run_id, *a, **k: calls.append(run_id) or real(
        store, run_id, *a, **k))
    with Store(db) as store:
        build_dashboard([store], out, gate_settings=SETTINGS)
    # The newest run's verdict is the page's top line's; the two before it are judged here.
    assert sorted(calls) == sorted(runs[:2])
    page = out.read_text()
    assert page.count("its verdict FAILED") == 3 and page.count('class="run-failed"') == 3
    calls.clear()
    with Store(db) as store:
        build_dashboard([store], out, gate_settings=SETTINGS)
    assert calls == []                                   # remembered
    assert out.read_text().count("its verdict FAILED") == 3


def test_a_crafted_memory_is_held_to_its_types_and_its_text_is_escaped(tmp_path, demo):
    db = tmp_path / "s.duckdb"
    runs = [a_run(db, demo, seed=seed, dead_end=0.6) for seed in (1, 2)]
    out = tmp_path / "reports" / "index.html"
    with Store(db) as store:
        build_dashboard([store], out, gate_settings=SETTINGS)
    memory = out.parent / O.MEMORY
    data = json.loads(memory.read_text())
    key = next(iter(data["verdicts"]))
    data["verdicts"][key] = [False, "failed", "FAILED", ["<script>alert(1)</script>"]]
    data["verdicts"]["junk"] = [1, 2, 3]
    memory.write_text(json.dumps(data))
    with Store(db) as store:
        build_dashboard([store], out, gate_settings=SETTINGS)
    page = out.read_text()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert runs[0] in page
    memory.write_text("{" * 100_000)                      # not JSON a reader survives: judged again
    with Store(db) as store:
        build_dashboard([store], out, gate_settings=SETTINGS)
    assert out.read_text().count("its verdict FAILED") == 2
