"""One verdict per run, and what a candidate shares with its baseline: from counts, no run needed.

The rule of sharing: a cell is gated when its persona and its goal have the same content hash in
both runs and the baseline holds it; every other candidate cell is new (listed with its rates, held
to the absolute criteria), and baseline cells the candidate lacks are removed. Tested on additions,
edits of a goal and of a persona, removals, and forged hashes, not only the issue's one new goal.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import replace

import numpy as np
import pytest

from simrun._errors import BaselineError, GateError
from simrun._settings import GateSection, ReleaseSection, stored_release
from simrun._untrusted_text import markdown_text
from simrun.scoring.checks._scorer import ALL_CLASSES, PROGRESS_CLASSES, kind_of
from simrun.scoring.dataset._files import canonical_json
from simrun.scoring.gate._baseline import baseline_json, parse_baseline
from simrun.scoring.gate._compare import gate_verdict
from simrun.scoring.gate._run_verdict import never_run, run_verdict
from simrun.scoring.gate._summary import GATE_CLASSES, Counts, RunSummary, summary_from_counts
from simrun.scoring.gate._verdict_lines import Kind, Line, Status
from simrun.scoring.gate._verdict_text import junit_xml, markdown
from simrun.scoring.store._rates import Outcome, Rate

SETTINGS = GateSection(permutations=2_000)
PERSONAS = ("anna", "ben", "cleo", "dan")
GOALS = ("book", "cancel", "rename")


def items_of(personas=PERSONAS, goals=GOALS, edited=()) -> dict[str, str]:
    """Content hashes: an item named in `edited` gets other content than the same item otherwise."""
    def content(key: str, name: str) -> str:
        return hashlib.sha256(f"{key}:{name}:{name in edited}".encode()).hexdigest()[:16]
    return {**{f"persona:{p}": content("persona", p) for p in personas},
            **{f"goal:{g}": content("goal", g) for g in goals}}


def dataset_hash(items: dict[str, str]) -> str:
    return hashlib.sha256(canonical_json(dict(sorted(items.items()))).encode()).hexdigest()[:16]


def a_summary(run_id: str, items: dict[str, str], *, reps=4, fired=None, seed=0) -> RunSummary:
    """Every cell of the items' personas x goals; `fired` maps (cell or goal) -> {class: rate}."""
    rng = np.random.default_rng(seed)
    personas = sorted(k.split(":", 1)[1] for k in items if k.startswith("persona:"))
    goals = sorted(k.split(":", 1)[1] for k in items if k.startswith("goal:"))
    conversations = []
    for p in personas:
        for g in goals:
            rates = {**(fired or {}).get(g, {}), **(fired or {}).get((p, g), {})}
            for rep in range(reps):
                counts = {cls: Counts(0, 1, 0) for cls in GATE_CLASSES}
                for cls, rate in rates.items():
                    counts[cls] = Counts(int(rng.random() < rate), 1, 0)
                conversations.append((p, g, rep, counts))
    return summary_from_counts(run_id, dataset_hash(items), reps, conversations, items=items)


BASE = a_summary("r20261201-000000-aaaaaa", items_of())


def test_a_new_goal_is_listed_not_gated_and_every_shared_cell_is_gated():
    items = items_of(goals=(*GOALS, "upgrade"))
    cand = a_summary("r20261201-000001-bbbbbb", items, seed=1)
    result = gate_verdict(BASE, cand, SETTINGS)
    assert result.passed and result.cells == len(PERSONAS) * len(GOALS)
    assert set(result.sharing.new) == {(p, "upgrade") for p in PERSONAS} and not result.sharing.removed
    (new,) = result.new
    assert (new.dimension, new.name, new.why, len(new.cells)) == ("goal", "upgrade", "added", len(PERSONAS))


