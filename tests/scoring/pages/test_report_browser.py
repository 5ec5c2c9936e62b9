"""The HTML report in a real browser: Debian's headless Chromium, driven by Playwright.

A report of a run with planted faults, and with a hostile reply in every runtime turn, is opened
from its file:// URL. It must load with no console error and no request but the file itself,
show the hostile reply as text and run none of it, and its filters must show exactly the
transcripts that match. The last test proves that the listeners catch what the others say is
absent, so that none of them passes for want of hearing.

Chromium is never downloaded: Playwright drives /usr/bin/chromium (the `browser` fixture, in this
folder's conftest.py). If it is missing, the tests fail (they do not skip), saying how to
install it; `.ci/run` installs it.
"""

from __future__ import annotations

import itertools
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from simrun.scoring.pages._report import build_report
from simrun.scoring.store._database import Store
from tests.fixtures.browser import open_page
from tests.scoring.store.test_store import stored_run

# On one xdist worker: its browser and its report are made once.
pytestmark = pytest.mark.xdist_group("report-browser")

SCRIPT = "<script>alert(1)</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
HOSTILE = f"{SCRIPT}{IMG} "
# wrong_record leaves goals not reached (the write lands on another trip): a crash on the first turn
# decides no goal (issue 38), so it no longer makes a failed cell of its own.
FAULTS = {"phantom_receipt": 0.4, "loop": 0.4, "dead_end": 0.3, "audit_gap": 0.3, "crash": 0.1, "wrong_record": 0.3}


@pytest.fixture(scope="module")
def report(tmp_path_factory, demo) -> Path:
    """A report of the demo matrix with faults planted, every runtime reply prefixed with markup."""
    from simrun.examples.tripdesk.session import Session

    tmp = tmp_path_factory.mktemp("browser-report")
    original = Session._finish

    def hostile(self, out):
        result = original(self, out)
        result["reply"] = HOSTILE + result["reply"]
        return result

    with pytest.MonkeyPatch.context() as mp, ThreadPoolExecutor(1) as pool:
        mp.setattr(Session, "_finish", hostile)
        # In a thread of its own: once Playwright's sync API has started, this thread has an
        # event loop running, and the run's asyncio.run() would refuse to start.
        run_id = pool.submit(stored_run, tmp / "s.duckdb", demo, **FAULTS).result()
    with Store(tmp / "s.duckdb") as store:
        return build_report(store, run_id, tmp / "reports").resolve()


@pytest.fixture()
def opened(browser, report):
    context, o = open_page(browser, report)
    yield o
    context.close()


def test_loads_with_no_console_error_and_no_request_but_the_file(opened):
    page = opened.page
    assert page.title().startswith("simrun")
    assert page.locator("section.conv").count() > 0
    assert opened.errors == []
    assert opened.requests == [opened.url], opened.requests


def test_a_hostile_reply_is_shown_as_text_and_runs_nothing(opened):
    page = opened.page
    assert opened.dialogs == []
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("""() => [...document.scripts].filter(s => s.textContent.includes('alert(1)')).length""") == 0
    assert page.locator('img[src="x"]').count() == 0
    text = page.locator("body").inner_text()   # rendered text only: what a reader sees
    assert SCRIPT in text and IMG in text
    shown = page.get_by_text(SCRIPT + IMG).first
    assert shown.is_visible()
    assert opened.errors == []


def convs(page) -> list[dict]:
    return page.locator("section.conv").evaluate_all("""els => els.map(e => ({
        id: e.id, classes: (e.dataset.classes || '').split(' ').filter(Boolean),
        persona: e.dataset.persona, goal: e.dataset.goal, visible: e.checkVisibility()}))""")


def check_filter(page, all_convs, expected_ids: set[str]):
    now = convs(page)
    assert [c["id"] for c in now] == [c["id"] for c in all_convs]   # filtering hides, never removes
    visible = {c["id"] for c in now if c["visible"]}
    assert visible == expected_ids
    assert page.locator("#f-count").inner_text().strip() == f"{len(expected_ids)} shown"


