"""A verdict is records, and every renderer reads the records: rewording every line of a verdict
changes no structure of its JUnit XML, Markdown, JSON, command-line lines or report links, only
the words shown. And the JSON document holds what a script needs: status, exit code, typed lines
and the gate's per-class results."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from xml.etree import ElementTree as ET

import pytest

from simrun._settings import ReleaseSection
from simrun.scoring.gate._compare import gate_verdict
from simrun.scoring.gate._run_verdict import RunVerdict, run_verdict
from simrun.scoring.gate._verdict_lines import EXIT_CODES, FAILED_ON, REASONS, Kind, Line, Status
from simrun.scoring.gate._verdict_text import junit_xml, markdown, verdict_document, verdict_json
from simrun.scoring.pages._report import evidence_anchor
from tests.scoring.gate.test_run_verdict import BASE, SETTINGS, a_summary, clean_rates, every_status, items_of

# Words that the renderers once looked for in a reason: a reworded line carries all of them.
DECOY = "guarantees broken: new, not gated: gate against the baseline: gate: sequential: reworded"


def gated_verdict() -> RunVerdict:
    """A failed gate, a new goal that fails a ceiling on its own, and a goal removed."""
    items = items_of(goals=("book", "cancel", "upgrade"))
    cand = a_summary("r20261201-000001-bbbbbb", items, reps=8, seed=2,
                     fired={"book": {"dead_end": 1.0}, "upgrade": {"loop": 0.5}})
    gate = gate_verdict(BASE, cand, SETTINGS)
    rates, outcome = clean_rates(cand, wrong_record=(3, 96))
    return run_verdict(cand.run_id, rates, outcome, ReleaseSection(), gate=gate, baseline=BASE)


def verdicts() -> dict[str, RunVerdict]:
    return {**every_status(), "gated": gated_verdict()}      # type: ignore[dict-item]


def reworded(verdict: RunVerdict) -> RunVerdict:
    def words(lines: tuple[Line, ...], part: str) -> tuple[Line, ...]:
        return tuple(replace(line, text=f"{DECOY} {part} {i}") for i, line in enumerate(lines))
    return replace(verdict, reasons=words(verdict.reasons, "reason"), held=words(verdict.held, "held"),
                   not_checked=words(verdict.not_checked, "not checked"))


def junit_shape(xml: str) -> list:
    root = ET.fromstring(xml.split("?>", 1)[1])
    return [(root.get("tests"), root.get("failures"))] + [
        (suite.get("name"), suite.get("tests"), suite.get("failures"),
         [(c.get("classname"), c.get("name"), c.find("failure") is not None) for c in suite.iter("testcase")])
        for suite in root.findall("testsuite")]


def without_text(doc: dict) -> dict:
    return {**doc, **{part: [{k: v for k, v in line.items() if k != "text"} for line in doc[part]]
                      for part in ("reasons", "held", "not_checked")}}


@pytest.mark.parametrize("case", list(verdicts()))
def test_rewording_every_line_changes_no_structure_of_any_renderer(case):
    verdict = verdicts()[case]
    other = reworded(verdict)
    assert [line.kind for line in other.reasons] == [line.kind for line in verdict.reasons]
    # JUnit: the same suites, testcases (classname and name) and failures.
    assert junit_shape(junit_xml(other)) == junit_shape(junit_xml(verdict))
    # Markdown: the same heading and the same items, in the same places, with the new words.
    md, md_other = markdown(verdict).splitlines(), markdown(other).splitlines()
    assert len(md) == len(md_other) and md[0] == md_other[0]
    prefix = lambda line: line.split(DECOY)[0] if DECOY in line else None      # noqa: E731
    assert [prefix(x) for x in md_other if DECOY in x] == (
        ["- **"] * len(verdict.reasons) + ["- held: "] * len(verdict.held)
        + ["- not checked: "] * len(verdict.not_checked))
    # JSON: everything but the words.
    assert without_text(verdict_document(other)) == without_text(verdict_document(verdict))
    # The command line: the same parts, one line each; the report: the same links.
    assert [part for part, _ in other.lines()] == [part for part, _ in verdict.lines()]
    fired = ["dead_end", "wrong_record", "loop"]
    assert [evidence_anchor(r, fired, other.gate) for r in other.reasons] \
        == [evidence_anchor(r, fired, verdict.gate) for r in verdict.reasons]


def test_the_control_a_renderer_that_read_words_would_be_caught():
    """Control: the shape compared above does change when what a line is changes."""
    verdict = gated_verdict()
    *others, new_line = verdict.reasons
    assert new_line.kind is Kind.NEW_NOT_GATED
    as_other_kind = replace(verdict, reasons=(*others, replace(new_line, kind=Kind.GOAL_FILE_PROBLEM)))
    assert junit_shape(junit_xml(as_other_kind)) != junit_shape(junit_xml(verdict))
    assert without_text(verdict_document(as_other_kind)) != without_text(verdict_document(verdict))


def test_the_json_document_holds_the_status_the_typed_lines_and_the_gate():
    verdict = gated_verdict()
    doc = json.loads(verdict_json(verdict))
    assert set(doc) == {"schema_version", "run_id", "status", "exit_code", "baseline", "failed_on", "reasons",
                        "held", "not_checked", "gate", "rounds"}
    # What CI acts on apart: a broken guarantee, a regression, a new goal's absolute criterion.
    assert doc["failed_on"] == ["guarantees", "regression", "release"]
    assert (doc["schema_version"], doc["status"], doc["exit_code"], doc["rounds"]) == (1, "failed", 1, None)
    assert [r["kind"] for r in doc["reasons"]] == ["guarantees_broken", "gate_regression", "new_not_gated"]
    broken, regression, new = doc["reasons"]
    assert broken["classes"] == ["wrong_record"] and broken["figures"]["wrong_record.conversations"] == 3
    assert regression["classes"] == ["dead_end"]
    assert regression["figures"]["dead_end.p_adjusted"] < SETTINGS.alpha
    assert new["scope"] == {"kind": "goal", "name": "upgrade",
                            "cells": [[p, "upgrade"] for p in ("anna", "ben", "cleo", "dan")]}
    assert new["criterion"] == "release.max_rate.loop in goal upgrade (added, 4 cells)"
    assert new["figures"]["ceiling"] == 0.10 and new["figures"]["rate"] == new["figures"]["fired"] / 32
    removed = [n for n in doc["not_checked"] if n["kind"] == "removed"]
    assert [(n["scope"]["kind"], n["scope"]["name"]) for n in removed] == [("goal", "rename")]
    # The gate's per-class results: every class, its counts, rates and p-values as numbers.
    gate = doc["gate"]
    assert gate["baseline"]["run_id"] == BASE.run_id and gate["passed"] is False and gate["cells"] == 8
    by_class = {c["class"]: c for c in gate["classes"]}
    assert set(by_class) == {c.cls for c in verdict.gate.classes}
    dead_end = by_class["dead_end"]
    assert dead_end["failed"] and dead_end["candidate"] == {"fired": 32, "scored": 96, "unverifiable": 0}
    assert {s["name"] for s in dead_end["regressed_in"]} >= {"book"}
    # Every line's text is the very line the command line prints after its label.
    printed = [line for part, line in verdict.lines() if part == "reason"]
    assert printed == [f"FAILED: {r['text']}" for r in doc["reasons"]]


def test_a_figure_that_is_not_a_number_is_null_never_nan():
    verdict = gated_verdict()
    line = replace(verdict.reasons[0], figures={"rate": math.nan, "n": 3})
    doc = json.loads(verdict_json(replace(verdict, reasons=(line,))))
    assert doc["reasons"][0]["figures"] == {"rate": None, "n": 3}


def test_the_status_gives_the_exit_code_and_only_reasons_are_reasons():
    assert {s.value: s.exit_code for s in Status} == {"passed": 0, "failed": 1, "not judged": 2, "inconclusive": 3,
                                                                 "incomplete": 4}
    assert set(EXIT_CODES) == set(Status)
    for case, verdict in verdicts().items():
        assert all(r.kind in REASONS for r in verdict.reasons), case
        # Undecided rounds and criteria, and conversations never run, are reasons of a run that would pass, and
        # not-checked lines of one that failed anyway.
        assert not any(line.kind in REASONS - {Kind.ROUNDS_UNDECIDED, Kind.NEVER_RUN, Kind.CRITERION_UNDECIDED}
                       for line in verdict.not_checked), case
        assert verdict.passed == (verdict.status is Status.PASSED) == (not verdict.reasons), case


def test_a_failing_assert_on_a_verdict_reads_as_its_status_and_reasons():
    verdict = gated_verdict()
    assert repr(verdict) == (f"<RunVerdict {verdict.run_id} FAILED (exit 1): "
                             + "; ".join(r.text for r in verdict.reasons) + ">")
    assert str(verdict) == verdict.text() and str(verdict).splitlines()[0] == "verdict: FAILED (exit 1)"
    passed = every_status()["passed"]
    assert repr(passed).startswith("<RunVerdict r1 PASSED (exit 0): every guarantee held")


@pytest.mark.parametrize("case", list(verdicts()))
def test_every_reason_says_what_it_fails_the_run_on_and_a_pass_fails_on_nothing(case):
    verdict = verdicts()[case]
    assert set(FAILED_ON) == REASONS        # a new kind of reason must say what it fails
    assert bool(verdict.failed_on) == bool(verdict.reasons)
    assert (verdict.failed_on == ()) == verdict.passed
    assert json.loads(verdict_json(verdict))["failed_on"] == list(verdict.failed_on)
