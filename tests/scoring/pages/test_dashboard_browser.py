"""The dashboard in a real browser: Debian's headless Chromium, driven by Playwright.

Two databases, as CI keeps them (one per release line), are shown on one page: three labelled
releases of the demo dataset (the second an A/A of the first, the third a regression, with a
hostile label), and two runs of a dataset with a goal removed (one played by a model user, one
with no report beside the page). A second page holds a long synthetic history, to load the axis
labels. The browser and the page-listening helpers are those of the report's browser test.
"""

from __future__ import annotations

import importlib.util
import itertools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from simrun.scoring.pages._dashboard import build_dashboard
from simrun.scoring.pages._report import build_report
from simrun.scoring.store import _rates as R
from simrun.scoring.store._database import Store, reading
from tests.conftest import ROOT
from tests.fixtures.browser import open_page
from tests.scoring.pages.test_dashboard import HOSTILE, SETTINGS, a_run, fewer_goals

# On one xdist worker: its browser and its runs are made once.
pytestmark = pytest.mark.xdist_group("dashboard-browser")


@pytest.fixture(scope="module")
def history(tmp_path_factory, demo):
    """The runs, their stores, and the page built from both stores."""
    tmp = tmp_path_factory.mktemp("dashboard")
    fewer = fewer_goals(tmp, "ask-bags")
    a, b = tmp / "releases.duckdb", tmp / "trimmed.duckdb"
    plan = [(a, demo, 1, ("release-1.0",), "1.0", {"dead_end": 0.1}),
            (a, demo, 2, ("release-1.1",), "1.1", {"dead_end": 0.1}),              # A/A
            (a, demo, 3, ("release-1.2", HOSTILE), "1.2", {"dead_end": 0.6}),      # a regression
            (b, fewer, 4, ("release-1.2",), "1.2", {}),
            (b, fewer, 5, (), "1.3", {"loop": 0.3})]

    def make():
        return [a_run(db, dataset, seed=seed, labels=labels, version=version, **faults)
                for db, dataset, seed, labels, version, faults in plan]

    # In a thread of its own: the sync Playwright API leaves this thread with an event loop running.
    with ThreadPoolExecutor(1) as pool:
        ids = pool.submit(make).result()
    reports = tmp / "reports"
    with Store(b) as store:
        store.con.execute("UPDATE runs SET user_backend = 'openai:gpt-4.1-mini', spent_usd = 1.25 WHERE run_id = ?",
                          [ids[3]])
    for db, run_id in zip([p[0] for p in plan], ids[:4]):      # the last run has no report
        with Store(db) as store:
            build_report(store, run_id, reports)
    with reading(a) as sa, reading(b) as sb:
        page = build_dashboard([sa, sb], reports / "index.html", gate_settings=SETTINGS)
    return {"ids": ids, "stores": [p[0] for p in plan], "page": page.resolve(), "demo": demo, "fewer": fewer,
            "labels": [p[3] for p in plan], "versions": [p[4] for p in plan]}


@pytest.fixture()
def opened(browser, history):  # noqa: F811
    context, o = open_page(browser, history["page"])
    yield o
    context.close()


def rows(page) -> list[dict]:
    return page.locator("#runs tr[data-run]").evaluate_all("""els => els.map(e => ({
        run: e.querySelector('td').textContent.trim().split(' ')[0], failed: e.classList.contains('failed'),
        verdict: e.querySelector('td.verdict').textContent, visible: e.checkVisibility()}))""")


def points(page, chart: str) -> list[str]:
    """The run of every point drawn in a chart (by the run index the page gives it)."""
    return page.locator(f"{chart} circle").evaluate_all(
        "els => els.map(e => JSON.parse(document.getElementById('data').textContent).runs[+e.dataset.run].id)")


def test_loads_with_no_console_error_and_no_request_but_the_file(opened):
    page = opened.page
    assert page.title().startswith("simrun")
    assert page.locator("figure.chart circle").count() > 10
    assert opened.errors == [] and opened.dialogs == []
    assert opened.requests == [opened.url], opened.requests


