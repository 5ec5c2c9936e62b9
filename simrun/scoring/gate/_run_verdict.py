"""A run's verdict, computed once: the one answer to "can this ship?", which every surface renders.

It covers the run's guarantees (one violation fails it), its release criteria
(`simrun.scoring.gate._release`), the goals that name what no store of the run held (a problem in the
goal files: the run is not judged, exit 2, unless the runtime failed it too), and, where a
baseline is set, the gate against it (`simrun.scoring.gate._compare.gate_verdict`, or in rounds
`simrun.scoring.gate._sequential`: then a run not yet decided at its round cap or budget is
*inconclusive*, exit 3, never a pass), with the goals and personas the baseline does not share
held to the absolute criteria alone (`simrun.scoring.gate._sharing`). It has a status, the reasons in
one line each, what held, and what was *not* checked (no baseline; cells not gated; classes no
conversation could decide).

Nothing else decides pass or fail: the command line's last lines and its exit status, the
report's first element, the dashboard, and the Markdown, JUnit and step-summary outputs all show
this object. A tile that said "passed" for one criterion while the run failed on another would
be a second verdict; there is none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from simrun._errors import GateError
from simrun._settings import GateSection, ReleaseSection, stored_release, stored_sequential
from simrun._transcript import NOT_THE_RUNTIME
from simrun.scoring.gate._compare import gate_verdict
from simrun.scoring.gate._release import Criterion, ReleaseCheck, Unchecked, check_counts, release_check
from simrun.scoring.gate._sequential import Sequential, sequential_gate
from simrun.scoring.gate._sharing import NewSlice
from simrun.scoring.gate._summary import RunSummary, summary_from_store
from simrun.scoring.gate._text import removed_lines
from simrun.scoring.gate._verdict import GateResult
from simrun.scoring.gate._verdict_lines import FAILED_ON, RUN, Figure, Kind, Line, Scope, Status, item_scope
from simrun.scoring.store import Store, stored_goal_problems
from simrun.scoring.store import rates as R

BLESS = "bless one with `simrun baseline bless RUN --out baselines/main.json` and set gate.baseline in simrun.toml"


@dataclass(frozen=True, repr=False)
class RunVerdict:
    """A run's verdict: its status (and so its exit status), and its lines as records
    (`simrun.scoring.gate._verdict_lines`). Its repr is its status and reasons, and its str every
    line the command line prints, so that a failing `assert verdict.passed, verdict` says why."""

    run_id: str
    status: Status
    reasons: tuple[Line, ...]       # why it failed or was not judged, one line each
    held: tuple[Line, ...]          # what was checked and held, one line each
    not_checked: tuple[Line, ...]   # what this verdict does not cover, one line each
    release: ReleaseCheck
    gate: GateResult | None = None
    baseline: str | None = None     # where the baseline came from (None: no baseline set)
    rates: tuple[R.Rate, ...] = field(default=(), compare=False)
    outcome: R.Outcome | None = field(default=None, compare=False)
    sequential: Sequential | None = field(default=None, compare=False)   # the rounds, if in rounds

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @property
    def exit_code(self) -> int:
        return self.status.exit_code

    @property
    def failed_on(self) -> tuple[str, ...]:
        """What its reasons fail it on, each once, in their order: guarantees, release,
        regression, baseline, not_judged, incomplete, undecided (`FAILED_ON`). Empty when it passed."""
        return tuple(dict.fromkeys(FAILED_ON[r.kind] for r in self.reasons))

    def headline(self) -> str:
        if self.passed:
            return "PASSED: " + "; ".join(h.text for h in self.held)
        return f"{self.word}: " + "; ".join(r.text for r in self.reasons)

    @property
    def word(self) -> str:
        return self.status.upper()

    def lines(self) -> list[tuple[str, str]]:
        """The verdict as text surfaces print it, (part, line): the status, one line per reason,
        per thing that held, and per thing not checked. part: status | reason | held | not_checked."""
        return [("status", f"verdict: {self.word} (exit {self.exit_code})"),
                *(("reason", f"{self.word}: {r.text}") for r in self.reasons),
                *(("held", f"held: {h.text}") for h in self.held),
                *(("not_checked", f"not checked: {n.text}") for n in self.not_checked)]

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines())

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        # pytest shows an assert's message by its repr, cut to 240 characters: the status and the
        # reasons come first.
        said = "; ".join(line.text for line in self.reasons or self.held)
        return f"<RunVerdict {self.run_id} {self.word} (exit {self.exit_code}): {said}>"


def verdict_of_run(store: Store, run_id: str | None, release: ReleaseSection | None = None, *,
                   baseline: RunSummary | None = None, gate_settings: GateSection | None = None,
                   gate: GateResult | None = None, sequential: Sequential | None = None,
                   fallback: ReleaseSection | None = None) -> RunVerdict:
    """The verdict of a stored run: its guarantees, its release criteria (`release`; without it,
    those the run was judged with when it ran, else `fallback`, else the defaults), and the gate
    against `baseline` if one is given (with `gate_settings`; `gate` if it was judged already). A
    run made in rounds (its config names `sequential`) is judged by the sequential gate with the
    settings it ran with (`sequential`, if its rounds were judged already)."""
    row = store.run(run_id)
    run_id = row["run_id"]
    # The criteria it was judged with when it ran (`Store.set_release_criteria`), when they are criteria.
    release = release or stored_release(row) or fallback
    rates, outcome = R.class_rates(store, run_id), R.outcome(store, run_id)
    goal_files = tuple(stored_goal_problems(store, run_id))
    refused = None
    if baseline is not None and gate is None and sequential is None:
        # A run made in rounds is judged in rounds; settings out of bounds are a StoreError.
        rounds = stored_sequential(row, str(store.path))
        gate_settings = gate_settings or GateSection()      # no thresholds given: the defaults of budgets.toml
        try:
            candidate = summary_from_store(store, run_id)
            if rounds is not None:
                sequential = sequential_gate(baseline, candidate, gate_settings, rounds, finished=True)
            else:
                gate = gate_verdict(baseline, candidate, gate_settings)
        except GateError as exc:
            refused = str(exc)
    verdict = run_verdict(run_id, rates, outcome, release, gate=gate, baseline=baseline, gate_refused=refused,
                          sequential=sequential, goal_files=goal_files)
    unrun = never_run(row, outcome)
    cut = [line for line in unrun if line.kind is Kind.NEVER_RUN]
    if cut and verdict.status is Status.PASSED:
        # A run cut short passed nothing: what it never ran could have failed. It is incomplete
        # (exit 4), never a pass, and says why first; a run that failed on what it ran stays failed.
        rest = tuple(line for line in unrun if line.kind is not Kind.NEVER_RUN)
        return replace(verdict, status=Status.INCOMPLETE, reasons=(*cut, *verdict.reasons),
                       not_checked=(*rest, *verdict.not_checked))
    return replace(verdict, not_checked=(*unrun, *verdict.not_checked)) if unrun else verdict


WHY_UNRUN = {"budget_spent": "the budget ran out", "stopped": "the user model stopped the run",
             "interrupted": "the run was interrupted: `simrun resume` finishes it",
             "running": "the run did not finish: `simrun resume` finishes it"}


def never_run(row: Mapping[str, Any], outcome: R.Outcome) -> tuple[Line, ...]:
    """What a run cut short did not cover: the conversations planned and never run (a verdict
    over 5 of 32 conversations says so), and those that ended for reasons not the runtime's."""
    lines = []
    planned = row.get("conversations_planned")
    if isinstance(planned, int) and outcome.conversations < planned and row.get("status") != "finished":
        status = row.get("status")
        why = WHY_UNRUN.get(status, f"the run is {status}") if isinstance(status, str) else f"the run is {status}"
        lines.append(Line(Kind.NEVER_RUN,
                          f"{planned - outcome.conversations} of the {planned} conversations planned were never run "
                          f"({why}): the verdict is over the {outcome.conversations} that ran",
                          figures={"planned": planned, "ran": outcome.conversations}))
    left_out = {end: n for end, n in outcome.ends.items() if end in NOT_THE_RUNTIME}
    if left_out and outcome.counted:
        lines.append(Line(Kind.LEFT_OUT,
                          f"{sum(left_out.values())} conversation(s) ended for reasons that are not the runtime's ("
                          + ", ".join(f"{end} {n}" for end, n in left_out.items()) + "): left out of the progress "
                          "rates and the goal rate",
                          figures={"conversations": sum(left_out.values()),
                                   **{f"ends.{end}": n for end, n in left_out.items()}}))
    return tuple(lines)