def test_an_edited_goal_and_an_edited_persona_count_as_new_and_a_removed_goal_is_listed():
    # rename's content changed, ben's too, and cancel is gone: their old cells measured something else.
    items = items_of(goals=("book", "rename"), edited=("rename", "ben"))
    cand = a_summary("r20261201-000001-bbbbbb", items, seed=1)
    result = gate_verdict(BASE, cand, SETTINGS)
    assert set(result.sharing.gated) == {(p, "book") for p in PERSONAS if p != "ben"}
    assert {(c.kind, c.id, c.change) for c in result.sharing.changes} == {
        ("goal", "rename", "edited"), ("persona", "ben", "edited"), ("goal", "cancel", "removed")}
    assert {(s.dimension, s.name, s.why) for s in result.new} == {("goal", "rename", "edited"),
                                                                 ("persona", "ben", "edited")}
    assert set(result.sharing.removed) == {(p, "cancel") for p in PERSONAS}


def test_a_fault_in_the_shared_cells_fails_the_gate_naming_them_while_the_new_goal_is_not_gated():
    items = items_of(goals=(*GOALS, "upgrade"))
    cand = a_summary("r20261201-000001-bbbbbb", items, reps=8, fired={"book": {"dead_end": 1.0},
                                                                      "upgrade": {"loop": 1.0}}, seed=2)
    base = a_summary("r20261201-000000-aaaaaa", items_of(), reps=8)
    result = gate_verdict(base, cand, SETTINGS)
    assert not result.passed and "dead_end (over all cells, and in goal book" in result.headline()
    assert any(line.startswith("dead_end rose in goal book: 0/32 → 32/32") for line in result.regressions())
    assert "loop" not in result.headline()      # the new goal's loops are not a regression: it is not gated


def test_a_new_goal_is_held_to_the_absolute_criteria():
    items = items_of(goals=(*GOALS, "upgrade"))
    cand = a_summary("r20261201-000001-bbbbbb", items, fired={"upgrade": {"loop": 0.5}}, seed=3)
    gate = gate_verdict(BASE, cand, SETTINGS)
    assert gate.passed
    rates, outcome = clean_rates(cand)
    verdict = run_verdict(cand.run_id, rates, outcome, ReleaseSection(), gate=gate, baseline=BASE)
    assert verdict.status == "failed" and verdict.exit_code == 1
    (reason,) = verdict.reasons
    assert reason.text.startswith("new, not gated: release.max_rate.loop in goal upgrade (added, 4 cells): loop ")
    assert "above the ceiling 10.0%" in reason.text
    # The same, typed: what a machine reads without reading the words.
    assert (reason.kind, reason.classes, reason.criterion) == (
        Kind.NEW_NOT_GATED, ("loop",), "release.max_rate.loop in goal upgrade (added, 4 cells)")
    assert (reason.scope.kind, reason.scope.name, len(reason.scope.cells)) == ("goal", "upgrade", 4)
    assert reason.figures["ceiling"] == 0.10 and reason.figures["rate"] > 0.10
    assert reason.figures["fired"] == round(reason.figures["rate"] * reason.figures["scored"])
    assert any("goal upgrade (added, 4 cells): new, not gated" in line.text and line.kind is Kind.NOT_GATED
               for line in verdict.not_checked)


def texts(lines) -> tuple[str, ...]:
    return tuple(line.text for line in lines)


def clean_rates(summary: RunSummary, **fired) -> tuple[list[Rate], Outcome]:
    """Run-wide rates: `fired` class -> (k, n); the rest clean over the summary's conversations."""
    n = sum(c["goal_not_reached"].scored for c in summary.cells.values())
    rates = [Rate(cls, kind_of(cls), *fired.get(cls, (0, n)), 0, fired.get(cls, (0, n))[0], n) for cls in ALL_CLASSES]
    outcome = Outcome(n, n, {"goal_reached": n}, n, n, 0, 0, 3.0, 3.0, 0.0)
    return rates, outcome


