"""What a verdict is made of, as records: its status, and each of its lines (a reason, a thing that
held, a thing not checked) with its kind, the classes it concerns, its scope, its figures and the
text people read.

`simrun.scoring.gate._run_verdict` makes these; every surface renders them (the command line,
Markdown, JUnit XML, the step summary, JSON, the report and the dashboard), and none of them reads
the text to find out what a line is: the kind, the classes, the scope and the figures say it. So a
line's words can change without changing what a machine reads from the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from simrun.scoring.gate._summary import Cell

Figure = int | float


class Status(StrEnum):
    """What the verdict says of the run; its value is the word the surfaces print."""

    PASSED = "passed"
    FAILED = "failed"               # a guarantee, a release criterion or the gate failed
    NOT_JUDGED = "not judged"       # no conversation could be judged, or the goal files are wrong: bad input
    INCONCLUSIVE = "inconclusive"   # undecided (a run in rounds at its cap or budget; a criterion set by hand
                                    # that the UNVERIFIABLE conversations could pass or fail): never a pass
    INCOMPLETE = "incomplete"       # cut short (the budget, an interruption) with nothing failed: never a pass

    @property
    def exit_code(self) -> int:
        """The command line's exit status: what CI reads."""
        return EXIT_CODES[self]


EXIT_CODES = {Status.PASSED: 0, Status.FAILED: 1, Status.NOT_JUDGED: 2, Status.INCONCLUSIVE: 3,
              Status.INCOMPLETE: 4}


class Kind(StrEnum):
    """What a line says. Reasons (why the run is not passed), then what held, then what was not checked."""

    # reasons
    NO_CONVERSATION_JUDGED = "no_conversation_judged"   # every conversation ended for reasons not the runtime's
    GUARANTEES_BROKEN = "guarantees_broken"             # a guarantee fired in some conversation
    RELEASE_CRITERION = "release_criterion"             # a criterion of budgets.toml [release] failed
    BASELINE_REFUSED = "baseline_refused"               # the baseline cannot judge this run (other scorer...)
    GATE_REGRESSION = "gate_regression"                 # the gate against the baseline failed
    NEW_NOT_GATED = "new_not_gated"                     # a goal or persona new since the baseline failed a criterion
    ROUNDS_UNDECIDED = "rounds_undecided"               # the sequential gate decided nothing yet (also not checked)
    CRITERION_UNDECIDED = "criterion_undecided"         # the undecided could pass or fail a criterion (a reason when
                                                        # set by hand; a default one is only not checked)
    GOAL_FILE_PROBLEM = "goal_file_problem"             # a goal names what no store of the run held
    # held
    GUARANTEES_HELD = "guarantees_held"
    RELEASE_MET = "release_met"
    NO_REGRESSION = "no_regression"
    # not checked
    NEVER_RUN = "never_run"                             # conversations planned and never run
    LEFT_OUT = "left_out"                               # conversations that ended for reasons not the runtime's
    GUARANTEES_UNVERIFIABLE = "guarantees_unverifiable"  # no guarantee could be decided in any conversation
    CRITERION_UNVERIFIABLE = "criterion_unverifiable"   # a default criterion no conversation could decide
    GOAL_UNVERIFIABLE = "goal_unverifiable"             # conversations whose goal could not be checked
    UNVERIFIABLE = "unverifiable"                       # classes the runtime gave no evidence for
    NO_BASELINE = "no_baseline"                         # no baseline set: no regression checked
    NOT_GATED = "not_gated"                             # a goal or persona new since the baseline
    REMOVED = "removed"                                 # what the baseline held and the candidate does not


# What a reason fails the run on, for CI to act on each (`RunVerdict.failed_on`, the verdict
# JSON's `failed_on`): a broken guarantee, an absolute criterion (budgets.toml [release], also
# held by a goal or persona new since the baseline), a regression against the baseline, a
# baseline that cannot judge the run, input that could not be judged, a run cut short, or a
# criterion or rounds not yet decided. A script tells a regression from a release bar by these,
# whatever the exit status (1 for each failure).
FAILED_ON: dict[Kind, str] = {
    Kind.GUARANTEES_BROKEN: "guarantees", Kind.RELEASE_CRITERION: "release", Kind.NEW_NOT_GATED: "release",
    Kind.GATE_REGRESSION: "regression", Kind.BASELINE_REFUSED: "baseline", Kind.NO_CONVERSATION_JUDGED: "not_judged",
    Kind.GOAL_FILE_PROBLEM: "not_judged", Kind.NEVER_RUN: "incomplete", Kind.ROUNDS_UNDECIDED: "undecided",
    Kind.CRITERION_UNDECIDED: "undecided"}

REASONS = frozenset({Kind.NO_CONVERSATION_JUDGED, Kind.GUARANTEES_BROKEN, Kind.RELEASE_CRITERION,
                     Kind.BASELINE_REFUSED, Kind.GATE_REGRESSION, Kind.NEW_NOT_GATED, Kind.ROUNDS_UNDECIDED,
                     Kind.GOAL_FILE_PROBLEM, Kind.NEVER_RUN, Kind.CRITERION_UNDECIDED})


@dataclass(frozen=True)
class Scope:
    """What part of the run a line is about: the whole run, one goal, one persona, or some cells."""

    kind: Literal["run", "goal", "persona", "cells"] = "run"
    name: str = ""                  # the goal's or persona's id ("" for the run and for cells)
    cells: tuple[Cell, ...] = ()    # for cells: (persona, goal) each


RUN = Scope()


@dataclass(frozen=True)
class Line:
    """One line of a verdict. `text` is what people read, exactly; the other fields say the same to
    a machine. `figures` are numbers only (counts, rates as fractions, ceilings, p-values); a
    figure of one class among several is named `<class>.<figure>`."""

    kind: Kind
    text: str
    classes: tuple[str, ...] = ()
    scope: Scope = RUN
    figures: Mapping[str, Figure] = field(default_factory=dict, hash=False)
    criterion: str = ""             # the release criterion, as budgets.toml names it ("" for none)

    def __str__(self) -> str:
        return self.text


def item_scope(dimension: str, name: str = "", cells: tuple[Cell, ...] = ()) -> Scope:
    """The scope of a goal or persona (by its id), or of cells; anything else is the run's."""
    if dimension == "goal":
        return Scope("goal", name, cells)
    if dimension == "persona":
        return Scope("persona", name, cells)
    if dimension == "cells":
        return Scope("cells", "", cells)
    return RUN