def test_the_filters_show_exactly_the_matching_transcripts(opened):
    page = opened.page
    every = convs(page)
    ids = {c["id"] for c in every}
    assert len(ids) == len(every) >= 5
    check_filter(page, every, ids)   # nothing chosen: all shown

    def pick(key):
        """A value of this filter that some transcripts have and some do not."""
        options = [o for o in page.locator(f"#f-{key} option").all_inner_texts() if o != "any"]
        has = (lambda c, v: v in c["classes"]) if key == "class" else (lambda c, v: c[key] == v)
        counts = {v: sum(has(c, v) for c in every) for v in options}
        value = max((v for v in options if counts[v] < len(every)), key=lambda v: counts[v])
        assert 0 < counts[value] < len(every), counts
        return value, {c["id"] for c in every if has(c, value)}

    for key in ("class", "persona", "goal"):
        value, expected = pick(key)
        page.select_option(f"#f-{key}", label=value)
        check_filter(page, every, expected)
        page.select_option(f"#f-{key}", label="any")
        check_filter(page, every, ids)

    # All three at once: those of one transcript, so that at least it matches.
    target = next(c for c in every if c["classes"])
    cls = target["classes"][-1]
    page.select_option("#f-class", label=cls)
    page.select_option("#f-persona", label=target["persona"])
    page.select_option("#f-goal", label=target["goal"])
    expected = {c["id"] for c in every
                if cls in c["classes"] and c["persona"] == target["persona"] and c["goal"] == target["goal"]}
    assert target["id"] in expected
    check_filter(page, every, expected)
    # A combination that matches nothing shows nothing, and says so.
    other = next(c["goal"] for c in every if c["goal"] != target["goal"])
    page.select_option("#f-goal", label=other)
    expected = {c["id"] for c in every if cls in c["classes"] and c["persona"] == target["persona"]
                and c["goal"] == other}
    check_filter(page, every, expected)
    assert opened.errors == [] and opened.dialogs == []
    assert opened.requests == [opened.url]


def test_the_listeners_hear_what_the_other_tests_say_is_absent(browser, tmp_path):
    """Control: a page that does everything the report must not; every listener hears it."""
    bad = tmp_path / "bad.html"
    bad.write_text(f"""<!doctype html><title>bad</title><body>{HOSTILE}
<img src="http://127.0.0.1:9/pixel.png">
<script>console.error("boom"); throw new Error("thrown");</script></body>""")
    context, o = open_page(browser, bad)
    try:
        assert o.dialogs == ["alert: 1"]
        assert o.page.evaluate("window.__pwned") == 1
        assert SCRIPT not in o.page.locator("body").inner_text()
        assert any("boom" in e for e in o.errors) and any("thrown" in e for e in o.errors)
        assert o.requests[0] == o.url
        assert "http://127.0.0.1:9/pixel.png" in o.requests and (bad.parent / "x").as_uri() in o.requests
    finally:
        context.close()


# --- what changed, and the polish every chart and table must keep -----------------------------

@pytest.fixture(scope="module")
def changed_report(tmp_path_factory, demo) -> Path:
    """A candidate run that breaks what its baseline (the same seeds, no fault) did not, reported
    against it: the flipped conversations shown side by side."""
    from simrun._settings import GateSection, ReleaseSection
    from simrun.scoring.gate._summary import summary_from_store

    tmp = tmp_path_factory.mktemp("changed-report")
    db = tmp / "s.duckdb"
    with ThreadPoolExecutor(1) as pool:
        base = pool.submit(stored_run, db, demo).result()
        cand = pool.submit(stored_run, db, demo, dead_end=0.3, crash=0.1, loop=0.4).result()
    with Store(db) as store:
        return build_report(store, cand, tmp / "reports", baseline=summary_from_store(store, base),
                            gate_settings=GateSection(permutations=2_000), release=ReleaseSection()).resolve()


