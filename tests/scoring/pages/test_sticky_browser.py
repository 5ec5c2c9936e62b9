"""Pages that show what they point to, in Debian's headless Chromium (issue 41, part 5).

- In the report, every contents link lands with its target's header below the sticky filter bar.
- On the dashboard, the filter bar never covers the runs table's header, wherever the table is scrolled.
- The dashboard's runs table marks a run whose own verdict failed (here, a release ceiling),
  beside the gate's answer, which alone reads "no regression".
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from simrun.scoring.pages._dashboard import build_dashboard
from simrun.scoring.pages._report import build_report
from simrun.scoring.store._database import Store, reading
from tests.fixtures.browser import open_page
from tests.scoring.pages.test_dashboard import SETTINGS, a_run
from tests.scoring.store.test_store import stored_run

pytestmark = pytest.mark.xdist_group("sticky-browser")

FAULTS = {"phantom_receipt": 0.4, "loop": 0.4, "dead_end": 0.3, "audit_gap": 0.3, "wrong_record": 0.3}


@pytest.fixture(scope="module")
def pages(tmp_path_factory, demo) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("sticky")
    # In a thread of its own: the sync Playwright API leaves this thread with an event loop running.
    with ThreadPoolExecutor(1) as pool:
        run_id = pool.submit(stored_run, tmp / "s.duckdb", demo, **FAULTS).result()
        runs = pool.submit(lambda: [a_run(tmp / "d.duckdb", demo, seed=seed, dead_end=0.6) for seed in
                                    range(1, 13)]).result()
    with Store(tmp / "s.duckdb") as store:
        report = build_report(store, run_id, tmp / "reports").resolve()
    with reading(tmp / "d.duckdb") as store:
        board = build_dashboard([store], tmp / "board" / "index.html", gate_settings=SETTINGS).resolve()
    return {"report": report, "dashboard": board, "runs": runs}


@pytest.fixture(params=[(1280, 800), (700, 600)], ids=["wide", "narrow"])
def viewport(request):
    return {"width": request.param[0], "height": request.param[1]}


def test_every_contents_link_lands_with_its_target_s_header_below_the_bar(browser, pages, viewport):
    context, opened = open_page(browser, pages["report"])
    page = opened.page
    try:
        page.set_viewport_size(viewport)
        links = page.locator("#toc a[href^='#']").evaluate_all("els => els.map(e => e.getAttribute('href'))")
        assert len(links) >= 8 and any(link.startswith("#conv-") for link in links)
        for href in links:
            page.evaluate("window.scrollTo(0, 0)")
            page.locator(f"#toc a[href='{href}']").first.click()
            page.wait_for_timeout(50)
            place = page.evaluate("""href => {
                const target = document.getElementById(decodeURIComponent(href.slice(1)));
                const head = target.matches('h2, h3, h4, header') ? target
                    : target.querySelector(':scope > header, :scope > h2, :scope > h3, :scope > summary') || target;
                const bar = document.querySelector('.filters').getBoundingClientRect();
                const box = head.getBoundingClientRect();
                const max = document.documentElement.scrollHeight - innerHeight;
                return {head: box.top, headBottom: box.bottom, bar: bar.bottom, barTop: bar.top,
                        end: Math.abs(scrollY - max) < 2, height: innerHeight};
            }""", href)
            # Not under the bar (below it, or above a bar not yet stuck), on screen (or as near as
            # the page's end lets it come).
            assert place["head"] >= place["bar"] - 1 or place["headBottom"] <= place["barTop"], (href, place)
            assert place["head"] >= 0, (href, place)
            assert place["head"] < place["height"] or place["end"], (href, place)
    finally:
        context.close()


def test_the_dashboard_s_bar_never_covers_the_runs_table_s_header(browser, pages, viewport):
    context, opened = open_page(browser, pages["dashboard"])
    page = opened.page
    try:
        page.set_viewport_size(viewport)
        assert page.locator("#runs tr[data-run]").count() == 12
        top = page.evaluate("document.querySelector('#runs').getBoundingClientRect().top + scrollY")
        for down in (-40, 0, 60, 200, 400):
            page.evaluate(f"window.scrollTo(0, {top + down})")
            page.wait_for_timeout(30)
            place = page.evaluate("""() => {
                const bar = document.getElementById('filters').getBoundingClientRect();
                const th = document.querySelector('#runs th').getBoundingClientRect();
                const table = document.getElementById('runs').getBoundingClientRect();
                return {bar: bar.bottom, barTop: bar.top, th: th.top, thBottom: th.bottom, tableBottom: table.bottom};
            }""")
            if place["tableBottom"] <= place["bar"] + place["thBottom"] - place["th"]:
                continue        # the table has scrolled past: no header to show
            # The header is never under the bar: below it, or the bar is not over the table at all.
            assert place["th"] >= place["bar"] - 1 or place["thBottom"] <= place["barTop"], (down, place)
            if down > 0:
                assert place["th"] >= place["bar"] - 1 and place["th"] < place["bar"] + 2, (down, place)
    finally:
        context.close()


def test_the_runs_table_marks_a_run_whose_verdict_failed_beside_the_gate_s_answer(browser, pages):
    context, opened = open_page(browser, pages["dashboard"])
    page = opened.page
    try:
        cells = page.locator("#runs tr[data-run] td.verdict").evaluate_all("""els => els.map(e => ({
            text: e.innerText, mark: !!e.querySelector('.run-failed .mark.failed'),
            visible: e.querySelector('.run-failed') ? e.querySelector('.run-failed').checkVisibility() : false}))""")
        # Every run broke its dead_end ceiling (60% of conversations), whatever the gate said of it
        # against the run before: each is marked, visibly, beside the gate's answer.
        assert all(c["mark"] and c["visible"] and "its verdict FAILED" in c["text"] for c in cells), cells
        assert any("no regression" in c["text"] for c in cells)
        assert any("dead_end" in c["text"] for c in cells)
    finally:
        context.close()