def test_two_datasets_give_two_groups_named_by_what_changed(opened, history):
    page = opened.page
    groups = page.locator("section.group")
    assert groups.count() == 2
    assert groups.evaluate_all("els => els.map(e => e.dataset.dataset)") == [history["demo"].hash,
                                                                              history["fewer"].hash]
    assert "goals removed: ask-bags" in groups.nth(1).locator("h3").inner_text()
    for n, runs in ((0, history["ids"][:3]), (1, history["ids"][3:])):
        chart = f"#group-{n} figure[data-class='goal_reached']"
        assert points(page, chart) == runs        # each line holds its own dataset's runs, in time order


def test_hovering_a_point_shows_its_values(opened, history):
    page = opened.page
    run_id = history["ids"][2]
    with Store(history["stores"][2]) as store:
        rate = next(r for r in R.class_rates(store, run_id) if r.cls == "dead_end")
    low, high = rate.interval
    index = page.evaluate(f"JSON.parse(document.getElementById('data').textContent).runs"
                          f".findIndex(r => r.id === '{run_id}')")
    tip = page.locator("#tip")
    assert not tip.is_visible()
    page.hover(f"#group-0 figure[data-class='dead_end'] circle[data-run='{index}']")
    assert tip.is_visible()
    text = tip.inner_text()
    assert run_id in text and "release-1.2" in text and HOSTILE in text
    assert (f"dead_end: {100 * rate.rate:.1f}% ({rate.occurrences}/{rate.scored}), "
            f"95% interval {100 * low:.1f}%–{100 * high:.1f}%") in text
    assert "✗ FAILED" in text and "undefined" not in text
    page.hover(f"#group-0 figure[data-class='dead_end'] circle[data-run='{index - 1}']")   # the A/A run
    assert "✓ no regression against the run before" in tip.inner_text() and "undefined" not in tip.inner_text()
    page.mouse.move(0, 0)
    assert not tip.is_visible()
    assert opened.errors == []


def test_every_link_opens_an_existing_report(browser, opened, history):  # noqa: F811
    page = opened.page
    hrefs = page.locator("a[href]").evaluate_all(
        "els => els.map(e => new URL(e.getAttribute('href'), document.baseURI).href)")
    assert len(hrefs) > 10
    targets = {Path(h.removeprefix("file://")) for h in hrefs}
    assert {t.name for t in targets} == {f"{run_id}.html" for run_id in history["ids"][:4]}
    for target in sorted(targets):
        assert target.is_file()
        context, report = open_page(browser, target)
        try:
            assert report.page.title() == f"simrun · {target.stem}" and report.errors == []
        finally:
            context.close()


def test_the_filters_hide_and_show_the_right_runs(opened, history):
    page = opened.page
    ids, labels, versions = history["ids"], history["labels"], history["versions"]
    every = set(ids)

    def check(expected: set[str]):
        shown = rows(page)
        assert {r["run"] for r in shown} == every                      # hidden, never removed
        assert {r["run"] for r in shown if r["visible"]} == expected
        for n, group in ((0, ids[:3]), (1, ids[3:])):
            wanted = [r for r in group if r in expected]
            assert page.locator(f"#group-{n}").is_visible() == bool(wanted)
            assert points(page, f"#group-{n} figure[data-class='goal_reached']") == wanted
        assert points(page, "#cost-run") == [r for r in ids if r in expected]
        assert page.locator("#f-count").inner_text() == f"{len(expected)} of {len(ids)} runs shown"

    check(every)
    cases = [("#f-label", "release-1.2", {r for r, ls in zip(ids, labels) if "release-1.2" in ls}),
             ("#f-label", "(no label)", {r for r, ls in zip(ids, labels) if not ls}),
             ("#f-user", "openai:gpt-4.1-mini", {ids[3]}),
             ("#f-version", "1.1", {r for r, v in zip(ids, versions) if v == "1.1"})]
    for select, label, expected in cases:
        assert 0 < len(expected) < len(ids)
        page.select_option(select, label=label)
        check(expected)
        page.select_option(select, label="any")
        check(every)
    page.select_option("#f-label", label="release-1.2")
    page.select_option("#f-user", label="scripted")
    check({ids[2]})
    page.select_option("#f-version", label="1.0")
    check(set())
    assert opened.errors == []


