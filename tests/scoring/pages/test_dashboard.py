"""The dashboard: figures as the report counts them, like with like, the gate's verdicts (and
their memory), several files at once read as untrusted and never changed."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from simrun._errors import StoreError
from simrun._settings import Budgets, GateSection
from simrun.scoring.checks._scorer import ALL_CLASSES
from simrun.scoring.dataset._files import load_dataset
from simrun.scoring.gate._compare import gate_verdict
from simrun.scoring.gate._run_verdict import verdict_of_run
from simrun.scoring.gate._summary import summary_from_store
from simrun.scoring.pages import _dashboard as D
from simrun.scoring.pages import _verdicts as V
from simrun.scoring.store import _rates as R
from simrun.scoring.store._database import Store, reading
from simrun.simulator._identity import GitState
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser
from tests.conftest import ROOT
from tests.simulator.test_identity import Versioned

SETTINGS = Budgets().gate
HOSTILE = '</script><script>alert(1)</script><img src=x onerror="window.__pwned=1">'


def a_run(db, dataset, *, seed=1, labels=(), version="1.0", git=None, **faults) -> str:
    with Store(db) as store:
        return asyncio.run(run_matrix(dataset, PythonRuntime(Versioned(version, faults=faults or None, fault_seed=5)),
                                      ScriptedUser(), store, repetitions=1, seed=seed, budget=Decimal(1),
                                      labels=labels, git=git, resume=False)).run_id


def fewer_goals(tmp_path, drop: str):
    goals = tmp_path / "goals-fewer"
    shutil.copytree(ROOT / "goals", goals)
    (goals / f"{drop}.yaml").unlink()
    return load_dataset(ROOT / "personas", goals)


def data_of(html: str) -> dict:
    block = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)
    return json.loads(block.group(1))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_figures_are_those_of_the_report(tmp_path, demo):
    db = tmp_path / "s.duckdb"
    run_id = a_run(db, demo, phantom_receipt=0.4, dead_end=0.3, crash=0.1, audit_gap=0.3)
    with Store(db) as store:
        (run,) = D.collect(store, 0)
        rates = {r.cls: r for r in R.class_rates(store, run_id)}
        outcome = R.outcome(store, run_id)
    fired = 0
    for cls in ALL_CLASSES:
        k, n, low, high = run.rates[cls]
        assert (k, n) == (rates[cls].occurrences, rates[cls].scored), cls
        assert (low, high) == pytest.approx(rates[cls].interval, abs=1e-9), cls
        fired += bool(k)
    assert fired >= 3
    assert run.rates["goal_reached"][:2] == (outcome.goal_reached, outcome.goal_scored)
    assert run.rates["goal_reached"][2:] == pytest.approx(outcome.goal_interval, abs=1e-9)
    assert run.rates["runtime_error"][:2] == (outcome.runtime_errors, outcome.counted) and outcome.runtime_errors
    assert dict(run.broken) == {c: r.occurrences for c, r in rates.items() if r.kind == "guarantee" and r.occurrences}
    assert run.broken


@pytest.mark.parametrize("k, n", [(0, 1), (0, 70), (3, 70), (70, 70), (1, 2), (5, 350), (349, 350)])
def test_the_interval_from_sql_is_wilsons(k, n):
    with duckdb.connect() as con:
        low, high = con.execute(f"SELECT {D._sql_interval(str(k), str(n))}").fetchone()
        assert (low, high) == pytest.approx(R.wilson(k, n), abs=1e-12)
        assert con.execute(f"SELECT {D._sql_interval('0', '0')}").fetchone() == (None, None)


def test_two_datasets_are_two_groups_named_by_what_changed(tmp_path, demo):
    fewer = fewer_goals(tmp_path, "ask-bags")
    db = tmp_path / "s.duckdb"
    for dataset, seed in ((demo, 1), (fewer, 2), (demo, 3)):      # back to the first dataset at the end
        a_run(db, dataset, seed=seed)
    with Store(db) as store:
        groups = D.grouped(D.merged([D.collect(store, 0)]))
    assert [g.dataset_hash for g in groups] == [demo.hash, fewer.hash]
    assert [len(g.runs) for g in groups] == [2, 1]
    assert groups[0].change == "the first dataset"
    assert groups[1].change == "goals removed: ask-bags"
    items = dict(demo.item_hashes)
    edited = {**items, "persona:terse-tom": "0" * 16, "goal:new-one": "1" * 16}
    del edited["goal:ask-bags"]
    assert D.what_changed(items, edited) == "personas edited: terse-tom; goals added: new-one; goals removed: ask-bags"
    many = {**items, **{f"goal:g{i:02}": "x" for i in range(15)}}
    assert D.what_changed(items, many).endswith("g11 and 3 more")


def test_a_regression_is_failed_by_the_gate_and_an_aa_pair_is_not(tmp_path, demo):
    db = tmp_path / "s.duckdb"
    first = a_run(db, demo, seed=1, labels=("release-1.0",), dead_end=0.1)
    same = a_run(db, demo, seed=2, labels=("release-1.1",), dead_end=0.1)      # A/A: only the seed differs
    worse = a_run(db, demo, seed=3, labels=("release-1.2",), dead_end=0.6)
    out = tmp_path / "reports" / "index.html"
    with Store(db) as store:
        D.build_dashboard([store], out, gate_settings=SETTINGS)
        expected = {run: gate_verdict(summary_from_store(store, before), summary_from_store(store, run), SETTINGS)
                    for before, run in ((first, same), (same, worse))}
    assert expected[same].passed and not expected[worse].passed      # the gate's own verdicts
    runs = {r["id"]: r for r in data_of(out.read_text())["runs"]}
    assert "verdict" not in runs[first]
    assert runs[same]["verdict"] == "passed" and "headline" not in runs[same]
    assert runs[worse]["verdict"] == "failed" and runs[worse]["headline"] == expected[worse].headline()
    assert runs[worse]["failed"] == [c.cls.replace("goal_not_reached", "goal_reached")
                                     for c in expected[worse].failures] and "dead_end" in runs[worse]["failed"]
    rows = {run: cls for cls, run in re.findall(
        r'<tr data-run="\d+"( class="failed")?><td>(?:<a href="[^"]+">)?([\w-]+)', out.read_text())}
    assert {run for run, cls in rows.items() if cls} == {worse} and len(rows) == 3


def test_verdicts_are_judged_once_and_again_when_what_they_depend_on_changes(tmp_path, demo, monkeypatch):
    db = tmp_path / "s.duckdb"
    runs = [a_run(db, demo, seed=seed, dead_end=0.2) for seed in (1, 2, 3)]
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[1].run_id)
        return gate_verdict(*args, **kwargs)

    monkeypatch.setattr(V, "gate_verdict", counting)
    out = tmp_path / "reports" / "index.html"
    with Store(db) as store:
        D.build_dashboard([store], out, gate_settings=SETTINGS)
        assert calls == runs[1:]
        first = out.read_text()
        calls.clear()
        D.build_dashboard([store], out, gate_settings=SETTINGS)
        assert calls == []                          # remembered
        assert data_of(out.read_text())["runs"] == data_of(first)["runs"]
        D.build_dashboard([store], out, gate_settings=GateSection(alpha=0.01))
        assert calls == runs[1:]                    # other settings, other verdicts
        calls.clear()
        # The last run changes (a conversation less, as if rescored or cut): only its pair is judged again.
        store.con.execute("DELETE FROM conversations WHERE run_id = ? AND conversation_id = "
                          "(SELECT min(conversation_id) FROM conversations WHERE run_id = ?)", [runs[2], runs[2]])
        store.con.execute("DELETE FROM checks WHERE run_id = ? AND conversation_id NOT IN "
                          "(SELECT conversation_id FROM conversations WHERE run_id = ?)", [runs[2], runs[2]])
        D.build_dashboard([store], out, gate_settings=SETTINGS)
        assert calls == [runs[2]]
        calls.clear()
        for damaged in ("{not json", json.dumps({"format": "something else"}),
                        json.dumps({"format": V.FORMAT, "verdicts": {"k": {"state": "<b>", "headline": 1}}})):
            (out.parent / V.MEMORY).write_text(damaged)
            D.build_dashboard([store], out, gate_settings=SETTINGS)
            assert calls == []                      # the database remembers them too
            keys = [key for key, *_ in store.gate_verdicts()]
            store.con.execute("DELETE FROM gate_verdicts")
            store.con.execute("INSERT INTO gate_verdicts VALUES (?, '<b>', 'x', '[\"not a class\"]', now())",
                              [keys[0]])
            (out.parent / V.MEMORY).write_text(damaged)
            D.build_dashboard([store], out, gate_settings=SETTINGS)
            assert calls == runs[1:]                # a damaged memory is ignored, and written anew
            calls.clear()
        D.build_dashboard([store], out, gate_settings=None)
        assert calls == [] and "verdict" not in data_of(out.read_text())["runs"][-1]
        assert "not judged" in out.read_text()


def test_a_database_carries_its_verdicts_to_a_dashboard_that_reads_it_elsewhere(tmp_path, demo, monkeypatch):
    """A run's page judges it once, and its database keeps the verdict: a dashboard of CI
    artifacts, read-only and in a fresh folder, judges nothing again."""
    db = tmp_path / "s.duckdb"
    runs = [a_run(db, demo, seed=seed, dead_end=0.2 * (seed == 3)) for seed in (1, 2, 3)]
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[1].run_id)
        return gate_verdict(*args, **kwargs)

    monkeypatch.setattr(V, "gate_verdict", counting)
    with Store(db) as store:
        D.build_dashboard([store], tmp_path / "here" / "index.html", gate_settings=SETTINGS)
    assert calls == runs[1:]
    calls.clear()
    before = digest(db)
    with reading(db) as store:
        out = D.build_dashboard([store], tmp_path / "elsewhere" / "index.html", gate_settings=SETTINGS)
    assert calls == [] and digest(db) == before
    assert data_of(out.read_text())["runs"] == data_of((tmp_path / "here" / "index.html").read_text())["runs"]
    assert {r["id"] for r in data_of(out.read_text())["runs"] if r.get("verdict") == "failed"} == {runs[2]}


def test_only_finished_whole_runs_are_judged_against(tmp_path, demo):
    db = tmp_path / "s.duckdb"
    first, cut, sharded, last = (a_run(db, demo, seed=seed) for seed in (1, 2, 3, 4))
    with Store(db) as store:
        store.finish_run(cut, status="interrupted", spent_usd=Decimal(0))
        store.con.execute("UPDATE runs SET shard = '0/2' WHERE run_id = ?", [sharded])
        runs = D.merged([D.collect(store, 0)])
        D.judge_groups(D.grouped(runs), [store], SETTINGS, tmp_path)
    against = {r.run_id: r.against for r in runs}
    assert against == {first: None, cut: first, sharded: first, last: first}


def test_the_same_run_in_several_files_is_shown_once_and_a_different_one_under_its_id_apart(tmp_path, demo):
    a = tmp_path / "a.duckdb"
    run_id = a_run(a, demo, labels=("release-1.0",))
    b, c = tmp_path / "b.duckdb", tmp_path / "c.duckdb"
    shutil.copy(a, b)
    shutil.copy(a, c)
    with Store(c) as store:      # c holds the same run, cut shorter
        store.con.execute("DELETE FROM conversations WHERE run_id = ? AND persona = 'terse-tom'", [run_id])
    out = tmp_path / "reports" / "index.html"
    with reading(a) as sa, reading(b) as sb, reading(c) as sc:
        runs = D.merged([D.collect(s, i) for i, s in enumerate((sa, sb, sc))])
        assert [(r.source, r.also_in, r.twin) for r in runs] == [(0, [1], True), (2, [], True)]
        D.build_dashboard([sa, sb, sc], out, gate_settings=SETTINGS)
    html = out.read_text()
    assert html.count(f'<a href="{run_id}.html">') == 0       # no report beside this page
    rows = re.findall(r'<tr data-run="\d+"[^>]*>(.*?)</tr>', html, re.S)
    assert len(rows) == 2 and all(run_id in row for row in rows)
    tags = sorted(re.search(r'<td class="file">([^<]*)', row).group(1).strip() for row in rows)
    assert tags == ["[1] [2]", "[3]"]
    assert all("differs from a copy in another file" in row for row in rows)
    assert [str(p) in html for p in (a, b, c)] == [True, True, True]
    data = data_of(html)
    assert [r["n"] for r in data["runs"]] == [70, 60] and [r["file"] for r in data["runs"]] == [0, 2]


def test_a_crafted_run_id_is_refused_naming_the_file(tmp_path, demo):
    db = tmp_path / "s.duckdb"
    run_id = a_run(db, demo)
    with Store(db) as store:
        store.con.execute("UPDATE runs SET run_id = '../../escaped' WHERE run_id = ?", [run_id])
    with reading(db) as store, pytest.raises(StoreError, match=f"{re.escape(str(db))} holds a run id '../../escaped'"):
        D.build_dashboard([store], tmp_path / "index.html")
    assert not (tmp_path / "index.html").exists()


def test_every_text_from_a_store_is_text_on_the_page(tmp_path, demo):
    db = tmp_path / "s.duckdb"
    run_id = a_run(db, demo, labels=(HOSTILE, "ok"), version=HOSTILE, git=GitState("a" * 40, HOSTILE))
    with Store(db) as store:
        store.con.execute("UPDATE runs SET user_backend = ? WHERE run_id = ?", [f"openai:{HOSTILE}", run_id])
        D.build_dashboard([store], tmp_path / "index.html", gate_settings=SETTINGS)
    html = (tmp_path / "index.html").read_text()
    assert "<img src=x" not in html and "<script>alert" not in html
    assert html.count("<script") == 2 and html.count("</script>") == 2     # the data and the page's own code
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    (run,) = data_of(html)["runs"]
    assert run["labels"] == [HOSTILE, "ok"] and run["version"] == HOSTILE and run["branch"] == HOSTILE
    assert run["user"] == f"openai:{HOSTILE}"
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "http://" not in html and "https://" not in html and "@import" not in html and "url(" not in html


def test_stores_are_read_without_a_change_even_from_an_older_simrun(tmp_path, demo):
    current, older = tmp_path / "current.duckdb", tmp_path / "older.duckdb"
    a_run(current, demo, labels=("now",))
    old_run = a_run(older, demo, seed=2, labels=("then",))
    with Store(older) as store:     # as simrun wrote it before migration 6
        store.con.execute("DELETE FROM schema_migrations WHERE version >= 6")
        for table, column in (("runs", "labels"), ("runs", "runtime_version"), ("runs", "git_commit"),
                              ("runs", "git_branch"), ("conversations", "session_id"), ("runs", "user_output"),
                              ("checks", "reason")):
            store.con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        store.con.execute("DROP TABLE user_checks")
        store.con.execute("DROP TABLE gate_verdicts")
        store.con.execute("DROP TABLE goal_problems")
        store.con.execute("CHECKPOINT")
    before = {p: digest(p) for p in (current, older)}
    with reading(current) as a, reading(older) as b:
        assert b.path == str(older)
        out = D.build_dashboard([a, b], tmp_path / "index.html", gate_settings=SETTINGS)
    assert {p: digest(p) for p in (current, older)} == before
    assert not Path(f"{older}.wal").exists() and not Path(f"{current}.wal").exists()
    runs = {r["id"]: r for r in data_of(out.read_text())["runs"]}
    assert runs[old_run]["labels"] == [] and len(runs) == 2
    with duckdb.connect(str(older), read_only=True) as con:
        assert con.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == 5


def test_the_top_line_judges_the_newest_run_of_each_dataset_against_the_baseline(tmp_path, demo):
    """The issue's case: a release candidate as bad as the one before it passes against that run,
    and must still read as failed against the blessed baseline, at the top of the page."""
    db = tmp_path / "s.duckdb"
    base = a_run(db, demo, seed=1, labels=("release-1.0",))
    first = a_run(db, demo, seed=2, labels=("rc-1",), dead_end=0.6)
    second = a_run(db, demo, seed=3, labels=("rc-2",), dead_end=0.6)        # newest of the demo dataset
    fine = a_run(db, fewer_goals(tmp_path, "rename-trip"), seed=4, labels=("rc-3",))   # newest of the other
    out = tmp_path / "reports" / "index.html"
    with Store(db) as store:
        baseline = summary_from_store(store, base)
        D.build_dashboard([store], out, baseline=baseline, gate_settings=SETTINGS)
        expected = {run: gate_verdict(baseline, summary_from_store(store, run), SETTINGS) for run in (second, fine)}
        before = gate_verdict(summary_from_store(store, first), summary_from_store(store, second), SETTINGS)
    assert not expected[second].passed and expected[fine].passed and before.passed
    assert expected[fine].sharing.removed                # the other dataset is gated on what it shares
    html = out.read_text()
    top = html.split('<div id="ship">', 1)[1].split("</div>", 1)[0]
    lines = re.findall(r'<p class="ship( failed)?" data-run="([^"]+)">(.*?)</p>', top, re.S)
    assert [(run, bool(failed)) for failed, run, _ in lines] == [(fine, False), (second, True)]
    said = {run: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text)) for _, run, text in lines}
    assert "rc-3" in said[fine] and "✓ passed" in said[fine]
    assert "rc-2" in said[second] and f"✗ {expected[second].headline()}" in said[second]
    assert "dead_end" in said[second] and html.index('id="ship"') < html.index('id="trends"')
    runs = {r["id"]: r for r in data_of(html)["runs"]}
    assert runs[second]["base"] == "failed" and runs[second]["verdict"] == "passed"    # as bad as the one before
    assert runs[second]["base_headline"] == expected[second].headline()
    assert runs[fine]["base"] == "passed" and runs[base]["base"] == "passed"
    # Without a baseline, the top says that nothing here judges a release against one, and still
    # gives the newest runs' whole verdicts: the one their exit status gave.
    with Store(db) as store:
        D.build_dashboard([store], out, gate_settings=SETTINGS)
        exits = {run: verdict_of_run(store, run, None).exit_code for run in (second, fine)}
    html = out.read_text()
    assert 'id="ship" class="meta">No baseline was given' in html and "no regression was checked" in html
    assert exits == {second: 1, fine: 0}
    assert ship_lines(html, "ship-runs") == {fine: ("passed", 0), second: ("failed", 1)}
    # A baseline as bad as the candidate: the gate finds no regression, and the run still fails
    # its release ceiling. The top line is the run's verdict, never the gate's ✓ alone.
    with Store(db) as store:
        D.build_dashboard([store], out, baseline=summary_from_store(store, first), gate_settings=SETTINGS)
    html = out.read_text()
    assert ship_lines(html, "ship")[second] == ("failed", 1)
    line = re.sub(r"<[^>]+>", "", re.search(rf'data-run="{second}">(.*?)</p>', html, re.S).group(1))
    assert "release.max_rate.dead_end" in line and "✓ no regression" in line and "✓ passed" not in line


def ship_lines(html: str, block: str) -> dict[str, tuple[str, int]]:
    """The top's lines: run -> (its status as the page gives it, the exit status it names); a red
    line exactly where the status is not passed."""
    top = html.split(f'<div id="{block}">', 1)[1].split("</div>", 1)[0]
    found = {}
    for failed, run, status, code in re.findall(r'<p class="ship( failed)?" data-run="([^"]+)">.*?'
                                                r'data-status="([^"]+)">.*?\(exit (\d)\)', top, re.S):
        assert bool(failed) == (status != "passed"), run
        found[run] = (status, int(code))
    return found
