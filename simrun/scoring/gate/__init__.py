"""Verdicts people act on: the merge gate against a baseline, and the release check.

    run_verdict a run's verdict, computed once: guarantees, release criteria and the gate
    verdict_lines what a verdict is made of: its status, and each line's kind, classes, scope, figures
    verdict_text  that verdict as Markdown, JUnit XML and JSON, from its records
    compare     gate_verdict(baseline, candidate, settings): the only place a gate verdict is made
    sharing     the cells a candidate shares with its baseline by content, and those new or removed
    verdict     what a verdict holds: per class, per slice, what moved and what flipped
    summary     per-cell counts of every class: the only thing the gate compares
    variation   how far a cell's rate moves from run to run, from a baseline of several runs
    baseline    the blessed baseline file: written, read from a file or from git, checked
    stats       the permutation test over cells and slices, and its power
    joint       reassigning whole conversations between the runs, every class at once
    paired      when two runs of one seed are paired by cell and repetition, and the sign-flip test
    text        a verdict as text: the console, Markdown and JUnit XML
    formats     how rates, differences and p-values are written
    release     what a run must meet, beyond its guarantees, to be released
    competence  how competent a user model is (`simrun check-user`)

Imports: the shared vocabulary of `scoring`, `simrun.scoring.dataset`, the judge and the store; never
the pages, which show the verdicts made here.
"""

from __future__ import annotations

from simrun.scoring.gate import _text as text
from simrun.scoring.gate import _verdict_text as verdict_text
from simrun.scoring.gate._baseline import baseline_from_git, load_baseline, open_baseline, write_baseline
from simrun.scoring.gate._compare import gate_verdict
from simrun.scoring.gate._competence import DEFAULT_THRESHOLD, Competence, competence, measure
from simrun.scoring.gate._formats import pct, size
from simrun.scoring.gate._futility import Futility
from simrun.scoring.gate._paired import Pairing
from simrun.scoring.gate._release import Criterion, ReleaseCheck, Unchecked
from simrun.scoring.gate._run_verdict import RunVerdict, verdict_of_run
from simrun.scoring.gate._sequential import Bound, Look, Sequential, sequential_gate
from simrun.scoring.gate._sharing import ItemChange, NewSlice, Sharing
from simrun.scoring.gate._summary import (
    GATE_CLASSES,
    CellRepetitions,
    Counts,
    RunSummary,
    merge_runs,
    summary_from_store,
)
from simrun.scoring.gate._variation import RunVariation
from simrun.scoring.gate._verdict import ClassVerdict, Flip, GateResult, MovedCell, SliceVerdict
from simrun.scoring.gate._verdict_lines import Kind, Line, Scope, Status
from simrun.scoring.gate._verdict_text import junit_xml, markdown, round_line, verdict_json, write_verdict_json

__all__ = [
    "Bound",
    "CellRepetitions",
    "ClassVerdict",
    "Competence",
    "Counts",
    "Criterion",
    "Flip",
    "Futility",
    "ItemChange",
    "Look",
    "MovedCell",
    "NewSlice",
    "ReleaseCheck",
    "RunVariation",
    "Sharing",
    "SliceVerdict",
    "Unchecked",
    "DEFAULT_THRESHOLD",
    "GATE_CLASSES",
    "GateResult",
    "Kind",
    "Line",
    "Pairing",
    "RunSummary",
    "RunVerdict",
    "Scope",
    "Sequential",
    "Status",
    "baseline_from_git",
    "competence",
    "gate_verdict",
    "junit_xml",
    "load_baseline",
    "markdown",
    "measure",
    "merge_runs",
    "open_baseline",
    "pct",
    "round_line",
    "sequential_gate",
    "size",
    "summary_from_store",
    "text",
    "verdict_json",
    "verdict_of_run",
    "verdict_text",
    "write_baseline",
    "write_verdict_json",
]

if __name__ != "simrun.scoring.gate":   # one module name per file (simrun/scoring/__init__.py says why)
    raise ImportError(f"this is simrun.scoring.gate; import it as `simrun.scoring.gate`, not `{__name__}`")