def run_verdict(run_id: str, rates: list[R.Rate], outcome: R.Outcome, release: ReleaseSection | None, *,
                gate: GateResult | None = None, baseline: RunSummary | None = None,
                gate_refused: str | None = None, sequential: Sequential | None = None,
                goal_files: tuple[str, ...] = ()) -> RunVerdict:
    """The verdict of a run from its rates and outcome. `goal_files`: the goals that name what no
    store of the run held (`simrun.scoring.store._seen`): the goal files' problem, not the runtime's."""
    release = release or ReleaseSection()
    gate = sequential.gate if sequential is not None else gate
    baseline = baseline if baseline is not None or gate is None else gate.baseline
    reasons: list[Line] = []
    held: list[Line] = []
    not_checked: list[Line] = []
    broken = [r for r in rates if r.kind == "guarantee" and r.occurrences]
    judged = bool(outcome.counted) or not outcome.conversations
    if not judged:
        ends = ", ".join(f"{k} {v}" for k, v in outcome.ends.items())
        reasons.append(Line(Kind.NO_CONVERSATION_JUDGED,
                            f"no conversation was judged: all {outcome.conversations} ended for reasons that are "
                            f"not the runtime's ({ends})",
                            figures={"conversations": outcome.conversations,
                                     **{f"ends.{k}": v for k, v in outcome.ends.items()}}))
    if broken:
        reasons.append(Line(Kind.GUARANTEES_BROKEN, "guarantees broken: " + ", ".join(
            f"{r.cls} in {r.occurrences} conversation(s), {r.turn_occurrences} finding(s)" for r in broken),
            classes=tuple(r.cls for r in broken),
            figures={k: v for r in broken for k, v in (
                (f"{r.cls}.conversations", r.occurrences), (f"{r.cls}.findings", r.turn_occurrences),
                (f"{r.cls}.scored", r.scored))}))
    elif judged:
        held += _guarantees_held(rates, outcome.conversations, not_checked)
    check = release_check(rates, outcome, release)
    reasons += [_criterion_line(Kind.RELEASE_CRITERION, c, c.line()) for c in check.failures]
    if check.criteria and check.passed:
        ceilings = [c.cls for c in check.criteria if _is_ceiling(c)]
        named = [c.name.removeprefix("release.") for c in check.criteria if not _is_ceiling(c)]
        named += [f"ceilings on {', '.join(ceilings)}"] if ceilings else []
        # "Every" only when no criterion was left undecided: the others are named as not checked.
        said = ("every release criterion met" if not check.unchecked
                else "every release criterion that could be judged met")
        held.append(Line(Kind.RELEASE_MET, f"{said} ({'; '.join(named)})",
                         classes=tuple(dict.fromkeys(c.cls for c in check.criteria)),
                         figures={"criteria": len(check.criteria)}))
    undecided = [_unchecked_line(u) for u in check.unchecked if u.by_hand]
    not_checked += _default_unchecked_lines(check.unchecked)
    if outcome.goal_unverifiable:
        # Never a pass, and never out of sight: the goal rate above is over the others only.
        not_checked.append(Line(Kind.GOAL_UNVERIFIABLE,
                                f"goal reached: UNVERIFIABLE in {outcome.goal_unverifiable} of "
                                f"{outcome.conversations} conversations, whose goal could not be checked "
                                "(`simrun show RUN CONVERSATION` gives the reason)",
                                classes=("goal_reached",),
                                figures={"unverifiable": outcome.goal_unverifiable,
                                         "conversations": outcome.conversations}))
    blind = [r for r in rates if r.unverifiable]
    if blind:
        not_checked.append(Line(Kind.UNVERIFIABLE, "UNVERIFIABLE (the evidence was missing, or no turn completed): "
                                + ", ".join(f"{r.cls} in {r.unverifiable} of {r.unverifiable + r.scored} conversations"
                                            for r in blind),
                                classes=tuple(r.cls for r in blind),
                                figures={k: v for r in blind for k, v in (
                                    (f"{r.cls}.unverifiable", r.unverifiable),
                                    (f"{r.cls}.conversations", r.unverifiable + r.scored))}))
    if baseline is None:
        not_checked.append(Line(Kind.NO_BASELINE,
                                f"regressions: no baseline is set, so no regression was checked: {BLESS}"))
    elif gate_refused is not None:
        reasons.append(Line(Kind.BASELINE_REFUSED,
                            f"gate: the baseline {baseline.source} cannot judge this run: {gate_refused}"))
    else:
        # verdict_of_run gives the gate, or why the baseline could not judge the run: one of the two.
        assert gate is not None, "a baseline is given with its gate or with gate_refused"
        undecided += _gate_lines(gate, release, reasons, held, not_checked, sequential)
    # The runtime's failures fail the run; a goal that can never hold leaves it not judged (exit 2,
    # bad input), whatever else held, and says which file to fix.
    status = (Status.NOT_JUDGED if not judged else Status.FAILED if reasons
              else Status.NOT_JUDGED if goal_files else Status.PASSED)
    if undecided:
        # A criterion set by hand that the undecided conversations could pass or fail was not
        # judged: never a pass (inconclusive, exit 3); a run that failed on other grounds stays failed.
        (reasons if status is Status.PASSED else not_checked).extend(undecided)
        status = Status.INCONCLUSIVE if status is Status.PASSED else status
    if sequential is not None and sequential.decision in ("continue", "inconclusive"):
        # Undecided is never a pass; a run failed on other grounds stays failed, and says it.
        text = sequential.line() + (": run more rounds (`simrun --sequential` again continues the run)"
                                    if sequential.decision == "continue" else "")
        (reasons if status is Status.PASSED else not_checked).append(
            Line(Kind.ROUNDS_UNDECIDED, text, figures=_rounds_figures(sequential)))
        status = Status.INCONCLUSIVE if status is Status.PASSED else status
    reasons += [Line(Kind.GOAL_FILE_PROBLEM, f"a problem in the goal files, not the runtime's: {line}")
                for line in goal_files]
    return RunVerdict(run_id, status, tuple(reasons), tuple(held), tuple(not_checked), check, gate,
                      None if baseline is None else baseline.source, tuple(rates), outcome, sequential)


