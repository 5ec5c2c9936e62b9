"""The report's first element is the run's verdict, read in Chromium, and it says what the exit
status says: for a clean run, a broken guarantee, a failed release criterion and a failed gate.
No tile on the page says "passed" for one criterion while the run failed on another.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from simrun.scoring.gate._run_verdict import verdict_of_run
from simrun.scoring.gate._verdict_lines import Kind, Line, Status
from simrun.scoring.pages._report import build_report
from simrun.scoring.store._database import Store
from tests.fixtures.browser import open_page
from tests.simulator.cli.test_verdict_cli import blessed, broken_goal, with_baseline

pytestmark = pytest.mark.xdist_group("verdict-browser")

RED, GREEN, GREEN_BACKGROUND = "rgb(207, 34, 46)", "rgb(26, 127, 55)", "rgb(218, 251, 225)"


def first_verdict(browser, report):
    context, opened = open_page(browser, report)
    try:
        return opened.page.evaluate("""() => {
            const first = document.body.firstElementChild;
            const status = first.querySelector('.status');
            return {id: first.id, exit: first.dataset.exit, status: status.textContent.trim().split(/\\s/)[0],
                    colour: getComputedStyle(status).color, background: getComputedStyle(first).backgroundColor,
                    reasons: [...first.querySelectorAll('li.reason')].map(li => li.textContent.trim()),
                    tiles: [...document.querySelectorAll('.tile')].map(t => t.textContent)};
        }""")
    finally:
        context.close()


def test_the_first_verdict_on_the_page_is_the_exit_status(browser, cli, project):
    # Runs in a thread of their own: Playwright's sync API keeps an event loop running in this one.
    pool = ThreadPoolExecutor(1)
    cli = (lambda run_cli: lambda *args: pool.submit(run_cli, *args).result())(cli)
    budgets = project / "budgets.toml"
    toml = project / "simrun.toml"
    clean_toml = toml.read_text()

    def run(*args, repetitions="1"):
        result = cli("-n", repetitions, *args)
        return result.exit_code, result.output, project / re.search(r"report: (\S+)", result.output).group(1)

    def faults(spec: str) -> None:
        toml.write_text(clean_toml.replace('# faults = "loop=0.2,phantom_receipt=0.1"', f'faults = "{spec}"'))

    seen = {}
    blessed(cli, project)                                      # a clean run, blessed
    seen["clean"] = run("--seed", "2")
    faults("phantom_receipt=0.5")
    seen["guarantee"] = run("--seed", "2")
    faults("dead_end=0.6")                                     # a third and more dead-ended: over the default ceiling
    seen["release"] = run("--seed", "2")
    toml.write_text(clean_toml)
    with_baseline(project, "baselines/main.json")
    broken_goal(project, "rename-trip")                        # 10% dead_end over all: within the ceiling
    budgets.write_text(budgets.read_text().replace("[release]", "[release]\nprogress_ceiling = 1.0"))
    seen["gate"] = run("--seed", "2", repetitions="2")

    expected = {"clean": (0, []), "guarantee": (1, ["guarantees broken: phantom_receipt"]),
                "release": (1, ["release.max_rate.dead_end: dead_end"]),
                "gate": (1, ["gate against the baseline"])}
    for name, (code, output, report) in seen.items():
        want_code, want_reasons = expected[name]
        assert code == want_code, (name, output)
        page = first_verdict(browser, report)
        assert page["id"] == "verdict" and page["exit"] == str(code), (name, page)
        assert page["status"] == ("PASSED" if code == 0 else "FAILED"), (name, page)
        assert page["colour"] == (GREEN if code == 0 else RED), (name, page)
        assert len(page["reasons"]) == len(want_reasons), (name, page["reasons"])
        for reason, start in zip(page["reasons"], want_reasons):
            assert reason.startswith(start), (name, reason)
            assert f"FAILED: {reason}" in output                # the CLI's verdict, word for word
        assert not any(re.search(r"\bpassed\b", tile, re.I) for tile in page["tiles"]), (name, page["tiles"])
    pool.shutdown()
    # Exit 2 and 3 (not judged; a run in rounds still undecided) are no pass: never drawn green.
    with Store(project / "simrun.duckdb") as store:
        verdict = verdict_of_run(store, None)
        for status in (Status.NOT_JUDGED, Status.INCONCLUSIVE):
            shown = replace(verdict, status=status, reasons=(Line(Kind.ROUNDS_UNDECIDED, "undecided"),))
            page = first_verdict(browser, build_report(store, None, project / status, verdict=shown))
            assert page["exit"] == str(shown.exit_code) and page["status"] == status.split()[0].upper(), page
            assert page["colour"] != GREEN and page["background"] != GREEN_BACKGROUND, (status, page)