@pytest.fixture()
def changed(browser, changed_report):
    context, o = open_page(browser, changed_report)
    yield o
    context.close()


def open_what_changed(page) -> None:
    """What changed folds its pairs away (issue 25); a reader opens them with one click."""
    fold = page.locator("#what-changed-pairs")
    assert fold.evaluate("d => d.open") is False
    page.locator("#what-changed-pairs > summary").click()
    assert fold.evaluate("d => d.open") is True


def test_what_changed_shows_both_transcripts_side_by_side(changed):
    page = changed.page
    open_what_changed(page)
    assert page.locator("#what-changed").is_visible()
    pairs = page.locator(".flip-pair").evaluate_all("""els => els.map(e => {
        const sides = [...e.querySelectorAll('section.side-conv')];
        const box = s => s.getBoundingClientRect();
        return {id: e.id, classes: e.dataset.classes.split(' '), sides: sides.length,
                visible: sides.every(s => s.checkVisibility()),
                turns: sides.map(s => s.querySelectorAll('.turn').length),
                leftOfRight: sides.length === 2 && box(sides[0]).right <= box(sides[1]).left,
                diverged: sides.map(s => [...s.querySelectorAll('.turn.diverged')].map(t => t.id.split('-t').pop())),
                link: (e.querySelector('header a') || {}).hash || null,
                findings: sides.length === 2 ? sides[1].querySelectorAll('.finding').length : 0,
                chips: sides.length === 2 ? sides[1].querySelector('header').innerText : ''};
    })""")
    assert 5 <= len(pairs) <= 20, len(pairs)
    for pair in pairs:
        assert pair["sides"] == 2 and pair["visible"] and all(n > 0 for n in pair["turns"]), pair
        assert pair["leftOfRight"], pair
        # The first turn that differs is marked on both sides, and the header links to it.
        left, right = pair["diverged"]
        assert left == right and len(right) == 1, pair
        assert pair["link"].endswith(f"-t{right[0]}")
        # This run's side carries the findings that made it flip, pinned to their turns.
        if set(pair["classes"]) & {"dead_end", "loop"}:
            assert pair["findings"] > 0 and any(c in pair["chips"] for c in pair["classes"]), pair
    assert {c for p in pairs for c in p["classes"]} >= {"dead_end", "runtime_error"}
    text = page.locator("#what-changed + p").inner_text()
    assert "flipped (clean in the baseline, fired in the candidate" in text
    assert changed.errors == [] and changed.requests == [changed.url]


def test_the_filters_apply_to_the_flipped_conversations(changed):
    page = changed.page
    open_what_changed(page)
    every = page.locator(".flip-pair").evaluate_all(
        "els => els.map(e => ({id: e.id, classes: e.dataset.classes.split(' '), goal: e.dataset.goal}))")
    page.select_option("#f-class", label="runtime_error")
    expected = {p["id"] for p in every if "runtime_error" in p["classes"]}
    visible = set(page.locator(".flip-pair").evaluate_all("els => els.filter(e => e.checkVisibility()).map(e => e.id)"))
    assert visible == expected and 0 < len(expected) < len(every)
    assert (page.locator("#f-count-changed").inner_text()
            == f"{len(expected)} of {len(every)} flipped conversations shown")
    page.select_option("#f-class", label="any")
    goal = every[0]["goal"]
    page.select_option("#f-goal", label=goal)
    visible = set(page.locator(".flip-pair").evaluate_all("els => els.filter(e => e.checkVisibility()).map(e => e.id)"))
    assert visible == {p["id"] for p in every if p["goal"] == goal}