def _is_ceiling(c: Criterion) -> bool:
    """A ceiling is a criterion with a limit on a class other than the goal's (whose limit is its floor)."""
    return c.limit is not None and c.cls != "goal_reached"


def _criterion_line(kind: Kind, c: Criterion, text: str, new: NewSlice | None = None) -> Line:
    """A release criterion as a line: its class, its counts, its rate and its limit."""
    figures: dict[str, Figure] = {"fired": c.fired, "scored": c.scored}
    if c.scored:
        figures["rate"] = c.fired / c.scored
    if c.limit is not None:
        figures["floor" if c.cls == "goal_reached" else "ceiling"] = c.limit
    if c.undecided and (low_high := R.bounds(c.fired, c.scored, c.undecided)) is not None:
        figures["unverifiable"] = c.undecided
        figures["low"], figures["high"] = low_high
    return Line(kind, text, classes=(c.cls,) if c.cls else (), figures=figures, criterion=c.name,
                scope=_scope_of(new) if new is not None else RUN)


def _unchecked_line(u: Unchecked, new: NewSlice | None = None) -> Line:
    """A criterion not judged, with its counts and bounds: CRITERION_UNDECIDED (the undecided could
    pass or fail it: a reason when set by hand), or, for a default criterion no conversation
    decided, CRITERION_UNVERIFIABLE."""
    figures: dict[str, Figure] = {"fired": u.fired, "scored": u.scored, "unverifiable": u.undecided}
    if (low_high := R.bounds(u.fired, u.scored, u.undecided)) is not None:
        figures["low"], figures["high"] = low_high
    figures["floor" if u.cls == "goal_reached" else "ceiling"] = u.limit
    kind = Kind.CRITERION_UNDECIDED if u.scored or u.by_hand else Kind.CRITERION_UNVERIFIABLE
    return Line(kind, u.line, classes=(u.cls,), figures=figures, criterion=u.name,
                scope=_scope_of(new) if new is not None else RUN)


