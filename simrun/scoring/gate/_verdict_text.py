"""A run's verdict (`simrun.scoring.gate._run_verdict`) as Markdown, JUnit XML and JSON: the step
summary, the pull-request comment, the CI test report and what a script reads say what the exit
status says, reason by reason.

Each is made from the verdict's records (`simrun.scoring.gate._verdict_lines`): what a line is
comes from its kind, its classes and its criterion, never from its words. The gate's own tables
(`simrun.scoring.gate._text`) follow the verdict when a baseline was compared.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from simrun._settings import SequentialSection
from simrun._untrusted_text import markdown_text
from simrun._writing import write_file
from simrun.scoring.gate import _text as T
from simrun.scoring.gate._run_verdict import RunVerdict
from simrun.scoring.gate._sequential import Look, Sequential
from simrun.scoring.gate._summary import Counts
from simrun.scoring.gate._verdict import ClassVerdict, GateResult, SliceVerdict
from simrun.scoring.gate._verdict_lines import Kind, Line, Scope, Status

SCHEMA_VERSION = 1      # of the JSON document; a change that breaks a reader makes it 2


ICONS = {Status.PASSED: "✅", Status.FAILED: "❌"}     # else ⚠️: not judged, inconclusive


def markdown(verdict: RunVerdict) -> str:
    """The step summary and the pull-request comment: the status, then one item per line of the
    verdict, then the rounds and the gate's details when there are any."""
    icon = ICONS.get(verdict.status, "⚠️")
    lines = [f"## {icon} simrun {verdict.word}: run `{verdict.run_id}` (exit {verdict.exit_code})", ""]
    # Each line's words may quote a goal file, a runtime or a store: as text, never as Markdown or
    # HTML, and on one line, so that no line of data reads as a heading (the verdict is simrun's).
    lines += [f"- **{markdown_text(r.text)}**" for r in verdict.reasons]
    lines += [f"- held: {markdown_text(h.text)}" for h in verdict.held]
    lines += [f"- not checked: {markdown_text(n.text)}" for n in verdict.not_checked]
    lines.append("")
    if verdict.sequential is not None:
        lines += rounds_markdown(verdict.sequential)
    if verdict.gate is not None:
        # The gate's details, one heading level down: they explain the verdict's gate line.
        lines.append("#" + T.markdown(verdict.gate))
    return "\n".join(lines)


def _pts(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f}"


def round_line(look: Look, settings: SequentialSection) -> str:
    """One look of the sequential gate, as the command line prints it."""
    widest = sorted((b for b in look.bounds if b.high is not None), key=lambda b: -(b.high or 0.0))[:3]
    return (f"{look.round:g}/{settings.max_rounds}: {look.conversations} candidate conversations; tested at "
            f"{look.alpha:.2g} ({look.alpha_spent:.3g} of alpha spent); {look.decision}; highest upper bounds: "
            + ", ".join(f"{b.cls} {_pts(b.high)} pts" for b in widest))


def rounds_markdown(rounds: Sequential) -> list[str]:
    """The rounds, the decision's spend and every class's running bounds at the last look."""
    s = rounds.settings
    lines = [f"### Sequential gate: {rounds.decision} after {rounds.looks[-1].round:g} of {s.max_rounds} rounds",
             "", f"{rounds.line()}", "",
             f"Rounds of {s.per_round} repetition(s) per cell; alpha spent as alpha x (round / {s.max_rounds})^"
             f"{s.spending:g}, each look tested by the max-T permutation gate at the level that spends it "
             f"({'from the looks’ joint law' if s.exact else 'the union bound: its increment'}); a class passes "
             f"once its upper bound (beta {s.beta:g} spent as beta x (round / {s.max_rounds})^{s.beta_spending:g}) "
             "is below the minimum effect (see docs/sequential-gate.md).",
             "", "| round | candidate conversations | level of the look | alpha spent | decision |",
             "| ---: | ---: | ---: | ---: | --- |"]
    lines += [f"| {k.round:g} | {k.conversations} | {k.alpha:.2g} | {k.alpha_spent:.3g} | {k.decision} |"
              for k in rounds.looks]
    lines += ["", "| class | rise (pts) | bounds: fail side's lower, pass side's upper (pts) |", "| --- | ---: | --- |"]
    lines += [f"| {b.cls} | {_pts(b.delta)} | {_pts(b.low)} to {_pts(b.high)} |" for b in rounds.looks[-1].bounds]
    return lines + [""]