def test_the_release_check_and_the_gate_speak_in_points(changed):
    page = changed.page
    verdict = page.locator("#verdict").inner_text()      # issue 23: the verdict, not a tile, says it
    assert "FAILED" in verdict and "release.fail_on_runtime_error: the runtime failed in" in verdict
    rows = page.locator("#gate-table tr").evaluate_all(
        "els => els.slice(1).map(r => [...r.cells].map(c => c.innerText))")
    assert len(rows) == 15
    for row in rows:
        delta, detectable = row[3], row[5]
        assert delta == "–" or re.fullmatch(r"[+-]\d+\.\d pts( \([+-]\d+\.\d to [+-]\d+\.\d\))?", delta), row
        assert detectable == "–" or re.fullmatch(r"\d+\.\d pts", detectable), row
    assert "%" not in " ".join(line for line in page.locator("#moved").inner_text().splitlines()
                                 if "pts" in line).split("(")[-1]


def text_boxes(page) -> list[dict]:
    return page.locator("svg").evaluate_all("""svgs => svgs.map((svg, i) => {
        const frame = svg.getBoundingClientRect();
        return {svg: i, label: svg.getAttribute('aria-label'),
                frame: [frame.left, frame.top, frame.right, frame.bottom],
                texts: [...svg.querySelectorAll('text')].map(t => {
                    const b = t.getBoundingClientRect();
                    return {text: t.textContent, box: [b.left, b.top, b.right, b.bottom]};
                })};
    })""")


def test_no_two_text_boxes_in_any_chart_intersect_and_no_label_is_cut(opened):
    charts = text_boxes(opened.page)
    assert len(charts) >= 5 and any("wall time" in (c["label"] or "") for c in charts)
    checked = 0
    for chart in charts:
        fl, ft, fr, fb = chart["frame"]
        for t in chart["texts"]:
            tl, tt, tr, tb = t["box"]
            assert (tr - tl > 0 and tl >= fl - 0.5 and tt >= ft - 0.5
                    and tr <= fr + 0.5 and tb <= fb + 0.5), (chart["label"], t)
        for a, b in itertools.combinations(chart["texts"], 2):
            (al, at, ar, ab), (bl, bt, br, bb) = a["box"], b["box"]
            overlap = min(ar, br) - max(al, bl) > 0.5 and min(ab, bb) - max(at, bt) > 0.5
            assert not overlap, (chart["label"], a, b)
            checked += 1
    assert checked > 500


def test_a_failed_cell_stands_out_in_the_goal_reached_heatmap(opened):
    cells = opened.page.locator("figure", has_text="goal_reached").locator("rect").evaluate_all("""rs => rs.map(r => {
        const [red, green, blue] = getComputedStyle(r).fill.match(/\\d+/g).map(Number).map(c => {
            c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; });
        return {title: r.querySelector('title').textContent, luminance: 0.2126 * red + 0.7152 * green + 0.0722 * blue};
    })""")
    failed = [c for c in cells if c["title"].endswith(": 0/1")]
    reached = [c for c in cells if c["title"].endswith(": 1/1")]
    assert failed and reached
    for c in failed:   # WCAG contrast against the white page: at least 3 to 1
        assert 1.05 / (c["luminance"] + 0.05) >= 3, c
    for c in reached:
        assert c["luminance"] > 0.75, c


def test_the_persona_by_goal_table_fits_1400_pixels(browser, report):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        # The table folds away (issue 25); its link opens it, as a reader's click does.
        page.goto(report.as_uri() + "#cells", wait_until="load")
        assert page.locator("#cells-fold").evaluate("d => d.open") and page.locator("#cells").is_visible()
        assert page.locator("#cells tr").first.locator("th").count() == 11     # persona + 10 goals
        fit = page.evaluate("""() => {
            const t = document.getElementById('cells'), box = t.parentElement;
            const cut = [...t.querySelectorAll('th, td')].filter(c => c.scrollWidth > c.clientWidth + 1).length;
            return {table: t.scrollWidth, room: box.clientWidth, page: document.documentElement.scrollWidth, cut,
                    font: parseFloat(getComputedStyle(t.querySelector('td')).fontSize)};
        }""")
        assert fit["table"] <= fit["room"] and fit["page"] <= 1400 and fit["cut"] == 0, fit
        assert fit["font"] >= 11, fit
    finally:
        context.close()