def _default_unchecked_lines(unchecked: tuple[Unchecked, ...], new: NewSlice | None = None) -> list[Line]:
    """The default criteria not judged, as not-checked lines: the progress ceilings that stand on
    the same counts (the same conversations crashed before any of them could be decided) in one
    line naming each class, the others one line each."""
    lines: list[Line] = []
    ceilings: dict[tuple[int, int, int, float], list[Unchecked]] = {}
    for u in unchecked:
        if u.by_hand:
            continue
        if u.cls == "goal_reached":
            lines.append(_unchecked_line(u, new))
        else:
            ceilings.setdefault((u.fired, u.scored, u.undecided, u.limit), []).append(u)
    for (fired, scored, undecided, limit), group in ceilings.items():
        line = _unchecked_line(group[0], new)
        if len(group) > 1:
            classes = tuple(u.cls for u in group)
            where = group[0].name.partition(" ")[2]
            said = (f"each {R.bounds_text(fired, scored, undecided)}, {fired}/{scored} decided: the undecided "
                    "could pass or fail each" if scored else "no conversation could decide them (UNVERIFIABLE)")
            line = replace(line, classes=classes, criterion="release.progress_ceiling",
                           text=f"the ceiling {limit:.1%} on {', '.join(classes)}{' ' + where if where else ''} "
                                f"(release.progress_ceiling): {said}")
        lines.append(line)
    return lines


