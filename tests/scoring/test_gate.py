"""The gate's verdict: decided from per-cell counts, checked against scipy on the same counts."""

from __future__ import annotations

import asyncio
import json
import re
from decimal import Decimal
from xml.etree import ElementTree as ET

import numpy as np
import pytest
from scipy import stats as st

from scoring import rates as R
from scoring.baseline import (GATE_CLASSES, BaselineError, Counts, RunSummary, baseline_json, load_baseline,
                              summary_from_scorecards, summary_from_store)
from scoring.gate import TESTED, GateError, gate_verdict, junit_xml, markdown
from scoring.scorer import GUARANTEES
from scoring.store import Store
from simulator.adapters.python import PythonRuntime
from simulator.config import GateSection
from simulator.runner import run_matrix
from simulator.users.scripted import ScriptedUser
from tests.conftest import run_demo
from tests.scoring.test_stats import closed_testing
from tripdesk import TripDesk

SETTINGS = GateSection()


def summary(rates_by_class: dict[str, np.ndarray], *, reps=5, run_id="r", dataset="d", scorer="1",
            rng=None, scored=None) -> RunSummary:
    """Cells drawn as binomial counts at the given per-cell rates (zero for classes not given)."""
    rng = rng or np.random.default_rng(0)
    cells = len(next(iter(rates_by_class.values())))
    out = {}
    for i in range(cells):
        counts = {}
        for cls in GATE_CLASSES:
            n = reps if scored is None else int(scored[i])
            rate = rates_by_class.get(cls)
            fired = int(rng.binomial(n, rate[i])) if rate is not None else 0
            counts[cls] = Counts(fired, n, 0)
        out[(f"p{i % 7}", f"g{i // 7}")] = counts
    return RunSummary(run_id, dataset, scorer, reps, out, f"test {run_id}")


def scipy_decisions(base: RunSummary, cand: RunSummary, settings=SETTINGS) -> dict[str, str]:
    """The gate's rule, computed independently from the counts with scipy."""
    pvalues, deltas = {}, {}
    for cls in TESTED:
        a, b = [], []
        for cell in base.cells:
            x, y = base.cells[cell][cls], cand.cells[cell][cls]
            if x.scored and y.scored:
                a.append(x.fired / x.scored)
                b.append(y.fired / y.scored)
        a, b = np.array(a), np.array(b)
        d = b - a
        if np.ptp(d) < 1e-12:
            pvalues[cls] = 0.5 ** len(d) if d.mean() > 0 else 1.0
        else:
            pvalues[cls] = st.ttest_rel(b, a, alternative="greater").pvalue
        deltas[cls] = d.mean()
    if settings.correction == "holm":
        adjusted = closed_testing(pvalues)
    else:
        adjusted = {k: min(1.0, len(pvalues) * p) for k, p in pvalues.items()}
    out = {}
    for cls in GATE_CLASSES:
        if cls in GUARANTEES:
            out[cls] = "violated" if cand.total(cls).fired else "held"
        else:
            out[cls] = ("regression" if adjusted[cls] < settings.alpha and deltas[cls] >= settings.min_effect
                        else "ok")
    return out


@pytest.mark.parametrize("correction", ["holm", "bonferroni"])
def test_decisions_agree_with_scipy_on_the_same_counts(correction):
    settings = GateSection(correction=correction)
    rng = np.random.default_rng(42)
    regressions = 0
    for trial in range(40):
        cells = int(rng.integers(8, 80))
        base_rates = {cls: rng.uniform(0, 0.3, cells) for cls in TESTED}
        cand_rates = {cls: np.clip(r + rng.choice([0, 0, 0.04, 0.12]), 0, 1) for cls, r in base_rates.items()}
        if trial % 5 == 0:
            cand_rates["phantom_receipt"] = np.full(cells, 0.02)
        base = summary(base_rates, rng=rng, reps=int(rng.integers(2, 8)))
        cand = summary(cand_rates, rng=rng, reps=int(rng.integers(2, 8)))
        result = gate_verdict(base, cand, settings)
        expected = scipy_decisions(base, cand, settings)
        assert {c.cls: c.verdict for c in result.classes} == expected
        assert result.passed == all(v in ("ok", "held") for v in expected.values())
        regressions += sum(v == "regression" for v in expected.values())
    assert regressions > 5   # the comparison covered both verdicts


def test_a_planted_regression_fails_and_an_identical_run_passes():
    rng = np.random.default_rng(1)
    base_rates = {cls: np.full(70, 0.08) for cls in TESTED}
    base = summary(base_rates, rng=rng)
    same = gate_verdict(base, base, SETTINGS)
    assert same.passed and same.exit_code == 0
    assert all(c.delta == 0 for c in same.classes if c.delta is not None)
    cand = summary({**base_rates, "dead_end": np.full(70, 0.30)}, rng=rng)
    result = gate_verdict(base, cand, SETTINGS)
    assert not result.passed and result.exit_code == 1
    assert [c.cls for c in result.failures] == ["dead_end"]
    assert "regressions: dead_end" in result.headline()


def test_a_significant_rise_below_the_minimum_effect_passes():
    # 14 of 70 cells rise by 20 points: the mean rise is 4 points, and clearly significant.
    base = summary({"loop": np.zeros(70)})
    cand = RunSummary("c", "d", "1", 5, {cell: {**counts, "loop": Counts(1 if i < 14 else 0, 5, 0)}
                                        for i, (cell, counts) in enumerate(base.cells.items())}, "c")
    result = gate_verdict(base, cand, SETTINGS)
    loop = next(c for c in result.classes if c.cls == "loop")
    assert loop.delta == pytest.approx(0.04) and loop.p_adjusted < 0.001
    assert loop.verdict == "ok" and "below 5.0 pts" in loop.reason and result.passed
    assert [c.cls for c in gate_verdict(base, cand, GateSection(min_effect=0.03)).failures] == ["loop"]


