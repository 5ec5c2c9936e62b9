"""The classes' names (simrun._classes) are the judge's checks, exactly: the settings, the
store and the gate read the names at the bottom layer, and the judge scores with its checks, so a
check added without its name would be scored and never counted, gated or bounded."""

from __future__ import annotations

from simrun import _classes as classes
from simrun.scoring.checks import _scorer as scorer
from simrun.scoring.checks._guarantees import GUARANTEE_CHECKS
from simrun.scoring.checks._progress import PROGRESS_CHECKS


def test_the_names_are_the_judge_s_checks_in_its_order():
    assert classes.PROGRESS_CLASSES == (*PROGRESS_CHECKS, "simulator_error")
    assert classes.GUARANTEES == tuple(GUARANTEE_CHECKS)
    assert classes.ALL_CLASSES == (*classes.PROGRESS_CLASSES, *classes.GUARANTEES)
    assert classes.CEILING_CLASSES == (*classes.ALL_CLASSES, "runtime_error")


def test_the_judge_exports_the_same_names_and_kinds():
    assert (scorer.ALL_CLASSES, scorer.PROGRESS_CLASSES, scorer.GUARANTEES) == (
        classes.ALL_CLASSES, classes.PROGRESS_CLASSES, classes.GUARANTEES)
    kinds = {cls: scorer.kind_of(cls) for cls in classes.ALL_CLASSES}
    assert {cls for cls, kind in kinds.items() if kind == "guarantee"} == set(classes.GUARANTEES)