def _scope_of(new: NewSlice) -> Scope:
    return item_scope(new.dimension, new.name if new.dimension != "cells" else "", new.cells)


def _rounds_figures(sequential: Sequential) -> dict[str, Figure]:
    last = sequential.looks[-1]
    return {"round": last.round, "max_rounds": sequential.settings.max_rounds,
            "conversations": last.conversations, "capped": sequential.capped, "alpha_spent": last.alpha_spent}


def _guarantees_held(rates: list[R.Rate], conversations: int, not_checked: list[Line]) -> list[Line]:
    """What held of the guarantees, none broken: claimed only where a conversation decided them.
    "Every guarantee held" is said only when each was decided in every conversation; one decided
    in some is said to hold in those (a conversation that crashed on its first turn decides none);
    one decided in none is not known to hold, and is listed as not checked."""
    guarantees = [r for r in rates if r.kind == "guarantee"]
    never = [r.cls for r in guarantees if not r.scored]
    partly = [r for r in guarantees if r.scored and r.unverifiable]
    decided = tuple(r.cls for r in guarantees if r.scored)
    if never:
        not_checked.append(Line(Kind.GUARANTEES_UNVERIFIABLE,
                                (f"guarantees decided in no conversation, so not known to hold: {', '.join(never)} "
                                 "(UNVERIFIABLE: the runtime gives none of the evidence they need, or no turn "
                                 "completed)") if decided else
                                ("guarantees: none could be decided in any conversation (UNVERIFIABLE: the runtime "
                                 "gives none of the evidence they need, or no turn completed), so none is known to "
                                 "hold"),
                                classes=tuple(never)))
    if not decided:
        return []
    if not never and not partly:
        return [Line(Kind.GUARANTEES_HELD, f"every guarantee held ({conversations} conversations)",
                     classes=decided, figures={"conversations": conversations})]
    whole = [r.cls for r in guarantees if r.scored and not r.unverifiable]
    parts = ([f"{', '.join(whole)} in all {conversations} conversations"] if whole else []) + [
        f"{r.cls} in the {r.scored} of {conversations} that decided it" for r in partly]
    return [Line(Kind.GUARANTEES_HELD,
                 f"the guarantees held where they were decided: {'; '.join(parts)}"
                 + (f"; {len(never)} of {len(guarantees)} decided in none (not checked)" if never else ""),
                 classes=decided,
                 figures={"conversations": conversations, "undecidable": len(never),
                          **{f"{r.cls}.decided": r.scored for r in partly}})]