@pytest.mark.parametrize("fired, reason", [
    ({}, None),
    ({"dead_end": (117, 350)}, "release.max_rate.dead_end: dead_end 33.4% (117/350), above the ceiling 10.0% "
                               "(release.progress_ceiling)"),
    ({"not_understood": (62, 350)}, "release.max_rate.not_understood: not_understood 17.7%"),
    ({"wrong_record": (6, 350)}, "guarantees broken: wrong_record in 6 conversation(s)"),
])
def test_by_default_a_run_fails_on_a_broken_guarantee_and_on_a_progress_class_above_ten_percent(fired, reason):
    rates, outcome = clean_rates(BASE)
    rates = [Rate(r.cls, r.kind, *fired[r.cls], 0, fired[r.cls][0], 350) if r.cls in fired else r for r in rates]
    verdict = run_verdict("r1", rates, outcome, None)
    assert verdict.passed == (reason is None) and verdict.exit_code == (0 if reason is None else 1)
    if reason:
        assert verdict.reasons[0].text.startswith(reason) and verdict.headline().startswith("FAILED: " + reason)
        kind = Kind.GUARANTEES_BROKEN if reason.startswith("guarantees") else Kind.RELEASE_CRITERION
        assert verdict.reasons[0].kind is kind and verdict.reasons[0].classes == tuple(fired)
    # Without a baseline, the verdict says that no regression was checked, and how to bless one.
    assert any(n.text.startswith("regressions: no baseline is set") and "simrun baseline bless" in n.text
               and n.kind is Kind.NO_BASELINE for n in verdict.not_checked)


def test_a_goal_file_problem_leaves_the_run_not_judged_unless_the_runtime_failed_it_too():
    line = "goal g: no record of type trip ever had field `bag` (did you mean `bags`?); fields seen: bags"
    rates, outcome = clean_rates(BASE)
    verdict = run_verdict("r1", rates, outcome, None, goal_files=(line,))
    assert (verdict.status, verdict.exit_code) == ("not judged", 2)
    assert texts(verdict.reasons) == (f"a problem in the goal files, not the runtime's: {line}",)
    assert verdict.reasons[0].kind is Kind.GOAL_FILE_PROBLEM
    assert any(h.text.startswith("every guarantee held") for h in verdict.held)     # what held still says so
    failing, outcome = clean_rates(BASE, wrong_record=(6, 350))
    both = run_verdict("r1", failing, outcome, None, goal_files=(line,))
    assert (both.status, both.exit_code) == ("failed", 1)
    assert both.reasons[0].kind is Kind.GUARANTEES_BROKEN and both.reasons[-1].text.endswith(line)


def test_a_ceiling_set_by_hand_replaces_the_default_and_one_switched_off_checks_nothing():
    rates, outcome = clean_rates(BASE, dead_end=(30, 100))
    assert not run_verdict("r1", rates, outcome, ReleaseSection()).passed
    assert run_verdict("r1", rates, outcome, ReleaseSection(max_rate={"dead_end": 0.4})).passed
    assert run_verdict("r1", rates, outcome, ReleaseSection(progress_ceiling=1.0)).passed
    assert ReleaseSection().progress_ceiling == 0.10


def test_a_default_ceiling_no_conversation_could_decide_is_not_checked_and_said_so():
    rates, outcome = clean_rates(BASE)
    rates = [Rate(r.cls, r.kind, 0, 0, 48, 0, 0) if r.cls == "unanswered" else r for r in rates]
    verdict = run_verdict("r1", rates, outcome, ReleaseSection())
    assert verdict.passed
    assert any("the ceiling on unanswered: no conversation could decide it" in n.text
               and (n.kind, n.classes) == (Kind.CRITERION_UNVERIFIABLE, ("unanswered",)) for n in verdict.not_checked)
    assert not run_verdict("r1", rates, outcome, ReleaseSection(max_rate={"unanswered": 0.1})).passed