# The testcase a reason of the run's suite is, by its kind (the names are the words these reasons
# open with). A failed criterion is named by the criterion, a broken guarantee is "guarantees".
CASE_NAMES = {Kind.NO_CONVERSATION_JUDGED: "no conversation was judged", Kind.BASELINE_REFUSED: "gate",
              Kind.GATE_REGRESSION: "gate against the baseline", Kind.ROUNDS_UNDECIDED: "sequential",
              Kind.GOAL_FILE_PROBLEM: "a problem in the goal files, not the runtime's",
              Kind.NEVER_RUN: "conversations never run"}


def junit_cases(verdict: RunVerdict) -> list[tuple[str, str, Line | None]]:
    """The run's suite, (classname, name, the reason it fails on or None): its guarantees, each
    release criterion, each criterion a goal or persona new since the baseline failed, and every
    other reason, so that the XML fails exactly when the exit status is not 0. A failed gate's
    reason is failed by the gate's own suite, class by class."""
    broken = [r for r in verdict.reasons if r.kind is Kind.GUARANTEES_BROKEN]
    cases: list[tuple[str, str, Line | None]] = [("simrun.run", "guarantees", broken[0] if broken else None)]
    failed = {r.criterion: r for r in verdict.reasons if r.kind is Kind.RELEASE_CRITERION}
    cases += [("simrun.release", c.name, failed.get(c.name)) for c in verdict.release.criteria]
    # A criterion set by hand that the UNVERIFIABLE conversations could pass or fail is not a
    # pass: its case fails with the bounds, as the exit status (inconclusive) says.
    cases += [("simrun.release", r.criterion, r) for r in verdict.reasons if r.kind is Kind.CRITERION_UNDECIDED]
    cases += [("simrun.new", r.criterion, r) for r in verdict.reasons if r.kind is Kind.NEW_NOT_GATED]
    gated = verdict.gate is not None and not verdict.gate.passed
    cases += [("simrun.run", CASE_NAMES[r.kind], r) for r in verdict.reasons
              if r.kind in CASE_NAMES and not (gated and r.kind is Kind.GATE_REGRESSION)]
    return cases


def junit_xml(verdict: RunVerdict) -> str:
    """A suite for the run (`junit_cases`), then the gate's suite, one testcase per class, when a
    baseline was compared."""
    suites = ET.Element("testsuites", name=f"simrun {verdict.run_id}")
    cases = junit_cases(verdict)
    failures = sum(reason is not None for _, _, reason in cases)
    suite = ET.SubElement(suites, "testsuite", name=f"simrun run {verdict.run_id}", tests=str(len(cases)),
                          failures=str(failures), errors="0", skipped="0")
    for classname, name, reason in cases:
        case = ET.SubElement(suite, "testcase", classname=classname, name=name)
        if reason is not None:
            ET.SubElement(case, "failure", message=reason.text, type="failed")
    ET.SubElement(suite, "system-out").text = "\n".join(line for _, line in verdict.lines())
    if verdict.gate is not None:
        suites.append(T.gate_suite(verdict.gate))
    suites.set("tests", str(sum(int(s.get("tests", "0")) for s in suites)))
    suites.set("failures", str(sum(int(s.get("failures", "0")) for s in suites)))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# --- JSON -------------------------------------------------------------------------------------