def _gate_figures(gate: GateResult) -> dict[str, Figure]:
    """The gate's figures for its line: the cells compared, and per class that failed its counts,
    rates, rise and corrected p-value (a guarantee: the conversations it fired in)."""
    figures: dict[str, Figure] = {"cells": gate.cells}
    for c in gate.failures:
        figures[f"{c.cls}.baseline_fired"], figures[f"{c.cls}.candidate_fired"] = c.baseline.fired, c.candidate.fired
        for name, value in (("baseline_rate", c.baseline_rate), ("candidate_rate", c.candidate_rate),
                            ("delta", c.delta), ("p_adjusted", c.p_adjusted)):
            if value is not None:
                figures[f"{c.cls}.{name}"] = value
    return figures


def _gate_lines(gate: GateResult, release: ReleaseSection, reasons: list[Line], held: list[Line],
                not_checked: list[Line], sequential: Sequential | None = None) -> list[Line]:
    """The gate's lines; returns the criteria set by hand that a new goal or persona's undecided
    conversations could pass or fail (the verdict decides where they go)."""
    against = f"against the baseline {gate.baseline.run_id} ({gate.baseline.source}), on {gate.cells} cells"
    failed = tuple(c.cls for c in gate.failures)
    if sequential is not None:
        if sequential.decision == "passed":
            held.append(Line(Kind.NO_REGRESSION, f"no regression {against}; {sequential.line()}",
                             figures={"cells": gate.cells, **_rounds_figures(sequential)}))
        elif sequential.decision == "failed":
            reasons.append(Line(Kind.GATE_REGRESSION, f"gate {against}: {gate.failure_text()}; {sequential.line()}",
                                classes=failed, figures={**_gate_figures(gate), **_rounds_figures(sequential)}))
    elif gate.passed:
        held.append(Line(Kind.NO_REGRESSION, f"no regression {against}", figures={"cells": gate.cells}))
    else:
        reasons.append(Line(Kind.GATE_REGRESSION, f"gate {against}: {gate.failure_text()}", classes=failed,
                            figures=_gate_figures(gate)))
    # What a new goal or persona answers to on its own: the ceilings and the floor (guarantees and
    # runtime_error are held over the whole run already).
    absolute = release.model_copy(update={"fail_on_runtime_error": False})
    undecided: list[Line] = []
    for new in gate.new:
        counts = {cls: (c.fired, c.scored, c.unverifiable) for cls, c in new.counts.items()}
        goal = new.counts["goal_not_reached"]
        where = f"in {new}" if new.dimension != "cells" else f"in cells {new.name}"
        check = check_counts(counts, (goal.scored - goal.fired, goal.scored, goal.unverifiable), absolute,
                             where=where)
        reasons += [_criterion_line(Kind.NEW_NOT_GATED, c, f"new, not gated: {c.line()}", new)
                    for c in check.failures]
        undecided += [_unchecked_line(u, new) for u in check.unchecked if u.by_hand]
        not_checked += _default_unchecked_lines(check.unchecked, new)
        not_checked.append(Line(Kind.NOT_GATED, f"the gate, {where}: new, not gated against the baseline; held to "
                                f"the absolute criteria ({new.rate_text(tuple(new.counts))})",
                                scope=_scope_of(new),
                                figures={"cells": len(new.cells), "goal_reached": goal.scored - goal.fired,
                                         "goal_scored": goal.scored}))
    not_checked += [Line(Kind.REMOVED, text, scope=scope) for scope, text in removed_lines(gate)]
    return undecided