def no_text_overlaps(page) -> int:
    """Fails if two text boxes of one chart intersect; returns how many texts were checked."""
    boxes = page.locator("svg.chart").evaluate_all("""svgs => svgs.map(svg =>
        [...svg.querySelectorAll('text')].map(t => { const b = t.getBoundingClientRect();
            return {text: t.textContent, left: b.left, right: b.right, top: b.top, bottom: b.bottom}; }))""")
    for chart in boxes:
        for a, b in itertools.combinations(chart, 2):
            apart = (a["right"] <= b["left"] or b["right"] <= a["left"]
                     or a["bottom"] <= b["top"] or b["bottom"] <= a["top"])
            assert apart, (a, b)
    return sum(len(chart) for chart in boxes)


def test_no_two_text_boxes_in_a_chart_intersect(opened):
    page = opened.page
    assert no_text_overlaps(page) > 30
    page.select_option("#f-label", label="release-1.2")
    no_text_overlaps(page)


@pytest.fixture(scope="module")
def long_history(tmp_path_factory):
    """A page over 120 synthetic runs, every one labelled, to crowd the axes."""
    spec = importlib.util.spec_from_file_location("dashboard_scale", ROOT / "benchmarks" / "dashboard_scale.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    tmp = tmp_path_factory.mktemp("long")
    with Store(tmp / "h.duckdb") as store:
        bench.fill(store, 120)
        store.con.execute("UPDATE runs SET labels = '[\"a rather long release label that goes on\"]' "
                          "WHERE hash(run_id) % 3 = 0")
        return build_dashboard([store], tmp / "index.html", gate_settings=None).resolve()


def test_a_crowded_axis_keeps_its_labels_apart(browser, long_history):  # noqa: F811
    context, o = open_page(browser, long_history)
    try:
        assert o.page.locator("section.group").count() == 3
        assert no_text_overlaps(o.page) > 100
        assert o.errors == []
    finally:
        context.close()


def test_a_hostile_label_renders_as_text(opened):
    page = opened.page
    assert opened.dialogs == []
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator('img[src="x"]').count() == 0
    assert page.evaluate("[...document.scripts].filter(s => s.textContent.includes('alert(1)') && "
                         "s.id !== 'data').length") == 0
    assert HOSTILE in page.locator("#runs").inner_text()
    chip = page.locator("#runs span.chip").filter(has_text=HOSTILE)
    assert chip.count() == 1 and chip.is_visible() and chip.inner_text() == HOSTILE
    page.select_option("#f-label", label=HOSTILE)
    assert [r["run"] for r in rows(page) if r["visible"]] == [page.evaluate(
        "JSON.parse(document.getElementById('data').textContent).runs[2].id")]
    assert opened.errors == [] and opened.dialogs == []


def test_a_regression_between_releases_is_marked_and_an_aa_pair_is_not(opened, history):
    page = opened.page
    first, same, worse = history["ids"][:3]
    by_run = {r["run"]: r for r in rows(page)}
    assert by_run[worse]["failed"] and "✗" in by_run[worse]["verdict"] and "dead_end" in by_run[worse]["verdict"]
    assert not by_run[same]["failed"] and "✓ no regression" in by_run[same]["verdict"]
    assert not by_run[first]["failed"] and "no earlier finished run" in by_run[first]["verdict"]
    assert [r for r in by_run.values() if r["failed"]] == [by_run[worse]]
    failed_on = page.evaluate(f"JSON.parse(document.getElementById('data').textContent).runs"
                              f".find(r => r.id === '{worse}').failed")
    assert "dead_end" in failed_on
    for chart in page.locator("#group-0 figure.chart").all():      # red only where the gate failed it
        marked = chart.locator("circle.failed").evaluate_all(
            "els => els.map(e => JSON.parse(document.getElementById('data').textContent).runs[+e.dataset.run].id)")
        assert marked == ([worse] if chart.get_attribute("data-class") in failed_on else [])
    red = page.locator("#group-0 figure[data-class='dead_end'] circle.failed")
    assert red.evaluate("e => getComputedStyle(e).fill") == "rgb(207, 34, 46)"
