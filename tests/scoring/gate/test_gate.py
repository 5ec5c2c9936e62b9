"""The gate's verdict: decided from per-cell counts, over all cells and per goal and persona,
naming what moved; the baseline files it reads."""

from __future__ import annotations

import asyncio
import json
import re
from decimal import Decimal
from xml.etree import ElementTree as ET

import numpy as np
import pytest

from simrun._errors import BaselineError, GateError
from simrun._settings import GateSection
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.gate._baseline import baseline_json, load_baseline
from simrun.scoring.gate._compare import gate_verdict
from simrun.scoring.gate._summary import (
    GATE_CLASSES,
    TESTED,
    CellRepetitions,
    Counts,
    RunSummary,
    summary_from_scorecards,
    summary_from_store,
)
from simrun.scoring.gate._text import junit_xml, markdown
from simrun.scoring.store import _rates as R
from simrun.scoring.store._database import Store
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.users._scripted import ScriptedUser
from tests.conftest import run_demo

SETTINGS = GateSection(permutations=4_000)
DATASET = "0123456789abcdef"
BASE_ID, CAND_ID = "r20261130-000000-aaaaaa", "r20261130-000001-bbbbbb"


def summary(rates_by_class: dict[str, np.ndarray], *, reps=5, run_id=BASE_ID, dataset=DATASET, scorer="1",
            rng=None, personas=7, goal_names=None, like: RunSummary | None = None, seed: int | None = None,
            user: str | None = None) -> RunSummary:
    """Cells drawn as binomial counts at the given per-cell rates (zero for classes not given),
    each class firing in a random choice of the cell's repetitions; with `like`, only the
    classes given are drawn, and the others are copied from it. `seed` and `user`: what the run
    says of its seed and user (a scripted user of one seed pairs two runs)."""
    rng = rng or np.random.default_rng(0)
    cells = len(next(iter(rates_by_class.values())))
    out, held = {}, {}
    for i in range(cells):
        goal = goal_names[i // personas] if goal_names else f"g{i // personas}"
        cell = (f"p{i % personas}", goal)
        counts, fired = {}, {}
        for cls in GATE_CLASSES:
            rate = rates_by_class.get(cls)
            if like is not None and rate is None:
                counts[cls] = like.cells[cell][cls]
                fired[cls] = like.repetitions_held[cell].fired.get(cls, frozenset())
                continue
            k = int(rng.binomial(reps, rate[i])) if rate is not None else 0
            counts[cls] = Counts(k, reps, 0)
            fired[cls] = frozenset(int(r) for r in rng.choice(reps, k, replace=False))
        out[cell] = counts
        held[cell] = CellRepetitions(frozenset(range(reps)), {c: f for c, f in fired.items() if f}, {})
    return RunSummary(run_id, dataset, scorer, reps, out, f"test {run_id}", held, user_backend=user, seed=seed)


PAIRED = {"seed": 7, "user": "scripted"}     # two runs that say this are paired by cell and repetition


def verdict_of(result, cls: str):
    return next(c for c in result.classes if c.cls == cls)


GOALS = ["apply", "check-balance", "close-account", "pay-bill", "renew-loan", "report-card", "transfer"]


def test_one_goal_broken_outright_fails_the_gate_naming_the_goal():
    """The issue's case: 4 personas x 7 goals x 2 repetitions; every renew-loan conversation a dead
    end in the candidate, everything else clean. The overall rise is 14.3 points over 28 cells."""
    clean = {cls: np.zeros(28) for cls in TESTED}
    base = summary(clean, reps=2, personas=4, goal_names=GOALS, **PAIRED)
    broken = np.array([1.0 if GOALS[i // 4] == "renew-loan" else 0.0 for i in range(28)])
    cand = summary({**clean, "dead_end": broken}, reps=2, personas=4, goal_names=GOALS, run_id=CAND_ID, **PAIRED)
    result = gate_verdict(base, cand, SETTINGS)
    assert not result.passed and result.exit_code == 1
    dead_end = verdict_of(result, "dead_end")
    assert dead_end.verdict == "regression" and dead_end.delta == pytest.approx(1 / 7)
    assert [s.statement() for s in dead_end.slice_failures] == ["dead_end rose in goal renew-loan: 0/8 → 8/8"]
    assert any(line.startswith("dead_end rose in goal renew-loan: 0/8 → 8/8") for line in result.regressions())
    assert "regressions: dead_end (over all cells, and in goal renew-loan)" in result.headline()
    assert [c.cls for c in result.failures] == ["dead_end"]
    # What moved is named: the four cells, and the eight conversations that flipped.
    assert {m.cell for m in result.moved} == {(f"p{p}", "renew-loan") for p in range(4)}
    assert sorted(f.conversation_id for f in result.flips) == sorted(
        f"p{p}/renew-loan/{r}" for p in range(4) for r in range(2))
    md = markdown(result)
    assert "dead_end rose in goal renew-loan: 0/8 → 8/8" in md
    for p in range(4):
        assert f"`p{p}/renew-loan/0` dead_end" in md and f"`p{p}/renew-loan/1` dead_end" in md
    assert "8 flipped" in md and "dead_end · p0 × renew-loan: 0/2 → 2/2 (+100.0 pts, descriptive)" in md


def test_an_identical_run_and_an_a_a_pair_pass():
    rng = np.random.default_rng(12)
    rates = {cls: np.full(70, 0.08) for cls in TESTED}
    base = summary(rates, rng=rng, **PAIRED)
    same = gate_verdict(base, base, SETTINGS)
    assert same.passed and same.exit_code == 0 and same.flips == () and same.moved == ()
    assert all(c.delta == 0 for c in same.classes if c.delta is not None)
    aa = gate_verdict(base, summary(rates, rng=rng, run_id=CAND_ID), SETTINGS)
    assert aa.passed, aa.regressions()
    assert aa.tests > 8 * 10     # every class, over all cells and in each goal and persona


def test_a_broad_regression_fails_over_all_cells():
    rng = np.random.default_rng(1)
    base_rates = {cls: np.full(70, 0.08) for cls in TESTED}
    base = summary(base_rates, rng=rng)
    cand = summary({"dead_end": np.full(70, 0.30)}, rng=rng, run_id=CAND_ID, like=base)
    result = gate_verdict(base, cand, SETTINGS)
    assert [c.cls for c in result.failures] == ["dead_end"]
    assert verdict_of(result, "dead_end").regressed_overall
    assert result.regressions()[0].startswith("dead_end rose over all cells: ")


def test_a_significant_rise_shown_to_be_below_the_minimum_effect_passes():
    # 10 of 70 cells (one per goal, spread over the personas) rise by 20 points, at 20 repetitions:
    # a mean rise of 2.9 points, clearly significant, and shown to be below 5.
    rising = {(j % 7) + 7 * j for j in range(10)}
    base = summary({"loop": np.zeros(70)}, reps=20)
    cells = {cell: {**counts, "loop": Counts(4 if i in rising else 0, 20, 0)}
             for i, (cell, counts) in enumerate(base.cells.items())}
    held = {cell: CellRepetitions(frozenset(range(20)), {"loop": frozenset(range(4))} if i in rising else {}, {})
            for i, cell in enumerate(base.cells)}
    cand = RunSummary(CAND_ID, DATASET, "1", 20, cells, "c", held)
    result = gate_verdict(base, cand, SETTINGS)
    loop = verdict_of(result, "loop")
    assert loop.delta == pytest.approx(2 / 70) and loop.p_adjusted < 0.001
    assert loop.verdict == "ok" and "below 5.0 pts" in loop.reason and result.passed
    strict = gate_verdict(base, cand, GateSection(min_effect=0.03, permutations=4_000))
    assert [c.cls for c in strict.failures] == ["loop"]


def test_any_guarantee_violation_fails_even_when_the_baseline_had_it():
    rates = {cls: np.full(30, 0.1) for cls in TESTED}
    base = summary({**rates, "audit_gap": np.full(30, 0.5)})
    cand = summary({"audit_gap": np.r_[np.zeros(29), [1.0]]}, like=base, run_id=CAND_ID)
    result = gate_verdict(base, cand, SETTINGS)
    audit = verdict_of(result, "audit_gap")
    assert audit.verdict == "violated" and audit.p_adjusted is None and not result.passed
    assert "guarantees broken: audit_gap" in result.headline()


def test_runs_of_other_datasets_or_scorers_are_refused():
    base = summary({"loop": np.zeros(10)})
    with pytest.raises(GateError, match="dataset mismatch.*bless a new baseline"):
        gate_verdict(base, summary({"loop": np.zeros(10)}, dataset="fedcba9876543210"), SETTINGS)
    with pytest.raises(GateError, match="scorer version 1.*by 2.*simrun rescore RUN"):
        gate_verdict(base, summary({"loop": np.zeros(10)}, scorer="2"), SETTINGS)


def test_cells_only_one_run_holds_are_left_out_of_the_comparison_and_listed():
    # Issue 23: no flag is needed; the gate compares the cells both runs share and lists the rest.
    base = summary({"loop": np.full(21, 0.2)})
    cand = summary({"loop": np.full(14, 0.2)}, run_id=CAND_ID)
    result = gate_verdict(base, cand, SETTINGS)
    assert result.cells == 14 and result.left_out == tuple((f"p{p}", "g2") for p in range(7))
    assert result.sharing.removed == result.left_out and not result.sharing.new
    assert "compared on 14 of 21 cells" in markdown(result) and "p0/g2" in markdown(result)


@pytest.mark.parametrize("correction", ["holm", "bonferroni"])
def test_holm_and_bonferroni_are_offered_and_agree_on_a_clear_case(correction):
    rng = np.random.default_rng(3)
    rates = {cls: np.full(70, 0.05) for cls in TESTED}
    base = summary(rates, rng=rng)
    cand = summary({"not_understood": np.full(70, 0.4)}, rng=rng, run_id=CAND_ID, like=base)
    settings = GateSection(correction=correction, permutations=4_000)
    result = gate_verdict(base, cand, settings)
    assert [c.cls for c in result.failures] == ["not_understood"]
    assert f"corrected by {correction} over every class and slice" in markdown(result)


def test_markdown_and_junit_say_the_verdict_and_name_what_moved():
    rng = np.random.default_rng(2)
    rates = {cls: np.full(70, 0.05) for cls in TESTED}
    base = summary(rates, rng=rng, **PAIRED)
    cand = summary({"not_understood": np.full(70, 0.35), "wrong_record": np.full(70, 0.02)},
                   rng=rng, run_id=CAND_ID, like=base, **PAIRED)
    result = gate_verdict(base, cand, SETTINGS)
    md = markdown(result)
    assert md.startswith("## ❌ simrun gate FAILED: guarantees broken: wrong_record; regressions: not_understood")
    assert f"`{BASE_ID}`" in md and f"`{CAND_ID}`" in md
    rows = [line for line in md.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == list(GATE_CLASSES)
    row = next(r for r in rows if "`not_understood`" in r)
    assert "**regression**" in row and "pts (" in row
    assert "**violated**" in next(r for r in rows if "`wrong_record`" in r)
    assert "max-T step-down over every class and slice" in md
    # The lists are capped and counted.
    moved = md.split("### Cells whose rate rose most")[1].split("###")[0]
    assert moved.count("\n- ") == 10 and re.search(r"… and \d+ more \(class, cell\) pairs rose", moved)
    flips = md.split("### Flipped conversations")[1]
    assert f"{len(result.flips)} flipped" in flips and flips.count("\n- `") == 20
    assert f"… and {len(result.flips) - 20} more" in flips
    assert {f.cls for f in result.flips} == {"not_understood", "wrong_record"}
    assert [f.cls for f in result.flips] == sorted((f.cls for f in result.flips), key=GATE_CLASSES.index)

    root = ET.fromstring(junit_xml(result))
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == list(GATE_CLASSES)
    failed = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    assert set(failed) == {"not_understood", "wrong_record"}
    assert failed["not_understood"].get("type") == "regression"
    flipped = [f.conversation_id for f in result.flips if f.cls == "not_understood"]
    assert f"flipped conversations ({len(flipped)}): {flipped[0]}" in failed["not_understood"].text
    out = root.find("testsuite").find("system-out").text
    assert "cells whose rate rose most (descriptive, not tested):" in out and f"{len(result.flips)} flipped" in out
    assert root.get("failures") == "2" and root.find("testsuite").get("tests") == str(len(GATE_CLASSES))

    passing = gate_verdict(base, base, SETTINGS)
    assert markdown(passing).startswith("## ✅ simrun gate passed")
    assert ET.fromstring(junit_xml(passing)).get("failures") == "0"


# --- summaries ---------------------------------------------------------------------------------

def test_store_summary_equals_in_process_summary_and_the_run_rates(tmp_path, demo):
    faults = {"dead_end": 0.3, "crash": 0.1, "phantom_receipt": 0.2}
    user_faults = {"role_leak": 0.1}
    with Store(tmp_path / "s.duckdb") as store:
        result = asyncio.run(run_matrix(demo, PythonRuntime(TripDesk(faults=faults, fault_seed=11)),
                                        ScriptedUser(faults=user_faults, fault_seed=11), store,
                                        repetitions=2, seed=4, budget=Decimal(0)))
        stored = summary_from_store(store, result.run_id)
        rates = {r.cls: r for r in R.class_rates(store, result.run_id)}
        outcome = R.outcome(store, result.run_id)
    in_process = run_demo(demo, faults=faults, user_faults=user_faults, repetitions=2, seed=4)
    mem = summary_from_scorecards("x", demo.hash, 2, [(c.cell.persona.id, c.cell.goal.id, c.cell.repetition,
                                                       c.scorecard) for c in in_process.conversations])
    assert stored.cells == mem.cells
    assert stored.repetitions_held == mem.repetitions_held
    for cls, rate in rates.items():
        assert stored.total(cls) == Counts(rate.occurrences, rate.scored, rate.unverifiable), cls
    assert stored.total("runtime_error") == Counts(outcome.runtime_errors, outcome.counted, 0)
    assert stored.total("goal_not_reached") == Counts(outcome.goal_scored - outcome.goal_reached,
                                                      outcome.goal_scored, outcome.goal_unverifiable)
    # The faults made every kind of count move, so the equality above means something.
    assert stored.total("dead_end").fired and stored.total("runtime_error").fired
    assert stored.total("simulator_error").fired and stored.total("phantom_receipt").fired
    unscored = {cls for r in stored.repetitions_held.values() for cls in r.unscored}
    assert {"dead_end", "runtime_error"} <= unscored     # the simulator_error ends are left out


def test_a_baseline_file_round_trips(tmp_path):
    base = summary({cls: np.full(20, 0.2) for cls in TESTED}, rng=np.random.default_rng(4))
    path = tmp_path / "baseline.json"
    path.write_text(baseline_json(base, simrun_version="0.1.0"))
    loaded = load_baseline(path)
    assert loaded.cells == base.cells and loaded.repetitions_held == base.repetitions_held
    assert (loaded.run_id, loaded.dataset_hash, loaded.scorer_version, loaded.repetitions) == (BASE_ID, DATASET, "1", 5)
    lines = path.read_text().splitlines()
    # a line a cell
    assert sum(1 for line in lines if re.fullmatch(r'    "p\d/g\d": \{"dead_end": \[.*\},?', line)) == 20
    assert sum(1 for line in lines if re.fullmatch(r'    "p\d/g\d": \{("fired".*)?\},?', line)) == 20
    assert json.loads(path.read_text())["repetitions"]["p0/g0"]["fired"]["dead_end"] == sorted(
        base.repetitions_held[("p0", "g0")].fired["dead_end"])


def test_a_format_1_baseline_still_gates_and_says_flips_cannot_be_listed(tmp_path):
    rng = np.random.default_rng(6)
    rates = {cls: np.full(70, 0.05) for cls in TESTED}
    base = summary(rates, rng=rng)
    data = json.loads(baseline_json(base, simrun_version="0.1.0"))
    data.pop("repetitions")
    data.pop("user_backend", None)
    data["format_version"] = 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    old = load_baseline(path)
    assert old.repetitions_held is None and old.cells == base.cells
    result = gate_verdict(old, summary({"loop": np.full(70, 0.4)}, rng=rng, run_id=CAND_ID, like=base), SETTINGS)
    assert [c.cls for c in result.failures] == ["loop"] and result.flips is None
    md = markdown(result)
    assert "flipped conversations cannot be listed" in md and "format 1" in md and "bless it again" in md
    assert result.moved   # the cells that rose are still named


@pytest.mark.parametrize("mutate, says", [
    (lambda d: d.update(format_version=7), "(format_version)"),
    (lambda d: d["cells"]["p0/g0"].update(loop=[6, 5, 0]), "fired 6 > scored 5"),
    (lambda d: d["cells"]["p0/g0"].pop("loop"), "missing ['loop']"),
    (lambda d: d.pop("dataset_hash"), "(dataset_hash)"),
    (lambda d: d["repetitions"]["p0/g0"].update(fired={"loop": [0, 1, 2, 3, 4]}), "disagree with the counts"),
    (lambda d: d["repetitions"].pop("p0/g0"), "the repetitions are not given for the same cells"),
    (lambda d: d["repetitions"]["p0/g0"].update(held=[0, 1, 2, 3, 9]), "do not match"),
])
def test_a_bad_baseline_file_is_named_with_the_fix(tmp_path, mutate, says):
    base = summary({"loop": np.full(3, 0.2)}, rng=np.random.default_rng(1))
    data = json.loads(baseline_json(base, simrun_version="0"))
    mutate(data)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError) as err:
        load_baseline(path)
    assert str(err.value).startswith(str(path)) and says in str(err.value)
    assert "simrun baseline bless" in str(err.value)


def test_a_baseline_that_is_not_json_gives_its_line(tmp_path):
    path = tmp_path / "b.json"
    path.write_text('{\n  "format": "simrun-baseline",\n  oops\n}')
    with pytest.raises(BaselineError, match=r"b\.json:3: not valid JSON"):
        load_baseline(path)


def test_a_class_no_cell_could_decide_is_untested_and_skipped_in_junit():
    base = summary({"loop": np.full(10, 0.2)})
    blind = RunSummary(CAND_ID, DATASET, "1", 5, {cell: {**counts, "unanswered": Counts(0, 0, 5)}
                                                  for cell, counts in base.cells.items()}, "c")
    result = gate_verdict(base, blind, SETTINGS)
    unanswered = verdict_of(result, "unanswered")
    assert unanswered.verdict == "untested" and unanswered.p is None and result.passed
    case = next(c for c in ET.fromstring(junit_xml(result)).iter("testcase") if c.get("name") == "unanswered")
    assert case.find("skipped") is not None
    assert result.flips is None   # the candidate did not say which repetitions