def test_any_guarantee_violation_fails_even_when_the_baseline_had_it():
    rates = {cls: np.full(30, 0.1) for cls in TESTED}
    base = summary({**rates, "audit_gap": np.full(30, 0.5)})
    cand = summary({**rates, "audit_gap": np.r_[np.zeros(29), [0.2]]}, rng=np.random.default_rng(9))
    cand = RunSummary("c", "d", "1", 5, {**cand.cells, ("p0", "g0"): {**cand.cells[("p0", "g0")],
                                                                     "audit_gap": Counts(1, 5, 0)}}, "c")
    result = gate_verdict(base, cand, SETTINGS)
    audit = next(c for c in result.classes if c.cls == "audit_gap")
    assert audit.verdict == "violated" and audit.p_adjusted is None and not result.passed
    assert "guarantees broken: audit_gap" in result.headline()


def test_runs_of_other_datasets_or_scorers_are_refused():
    base = summary({"loop": np.zeros(10)})
    with pytest.raises(GateError, match="dataset mismatch.*bless a new baseline"):
        gate_verdict(base, summary({"loop": np.zeros(10)}, dataset="other"), SETTINGS)
    with pytest.raises(GateError, match="scorer version 1.*by 2.*simrun rescore RUN"):
        gate_verdict(base, summary({"loop": np.zeros(10)}, scorer="2"), SETTINGS)


def test_markdown_and_junit_say_the_verdict_per_class():
    rng = np.random.default_rng(2)
    rates = {cls: np.full(70, 0.05) for cls in TESTED}
    base = summary(rates, rng=rng, run_id="rbase")
    cand = summary({**rates, "not_understood": np.full(70, 0.35), "wrong_record": np.full(70, 0.02)},
                   rng=rng, run_id="rcand")
    result = gate_verdict(base, cand, SETTINGS)
    md = markdown(result)
    assert md.startswith("## ❌ simrun gate FAILED: guarantees broken: wrong_record; regressions: not_understood")
    assert "`rbase`" in md and "`rcand`" in md
    rows = [line for line in md.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == list(GATE_CLASSES)
    row = next(r for r in rows if "`not_understood`" in r)
    assert "**regression**" in row and "pts (" in row
    assert "**violated**" in next(r for r in rows if "`wrong_record`" in r)
    assert "holm correction over 8 classes" in md

    root = ET.fromstring(junit_xml(result))
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == list(GATE_CLASSES)
    failed = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    assert set(failed) == {"not_understood", "wrong_record"}
    assert failed["not_understood"].get("type") == "regression"
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
    mem = summary_from_scorecards("x", demo.hash, 2, [(c.cell.persona.id, c.cell.goal.id, c.scorecard)
                                                      for c in in_process.conversations])
    assert stored.cells == mem.cells
    for cls, rate in rates.items():
        assert stored.total(cls) == Counts(rate.occurrences, rate.scored, rate.unverifiable), cls
    assert stored.total("runtime_error") == Counts(outcome.runtime_errors, outcome.counted, 0)
    assert stored.total("goal_not_reached") == Counts(outcome.goal_scored - outcome.goal_reached,
                                                      outcome.goal_scored, outcome.goal_unverifiable)
    # The faults made every kind of count move, so the equality above means something.
    assert stored.total("dead_end").fired and stored.total("runtime_error").fired
    assert stored.total("simulator_error").fired and stored.total("phantom_receipt").fired


def test_a_baseline_file_round_trips(tmp_path):
    base = summary({cls: np.full(20, 0.2) for cls in TESTED}, rng=np.random.default_rng(4), run_id="rb")
    path = tmp_path / "baseline.json"
    path.write_text(baseline_json(base, simrun_version="0.1.0"))
    loaded = load_baseline(path)
    assert loaded.cells == base.cells
    assert (loaded.run_id, loaded.dataset_hash, loaded.scorer_version, loaded.repetitions) == ("rb", "d", "1", 5)
    lines = path.read_text().splitlines()
    assert sum(1 for line in lines if re.fullmatch(r'    "p\d/g\d": \{.*\},?', line)) == 20   # a line a cell


@pytest.mark.parametrize("mutate, says", [
    (lambda d: d.update(format_version=2), "(format_version)"),
    (lambda d: d["cells"]["p0/g0"].update(loop=[6, 5, 0]), "fired 6 > scored 5"),
    (lambda d: d["cells"]["p0/g0"].pop("loop"), "missing ['loop']"),
    (lambda d: d.pop("dataset_hash"), "(dataset_hash)"),
])
def test_a_bad_baseline_file_is_named_with_the_fix(tmp_path, mutate, says):
    base = summary({"loop": np.full(3, 0.2)})
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
    blind = RunSummary("c", "d", "1", 5, {cell: {**counts, "unanswered": Counts(0, 0, 5)}
                                          for cell, counts in base.cells.items()}, "c")
    result = gate_verdict(base, blind, SETTINGS)
    unanswered = next(c for c in result.classes if c.cls == "unanswered")
    assert unanswered.verdict == "untested" and unanswered.p is None and result.passed
    assert result.tests == len(TESTED) - 1     # the family holds only the classes tested
    case = next(c for c in ET.fromstring(junit_xml(result)).iter("testcase") if c.get("name") == "unanswered")
    assert case.find("skipped") is not None