# --- finding one's way: the verdict, a table of contents, the classes that fired, the worst ------

# The page above the first transcript: the verdict, the run's identity and figures, the table of
# contents and the classes that fired. Before issue 25 the first transcript began at 22,308 px.
ABOVE_FIRST_TRANSCRIPT_PX = 1600


def in_view(page, selector: str) -> bool:
    return page.locator(selector).first.evaluate("""e => { const r = e.getBoundingClientRect();
        return e.checkVisibility() && r.top >= -1 && r.top < innerHeight; }""")


def click_from_top(page, link: str) -> str:
    """Click a link from the top of the page; the hash it led to."""
    page.evaluate("window.scrollTo(0, 0)")
    page.locator(link).first.click()
    return page.evaluate("location.hash")


@pytest.mark.parametrize("which", ["opened", "changed"])
def test_the_top_of_the_page_leads_in_one_click_to_each_reason_class_and_the_worst_transcript(which, request):
    o = request.getfixturevalue(which)
    page = o.page
    tops = page.evaluate("""() => ['verdict', 'toc', 'fired', 'worst'].map(id =>
        document.getElementById(id).getBoundingClientRect().top + scrollY)""")
    assert tops == sorted(tops) and page.evaluate("document.body.firstElementChild.id") == "verdict"
    first = page.evaluate("document.querySelector('section.conv').getBoundingClientRect().top + scrollY")
    assert first < ABOVE_FIRST_TRANSCRIPT_PX, first
    # Every class with a rate above zero is in the contents; one click shows its row, which links
    # its conversations (the list folds open when followed) and its worst transcripts.
    fired = set(page.locator("#rates a[href^='#class-']").all_inner_texts())
    assert fired and set(page.locator("#toc a.toc-class").all_inner_texts()) == fired
    for cls in fired:
        assert click_from_top(page, f"#toc a[href='#fired-{cls}']") == f"#fired-{cls}"
        assert in_view(page, f"#fired-{cls}")
        page.locator(f"#fired-{cls} a[href='#class-{cls}']").click()
        # The page's own script folds the list open on the hash change: waited for, not raced.
        page.wait_for_function(f"document.getElementById('class-{cls}').open", timeout=10_000)
        assert page.locator(f"#class-{cls}").evaluate("d => d.open") and in_view(page, f"#class-{cls}")
        examples = page.locator(f"#fired-{cls} a[href^='#conv-']").evaluate_all("els => els.map(e => e.hash)")
        assert examples, cls
        for hash_ in examples:
            assert cls in page.locator(hash_).get_attribute("data-classes").split()
    # Each of the verdict's reasons, from the contents, leads to its evidence.
    reasons = page.locator("#verdict li.reason a").evaluate_all("els => els.map(e => e.hash)")
    assert reasons and page.locator("#toc a.toc-reason").count() == len(reasons)
    for i, hash_ in enumerate(reasons):
        assert click_from_top(page, f"#toc a.toc-reason >> nth={i}") == hash_
        assert in_view(page, hash_), hash_
    # The worst transcript.
    worst = click_from_top(page, "#toc-worst")
    assert worst == "#" + page.locator("section.conv").first.get_attribute("id") and in_view(page, worst)
    # Long sections are folded, and open on demand.
    for fold in ("heatmaps", "cells-fold"):
        assert page.locator(f"#{fold}").evaluate("d => d.open") is False
    assert click_from_top(page, "#toc a[href='#heatmaps']") == "#heatmaps"
    assert page.locator("#heatmaps").evaluate("d => d.open") and in_view(page, "#heatmaps svg")
    assert o.errors == [] and o.requests == [o.url]      # still one self-contained file