def test_by_default_a_run_where_most_goals_are_not_reached_fails_and_one_that_cannot_tell_says_so():
    rates, outcome = clean_rates(BASE)
    n = outcome.goal_scored
    # The goal is the only measure of progress a runtime read from its traces gives: every
    # progress class UNVERIFIABLE, and no goal reached, is not a clean release.
    blind = [Rate(r.cls, r.kind, 0, 0, n, 0, 0) if r.cls in PROGRESS_CLASSES else r for r in rates]
    none = run_verdict("r1", blind, dataclasses.replace(outcome, goal_reached=0), ReleaseSection())
    assert (none.status, none.exit_code) == ("failed", 1)
    assert texts(none.reasons) == (f"release.min_goal_reached: goal reached 0.0% (0/{n}), below the floor 50.0% "
                                   "(the default floor)",)
    assert dict(none.reasons[0].figures) == {"fired": 0, "scored": n, "rate": 0.0, "floor": 0.5}
    half = dataclasses.replace(outcome, goal_reached=n // 2)
    assert run_verdict("r1", rates, half, ReleaseSection()).passed              # at the floor: passes
    below = dataclasses.replace(outcome, goal_reached=n // 2 - 1)
    assert not run_verdict("r1", rates, below, ReleaseSection()).passed
    assert run_verdict("r1", rates, below, ReleaseSection(min_goal_reached=0)).passed      # 0 switches it off
    assert run_verdict("r1", rates, below, ReleaseSection(min_goal_reached=0.4)).passed
    # No conversation could decide it: the default floor is not checked, and says so; a floor
    # set by hand fails (UNVERIFIABLE is never a pass).
    unknown = dataclasses.replace(outcome, goal_reached=0, goal_scored=0, goal_unverifiable=n)
    told = run_verdict("r1", rates, unknown, ReleaseSection())
    assert told.passed and any(line.text.startswith("the floor on goal reached: no conversation could decide it")
                               for line in told.not_checked), told.not_checked
    assert not run_verdict("r1", rates, unknown, ReleaseSection(min_goal_reached=0.9)).passed


@pytest.mark.parametrize("undecided", [(), ("audit_gap",), ("wrong_record", "phantom_receipt", "audit_gap"), "all"])
def test_a_guarantee_no_conversation_could_decide_is_never_said_to_hold(undecided):
    """An assistant that keeps no store or audit gives no evidence for most guarantees: none broken
    is not every one held. What held claims only the guarantees a conversation decided."""
    rates, outcome = clean_rates(BASE)
    guarantees = [r.cls for r in rates if r.kind == "guarantee"]
    undecided = guarantees if undecided == "all" else list(undecided)
    rates = [Rate(r.cls, r.kind, 0, 0, 48, 0, 0) if r.cls in undecided else r for r in rates]
    verdict = run_verdict("r1", rates, outcome, ReleaseSection())
    assert verdict.passed       # nothing failed; what was not checked is said, not counted either way
    said = " ".join(texts((*verdict.held, *verdict.not_checked)))
    claims = [h.text for h in verdict.held if h.kind is Kind.GUARANTEES_HELD]
    if not undecided:
        assert claims == [f"every guarantee held ({outcome.conversations} conversations)"]
    elif len(undecided) < len(guarantees):
        assert len(claims) == 1 and claims[0].startswith("the guarantees held where they were decided: ")
        assert f"{len(undecided)} of {len(guarantees)} decided in none (not checked)" in claims[0]
        assert not any(cls in claims[0].split(";")[0] for cls in undecided)
        named = [n for n in verdict.not_checked if n.kind is Kind.GUARANTEES_UNVERIFIABLE]
        assert len(named) == 1 and named[0].classes == tuple(undecided)
        assert named[0].text.startswith("guarantees decided in no conversation, so not known to hold: ")
    else:
        assert claims == [] and "guarantees: none could be decided in any conversation" in said
    assert "every guarantee held" not in said or not undecided


def test_markdown_and_junit_say_what_the_exit_status_says():
    rates, outcome = clean_rates(BASE, dead_end=(40, 100))
    verdict = run_verdict("r1", rates, outcome, ReleaseSection())
    md = markdown(verdict)
    assert md.startswith("## ❌ simrun FAILED: run `r1` (exit 1)") and "- **release.max_rate.dead_end" in md
    from xml.etree import ElementTree as ET
    root = ET.fromstring(junit_xml(verdict).split("?>", 1)[1])
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert failed == ["release.max_rate.dead_end"] and root.get("failures") == "1"


@pytest.mark.parametrize("status, ran, planned, said", [
    ("budget_spent", 10, 32, "22 of the 32 conversations planned were never run (the budget ran out)"),
    ("interrupted", 31, 70, "39 of the 70 conversations planned were never run (the run was interrupted: "
                            "`simrun resume` finishes it)"),
    ("finished", 70, 70, None),
])
def test_a_run_cut_short_says_what_it_never_ran_and_what_it_left_out(status, ran, planned, said):
    cut = {"budget_cut": 5} if status == "budget_spent" else {}
    outcome = Outcome(ran, ran - sum(cut.values()), {"goal_reached": ran - sum(cut.values()), **cut},
                      ran - 5, ran - 5, 0, 0, 3.0, 3.0, 0.0)
    lines = never_run({"status": status, "conversations_planned": planned}, outcome)
    assert [line.text for line in lines if line.kind is Kind.NEVER_RUN] == (
        [f"{said}: the verdict is over the {ran} that ran"] if said else [])
    left_out = [line.text for line in lines if line.kind is Kind.LEFT_OUT]
    assert left_out == (["5 conversation(s) ended for reasons that are not the runtime's (budget_cut 5): left out "
                         "of the progress rates and the goal rate"] if cut else [])


def every_status() -> dict[str, object]:
    rates, outcome = clean_rates(BASE)
    failing, _ = clean_rates(BASE, dead_end=(40, 100), wrong_record=(2, 100))
    nothing = Outcome(3, 0, {"provider_error": 3}, 0, 0, 0, 0, None, None, 0.0)
    clean = run_verdict("r1", rates, outcome, ReleaseSection())
    return {
        "passed": clean,
        "failed": run_verdict("r1", failing, outcome, ReleaseSection()),
        "goal files": run_verdict("r1", rates, outcome, None, goal_files=("goal g: no record of type trip",)),
        "nothing judged": run_verdict("r1", rates, nothing, None),
        "baseline refused": run_verdict("r1", rates, outcome, None, baseline=BASE, gate_refused="another scorer"),
        # A run in rounds still undecided at its cap: the one verdict the sequential gate gives it.
        "inconclusive": replace(clean, status=Status.INCONCLUSIVE, reasons=(Line(
            Kind.ROUNDS_UNDECIDED, "sequential gate: inconclusive after 20 of 20 rounds: run more rounds"),)),
        # A run its budget cut short, with nothing failed in what ran: incomplete, never a pass.
        "incomplete": replace(clean, status=Status.INCOMPLETE, reasons=(Line(
            Kind.NEVER_RUN, "22 of the 32 conversations planned were never run (the budget ran out): the verdict "
                            "is over the 10 that ran"),)),
    }


@pytest.mark.parametrize("case", list(every_status()))
def test_junit_and_markdown_fail_exactly_when_the_exit_status_is_not_zero_naming_every_reason(case):
    from xml.etree import ElementTree as ET

    verdict = every_status()[case]
    assert (verdict.exit_code == 0) == (case == "passed") and verdict.reasons or case == "passed"
    root = ET.fromstring(junit_xml(verdict).split("?>", 1)[1])
    messages = [c.find("failure").get("message") for c in root.iter("testcase") if c.find("failure") is not None]
    assert (int(root.get("failures")) > 0) == (verdict.exit_code != 0), (case, messages)
    assert all(any(reason.text in m for m in messages) for reason in verdict.reasons), (case, messages)
    md = markdown(verdict)
    assert md.startswith(f"## {'✅' if verdict.passed else '❌' if verdict.status == 'failed' else '⚠️'} simrun "
                         f"{verdict.word}: run `r1` (exit {verdict.exit_code})")
    assert all(f"- **{markdown_text(reason.text)}**" in md for reason in verdict.reasons)


def test_a_baseline_keeps_the_hashes_and_one_that_forges_them_is_refused():
    text = baseline_json(BASE, simrun_version="0")
    data = json.loads(text)
    assert data["format_version"] == 3 and data["items"] == dict(sorted(BASE.items.items()))
    assert parse_baseline(text.encode(), "b.json", "fix").items == BASE.items
    # Claiming that an edited goal is unchanged would gate cells that measured something else.
    forged = {**data, "items": {**data["items"], "goal:book": "0" * 16}}
    with pytest.raises(BaselineError, match="do not make its dataset hash"):
        parse_baseline(json.dumps(forged).encode(), "b.json", "fix")
    older = {k: v for k, v in data.items() if k != "items"} | {"format_version": 2}
    loaded = parse_baseline(json.dumps(older).encode(), "b.json", "fix")
    assert loaded.items is None and gate_verdict(loaded, BASE, SETTINGS).passed     # same dataset: gated
    cand = a_summary("r20261201-000001-bbbbbb", items_of(goals=(*GOALS, "upgrade")))
    with pytest.raises(GateError, match="keeps only that hash.*bless a new baseline"):
        gate_verdict(loaded, cand, SETTINGS)


def test_goals_that_could_not_be_checked_are_named_as_not_checked_never_silently_left_out():
    # A goal check that failed (its query past a limit, its record not given) leaves the goal
    # UNVERIFIABLE: the goal rate is over the others, so the verdict must say what it left out.
    rates = [Rate(cls, kind_of(cls), 0, 70, 0, 0, 70) for cls in ALL_CLASSES]
    checked = Outcome(70, 70, {"goal_reached": 63, "user_stopped": 7}, 63, 70, 0, 0, 3.0, 3.0, 0.0)
    unchecked = Outcome(70, 70, {"goal_reached": 63, "user_stopped": 7}, 63, 63, 7, 0, 3.0, 3.0, 0.0)
    assert not any("goal reached" in line.text for line in run_verdict("r1", rates, checked, None).not_checked)
    lines = [line.text for line in run_verdict("r1", rates, unchecked, None).not_checked
             if line.kind is Kind.GOAL_UNVERIFIABLE]
    assert lines == ["goal reached: UNVERIFIABLE in 7 of 70 conversations, whose goal could not be checked "
                     "(`simrun show RUN CONVERSATION` gives the reason)"]


@pytest.mark.parametrize("kept, used", [
    ({"fail_on_runtime_error": True, "min_goal_reached": None, "max_rate": {"dead_end": 0.3}, "progress_ceiling": 0.5},
     True),
    ({"fail_on_runtime_error": "yes", "min_goal_reached": None, "max_rate": {}, "progress_ceiling": 0.5}, False),
    ({"fail_on_runtime_error": True, "min_goal_reached": None, "max_rate": {"no_such_class": 0.3},
      "progress_ceiling": 0.5}, False),
    ({"fail_on_runtime_error": True, "min_goal_reached": 7, "max_rate": {}, "progress_ceiling": 0.5}, False),
    ({"fail_on_runtime_error": True, "max_rate": {"dead_end": 0.3}, "progress_ceiling": 0.5}, True),   # no floor
    ({"fail_on_runtime_error": True, "max_rate": {}}, False),
    ({"fail_on_runtime_error": True, "max_rate": {}, "progress_ceiling": 0.5, "fail_on_everything": True}, False),
    ("progress_ceiling = 0.5", False),
])
def test_the_criteria_a_run_kept_are_used_only_when_they_are_criteria(kept, used):
    """A stored run's criteria judge it again later; a store may be hostile, so a record that is
    not criteria (a wrong type, an unknown class, a missing field) is not used."""
    criteria = stored_release({"config": {"release": kept}})
    assert (criteria is not None) == used
    if used:
        assert criteria.max_rate == {"dead_end": 0.3} and criteria.progress_ceiling == 0.5


def test_a_goal_rate_judged_on_a_sample_its_outcome_chose_is_shown_as_bounds_and_not_checked():
    """Issue 38, rule 2: a trace-based assistant with tool arguments off decides only the
    conversations that provably failed (0 of 22), while 153 are UNVERIFIABLE. The floor reads
    a rate between 0% and 87.4%: neither passed nor failed; set by hand, the run is not a pass."""
    rates, outcome = clean_rates(BASE)
    blind = dataclasses.replace(outcome, conversations=175, counted=175, goal_reached=0, goal_scored=22,
                                goal_unverifiable=153)
    told = run_verdict("r1", rates, blind, ReleaseSection())
    assert told.status is Status.PASSED, told            # the default floor: listed, never failed
    assert not any(r.criterion == "release.min_goal_reached" for r in told.reasons)
    (line,) = [n for n in told.not_checked if n.criterion == "release.min_goal_reached"]
    assert line.kind is Kind.CRITERION_UNDECIDED and line.classes == ("goal_reached",)
    assert "between 0.0% and 87.4% (153 UNVERIFIABLE counted either way)" in line.text
    assert dict(line.figures) == pytest.approx({"fired": 0, "scored": 22, "unverifiable": 153, "low": 0.0,
                                                "high": 153 / 175, "floor": 0.5})
    assert not any(h.kind is Kind.RELEASE_MET and h.text.startswith("every release criterion met")
                   for h in told.held), told.held
    # Set by hand, the same undecided floor keeps the run from passing: inconclusive, exit 3.
    by_hand = run_verdict("r1", rates, blind, ReleaseSection(min_goal_reached=0.5))
    assert (by_hand.status, by_hand.exit_code) == (Status.INCONCLUSIVE, 3)
    assert [r.kind for r in by_hand.reasons] == [Kind.CRITERION_UNDECIDED]
    assert by_hand.reasons[0].criterion == "release.min_goal_reached"
    case = [c for c in junit_xml(by_hand).split("<testcase") if 'name="release.min_goal_reached"' in c]
    assert len(case) == 1 and "<failure" in case[0]
    # Where both bounds agree, the criterion is judged, with its bounds said.
    mostly = dataclasses.replace(blind, goal_reached=20, goal_scored=160, goal_unverifiable=15)
    met = run_verdict("r1", rates, mostly, ReleaseSection(min_goal_reached=0.1))
    (floor,) = [c for c in met.release.criteria if c.name == "release.min_goal_reached"]
    assert met.passed and floor.passed and "between 11.4% and 20.0%" in floor.detail
    below = run_verdict("r1", rates, mostly, ReleaseSection(min_goal_reached=0.25))
    assert below.status is Status.FAILED
    assert ("between 11.4% and 20.0% (15 UNVERIFIABLE counted either way), below the floor 25.0%"
            in below.reasons[0].text)


@pytest.mark.parametrize("fired, undecided, ceiling, expected", [
    (2, 14, 0.10, "undecided"),     # 2/56 decided; 2.9%..22.9% straddles 10%
    (2, 3, 0.10, "passed"),         # 2.9%..7.4%: within whatever the 3 did
    (10, 3, 0.10, "failed"),        # 14.5%..18.8%: above whatever the 3 did
    (0, 70, 0.10, "undecided"),     # decided in none: 0%..100%
])
def test_a_ceiling_is_judged_only_where_its_undecided_conversations_cannot_change_it(fired, undecided, ceiling,
                                                                                      expected):
    rates, outcome = clean_rates(BASE)
    scored = 70 - undecided
    rates = [Rate(r.cls, r.kind, fired, scored, undecided, fired, scored) if r.cls == "dead_end" else r
             for r in rates]
    for by_hand in (False, True):
        release = ReleaseSection(max_rate={"dead_end": ceiling}) if by_hand else ReleaseSection()
        verdict = run_verdict("r1", rates, outcome, release)
        named = [line for line in (*verdict.reasons, *verdict.not_checked)
                 if line.criterion == "release.max_rate.dead_end"]
        if expected == "passed":
            assert verdict.passed and not named
        elif expected == "failed":
            assert verdict.status is Status.FAILED and named[0].kind is Kind.RELEASE_CRITERION
            assert "UNVERIFIABLE counted either way), above the ceiling 10.0%" in named[0].text
        elif by_hand:
            assert verdict.status is Status.INCONCLUSIVE
            assert [r.kind for r in verdict.reasons] == [Kind.CRITERION_UNDECIDED]
        else:
            assert verdict.passed and len(named) == 1 and named[0] in verdict.not_checked
            assert named[0].kind is (Kind.CRITERION_UNDECIDED if scored else Kind.CRITERION_UNVERIFIABLE)


def test_a_failed_run_stays_failed_and_lists_its_undecided_criteria_as_not_checked():
    rates, outcome = clean_rates(BASE, loop=(40, 100))
    rates = [Rate(r.cls, r.kind, 2, 56, 14, 2, 56) if r.cls == "dead_end" else r for r in rates]
    verdict = run_verdict("r1", rates, outcome, ReleaseSection(max_rate={"dead_end": 0.1}))
    assert verdict.status is Status.FAILED
    assert [r.criterion for r in verdict.reasons] == ["release.max_rate.loop"]
    assert any(n.kind is Kind.CRITERION_UNDECIDED and n.criterion == "release.max_rate.dead_end"
               for n in verdict.not_checked)