def verdict_json(verdict: RunVerdict) -> str:
    """The verdict as a JSON document (`verdict_document`), for scripts: `simrun --verdict-json`
    and `simrun gate --verdict-json` write it."""
    return json.dumps(verdict_document(verdict), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_verdict_json(verdict: RunVerdict, path: str | Path | None) -> Path | None:
    """The verdict as JSON, written at `path` (None: nowhere); where it was written."""
    if path is None:
        return None
    return write_file(path, verdict_json(verdict), what="the verdict's JSON")


def verdict_document(verdict: RunVerdict) -> dict[str, Any]:
    """schema_version, run_id, status, exit_code, baseline (where it came from, or null), failed_on
    (what the reasons fail the run on: guarantees, release, regression, ...), reasons,
    held and not_checked (each line's kind, classes, scope, criterion, figures and text), the
    gate's per-class results when a baseline was compared (else null), and the rounds of a run
    judged in rounds (else null). docs/reference/cli.md, "The verdict as JSON", describes it."""
    return {"schema_version": SCHEMA_VERSION, "run_id": verdict.run_id, "status": verdict.status.value,
            "exit_code": verdict.exit_code, "baseline": verdict.baseline, "failed_on": list(verdict.failed_on),
            "reasons": [line_document(r) for r in verdict.reasons],
            "held": [line_document(h) for h in verdict.held],
            "not_checked": [line_document(n) for n in verdict.not_checked],
            "gate": None if verdict.gate is None else gate_document(verdict.gate),
            "rounds": None if verdict.sequential is None else rounds_document(verdict.sequential)}


def line_document(line: Line) -> dict[str, Any]:
    return {"kind": line.kind.value, "classes": list(line.classes), "scope": _scope(line.scope),
            "criterion": line.criterion or None,
            "figures": {name: _number(v) for name, v in line.figures.items()}, "text": line.text}


def _scope(scope: Scope) -> dict[str, Any]:
    return {"kind": scope.kind, "name": scope.name or None, "cells": [list(cell) for cell in scope.cells]}


def gate_document(gate: GateResult) -> dict[str, Any]:
    """The gate against the baseline: its settings, which test it used (paired or not, and why),
    every class's counts, rates, rise, p-values and verdict, with the goals and personas it
    regressed in, and the conversations that flipped (paired runs only, else null)."""
    pairing = gate.pairing
    return {"baseline": {"run_id": gate.baseline.run_id, "source": gate.baseline.source},
            "candidate": gate.candidate.run_id, "passed": gate.passed, "cells": gate.cells,
            "alpha": gate.alpha, "min_effect": gate.min_effect, "min_effect_slice": gate.min_effect_slice,
            "correction": gate.correction, "tests": gate.tests,
            "test": {"paired": pairing.paired, "pairs": pairing.pairs, "left_out": pairing.left_out,
                     "seed": pairing.seed, "text": pairing.text},
            "classes": [_class(c) for c in gate.classes],
            "flips": None if gate.flips is None or not pairing.paired else [
                {"class": f.cls, "persona": f.cell[0], "goal": f.cell[1], "repetition": f.repetition,
                 "conversation_id": f.conversation_id, "baseline_id": f.baseline_id} for f in gate.flips]}


def _class(c: ClassVerdict) -> dict[str, Any]:
    return {"class": c.cls, "kind": c.kind, "verdict": c.verdict, "failed": c.failed, "reason": c.reason,
            "baseline": _counts(c.baseline), "candidate": _counts(c.candidate), "cells": c.cells,
            "baseline_rate": _number(c.baseline_rate), "candidate_rate": _number(c.candidate_rate),
            "delta": _number(c.delta), "low": _number(c.low), "high": _number(c.high), "p": _number(c.p),
            "p_adjusted": _number(c.p_adjusted), "regressed_overall": c.regressed_overall,
            "regressed_in": [_slice(s) for s in c.slice_failures]}


def _slice(s: SliceVerdict) -> dict[str, Any]:
    return {"dimension": s.dimension, "name": s.name, "baseline": _counts(s.baseline),
            "candidate": _counts(s.candidate), "cells": s.cells, "delta": _number(s.delta),
            "p_adjusted": _number(s.p_adjusted)}


def _counts(c: Counts) -> dict[str, int]:
    return {"fired": c.fired, "scored": c.scored, "unverifiable": c.unverifiable}


def rounds_document(rounds: Sequential) -> dict[str, Any]:
    last = rounds.looks[-1]
    return {"decision": rounds.decision, "round": _number(last.round), "max_rounds": rounds.settings.max_rounds,
            "per_round": rounds.settings.per_round, "conversations": last.conversations, "capped": rounds.capped,
            "alpha_spent": _number(last.alpha_spent)}


def _number(v: float | None) -> float | None:
    """A figure as JSON holds it: a number, or null where there is none (JSON has no NaN)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return v
