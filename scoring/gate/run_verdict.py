"""A run's verdict, computed once: the one answer to "can this ship?", which every surface renders.

It covers the run's guarantees (one violation fails it), its release criteria
(`simrun.scoring.gate.release`), the goals that name what no store of the run held (a problem in the
goal files: the run is not judged, exit 2, unless the runtime failed it too), and, where a
baseline is set, the gate against it (`simrun.scoring.gate.compare.gate_verdict`, or in rounds
`simrun.scoring.gate.sequential`: then a run not yet decided at its round cap or budget is
*inconclusive*, exit 3, never a pass), with the goals and personas the baseline does not share
held to the absolute criteria alone (`simrun.scoring.gate.sharing`). It has a status, the reasons in
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

from simrun.scoring.errors import GateError
from simrun.scoring.gate.compare import GateSettings, gate_verdict
from simrun.scoring.gate.release import (
    CEILING_CLASSES,
    ReleaseCheck,
    ReleaseDefaults,
    ReleaseSettings,
    check_counts,
    release_check,
)
from simrun.scoring.gate.sequential import Sequential, SequentialSettings, sequential_gate
from simrun.scoring.gate.summary import RunSummary, summary_from_store
from simrun.scoring.gate.text import sharing_lines
from simrun.scoring.gate.verdict import GateResult
from simrun.scoring.store import rates as R
from simrun.scoring.store.database import Store
from simrun.scoring.store.seen import stored_goal_problems
from simrun.scoring.transcript import NOT_THE_RUNTIME

EXIT = {"passed": 0, "failed": 1, "not judged": 2, "inconclusive": 3}
BLESS = "bless one with `simrun baseline bless RUN --out baselines/main.json` and set gate.baseline in simrun.toml"


@dataclass(frozen=True)
class RunVerdict:
    run_id: str
    status: str                     # passed | failed | not judged | inconclusive
    reasons: tuple[str, ...]        # why it failed or was not judged, one line each
    held: tuple[str, ...]           # what was checked and held, one line each
    not_checked: tuple[str, ...]    # what this verdict does not cover, one line each
    release: ReleaseCheck
    gate: GateResult | None = None
    baseline: str | None = None     # where the baseline came from (None: no baseline set)
    rates: tuple[R.Rate, ...] = field(default=(), repr=False, compare=False)
    outcome: R.Outcome | None = field(default=None, repr=False, compare=False)
    sequential: Sequential | None = field(default=None, repr=False, compare=False)   # the rounds, if in rounds

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def exit_code(self) -> int:
        return EXIT[self.status]

    def headline(self) -> str:
        if self.passed:
            return "PASSED: " + "; ".join(self.held)
        return f"{self.word}: " + "; ".join(self.reasons)

    @property
    def word(self) -> str:
        return self.status.upper()

    def lines(self) -> list[tuple[str, str]]:
        """The verdict as text surfaces print it, (kind, line): the status, one line per reason,
        per thing that held, and per thing not checked. kind: status | reason | held | not_checked."""
        return [("status", f"verdict: {self.word} (exit {self.exit_code})"),
                *(("reason", f"{self.word}: {r}") for r in self.reasons),
                *(("held", f"held: {h}") for h in self.held),
                *(("not_checked", f"not checked: {n}") for n in self.not_checked)]

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines())


@dataclass(frozen=True)
class _AbsoluteOnly:
    """The release criteria a new goal or persona answers to on its own: the ceilings and the floor
    (guarantees and runtime_error are held over the whole run already)."""

    min_goal_reached: float | None
    max_rate: Mapping[str, float]
    progress_ceiling: float
    fail_on_runtime_error: bool = False


def verdict_of_run(store: Store, run_id: str | None, release: ReleaseSettings | None = None, *,
                   baseline: RunSummary | None = None, gate_settings: GateSettings | None = None,
                   gate: GateResult | None = None, sequential: Sequential | None = None,
                   fallback: ReleaseSettings | None = None) -> RunVerdict:
    """The verdict of a stored run: its guarantees, its release criteria (`release`; without it,
    those the run was judged with when it ran, else `fallback`, else the defaults), and the gate
    against `baseline` if one is given (with `gate_settings`; `gate` if it was judged already). A
    run made in rounds (its config names `sequential`) is judged by the sequential gate with the
    settings it ran with (`sequential`, if its rounds were judged already)."""
    row = store.run(run_id)
    run_id = row["run_id"]
    release = release or judged_with(row) or fallback
    rates, outcome = R.class_rates(store, run_id), R.outcome(store, run_id)
    goal_files = tuple(stored_goal_problems(store, run_id))
    refused = None
    rounds = (row.get("config") or {}).get("sequential")
    if baseline is not None and gate is None and sequential is None:
        try:
            candidate = summary_from_store(store, run_id)
            if isinstance(rounds, dict):
                sequential = sequential_gate(baseline, candidate, gate_settings, SequentialSettings(**rounds),
                                             finished=True)
            else:
                gate = gate_verdict(baseline, candidate, gate_settings)
        except (GateError, TypeError) as exc:
            refused = str(exc)
    verdict = run_verdict(run_id, rates, outcome, release, gate=gate, baseline=baseline, gate_refused=refused,
                          sequential=sequential, goal_files=goal_files)
    unrun = never_run(row, outcome)
    return replace(verdict, not_checked=(*unrun, *verdict.not_checked)) if unrun else verdict


def judged_with(row: Mapping) -> ReleaseDefaults | None:
    """The release criteria a stored run was judged with when it ran (`Store.set_release_criteria`);
    None for a run made before they were kept, or with a record that is not criteria."""
    kept = (row.get("config") or {}).get("release")
    # JSON merge leaves out a null (min_goal_reached not set: the default floor); every other field must be there.
    if not isinstance(kept, dict) or not {"fail_on_runtime_error", "max_rate", "progress_ceiling"} <= set(kept) \
            or not set(kept) <= {"fail_on_runtime_error", "min_goal_reached", "max_rate", "progress_ceiling"}:
        return None
    kept = {"min_goal_reached": None, **kept}
    rate = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1  # noqa: E731
    max_rate = kept["max_rate"]
    if not (isinstance(kept["fail_on_runtime_error"], bool) and rate(kept["progress_ceiling"])
            and (kept["min_goal_reached"] is None or rate(kept["min_goal_reached"])) and isinstance(max_rate, dict)
            and all(cls in CEILING_CLASSES and rate(v) for cls, v in max_rate.items())):
        return None         # a store may be hostile: what is not criteria is not used as criteria
    return ReleaseDefaults(**kept)


WHY_UNRUN = {"budget_spent": "the budget ran out", "stopped": "the user model stopped the run",
             "interrupted": "the run was interrupted: `simrun resume` finishes it",
             "running": "the run did not finish: `simrun resume` finishes it"}


def never_run(row: Mapping, outcome: R.Outcome) -> tuple[str, ...]:
    """What a run cut short did not cover: the conversations planned and never run (a verdict
    over 5 of 32 conversations says so), and those that ended for reasons not the runtime's."""
    lines = []
    planned = row.get("conversations_planned")
    if isinstance(planned, int) and outcome.conversations < planned and row.get("status") != "finished":
        why = WHY_UNRUN.get(row.get("status"), f"the run is {row.get('status')}")
        lines.append(f"{planned - outcome.conversations} of the {planned} conversations planned were never run "
                     f"({why}): the verdict is over the {outcome.conversations} that ran")
    left_out = {end: n for end, n in outcome.ends.items() if end in NOT_THE_RUNTIME}
    if left_out and outcome.counted:
        lines.append(f"{sum(left_out.values())} conversation(s) ended for reasons that are not the runtime's ("
                     + ", ".join(f"{end} {n}" for end, n in left_out.items()) + "): left out of the progress "
                     "rates and the goal rate")
    return tuple(lines)


def run_verdict(run_id: str, rates: list[R.Rate], outcome: R.Outcome, release: ReleaseSettings | None, *,
                gate: GateResult | None = None, baseline: RunSummary | None = None,
                gate_refused: str | None = None, sequential: Sequential | None = None,
                goal_files: tuple[str, ...] = ()) -> RunVerdict:
    """The verdict of a run from its rates and outcome. `goal_files`: the goals that name what no
    store of the run held (`simrun.scoring.store.seen`): the goal files' problem, not the runtime's."""
    release = release or ReleaseDefaults()
    gate = sequential.gate if sequential is not None else gate
    baseline = baseline if baseline is not None or gate is None else gate.baseline
    reasons, held, not_checked = [], [], []
    broken = [r for r in rates if r.kind == "guarantee" and r.occurrences]
    judged = bool(outcome.counted) or not outcome.conversations
    if not judged:
        ends = ", ".join(f"{k} {v}" for k, v in outcome.ends.items())
        reasons.append(f"no conversation was judged: all {outcome.conversations} ended for reasons that are not "
                       f"the runtime's ({ends})")
    if broken:
        reasons.append("guarantees broken: " + ", ".join(
            f"{r.cls} in {r.occurrences} conversation(s), {r.turn_occurrences} finding(s)" for r in broken))
    elif judged:
        held += _guarantees_held(rates, outcome.conversations, not_checked)
    check = release_check(rates, outcome, release)
    reasons += [c.line() for c in check.failures]
    if check.criteria and check.passed:
        ceilings = [c.name.removeprefix("release.max_rate.") for c in check.criteria if ".max_rate." in c.name]
        named = [c.name.removeprefix("release.") for c in check.criteria if ".max_rate." not in c.name]
        named += [f"ceilings on {', '.join(ceilings)}"] if ceilings else []
        held.append(f"every release criterion met ({'; '.join(named)})")
    not_checked += check.unchecked
    if outcome.goal_unverifiable:
        # Never a pass, and never out of sight: the goal rate above is over the others only.
        not_checked.append(f"goal reached: UNVERIFIABLE in {outcome.goal_unverifiable} of {outcome.conversations} "
                           "conversations, whose goal could not be checked (`simrun show RUN CONVERSATION` "
                           "gives the reason)")
    undecided = [r for r in rates if r.unverifiable]
    if undecided:
        not_checked.append("UNVERIFIABLE (the runtime did not give the evidence): " + ", ".join(
            f"{r.cls} in {r.unverifiable} of {r.unverifiable + r.scored} conversations" for r in undecided))
    if baseline is None:
        not_checked.append(f"regressions: no baseline is set, so no regression was checked: {BLESS}")
    elif gate_refused is not None:
        reasons.append(f"gate: the baseline {baseline.source} cannot judge this run: {gate_refused}")
    else:
        _gate_lines(gate, release, reasons, held, not_checked, sequential)
    # The runtime's failures fail the run; a goal that can never hold leaves it not judged (exit 2,
    # bad input), whatever else held, and says which file to fix.
    status = "not judged" if not judged else ("failed" if reasons else "not judged" if goal_files else "passed")
    if sequential is not None and sequential.decision in ("continue", "inconclusive"):
        # Undecided is never a pass; a run failed on other grounds stays failed, and says it.
        line = sequential.line() + (": run more rounds (`simrun --sequential` again continues the run)"
                                    if sequential.decision == "continue" else "")
        (reasons if status == "passed" else not_checked).append(line)
        status = "inconclusive" if status == "passed" else status
    reasons += [f"a problem in the goal files, not the runtime's: {line}" for line in goal_files]
    return RunVerdict(run_id, status, tuple(reasons), tuple(held), tuple(not_checked), check, gate,
                      None if baseline is None else baseline.source, tuple(rates), outcome, sequential)


def _guarantees_held(rates: list[R.Rate], conversations: int, not_checked: list) -> list[str]:
    """What held of the guarantees, none broken: claimed only of those a conversation could decide.
    A guarantee UNVERIFIABLE in every conversation is not known to hold (it is listed as not checked)."""
    guarantees = [r for r in rates if r.kind == "guarantee"]
    never = [r.cls for r in guarantees if not r.scored]
    if not never:
        return [f"every guarantee held ({conversations} conversations)"]
    if len(never) < len(guarantees):
        return [f"every guarantee that could be decided held ({conversations} conversations); {len(never)} of "
                f"{len(guarantees)} could be decided in no conversation ({', '.join(never)}: UNVERIFIABLE)"]
    not_checked.append("guarantees: none could be decided in any conversation (UNVERIFIABLE: the runtime gives "
                       "none of the evidence they need), so none is known to hold")
    return []


def _gate_lines(gate: GateResult, release: ReleaseSettings, reasons: list, held: list, not_checked: list,
                sequential: Sequential | None = None) -> None:
    against = f"against the baseline {gate.baseline.run_id} ({gate.baseline.source}), on {gate.cells} cells"
    if sequential is not None:
        if sequential.decision == "passed":
            held.append(f"no regression {against}; {sequential.line()}")
        elif sequential.decision == "failed":
            reasons.append(f"gate {against}: {gate.headline().removeprefix('FAILED: ')}; {sequential.line()}")
    elif gate.passed:
        held.append(f"no regression {against}")
    else:
        reasons.append(f"gate {against}: {gate.headline().removeprefix('FAILED: ')}")
    absolute = _AbsoluteOnly(release.min_goal_reached, release.max_rate, release.progress_ceiling)
    for new in gate.new:
        counts = {cls: (c.fired, c.scored) for cls, c in new.counts.items()}
        goal = new.counts["goal_not_reached"]
        where = f"in {new}" if new.dimension != "cells" else f"in cells {new.name}"
        check = check_counts(counts, (goal.scored - goal.fired, goal.scored), absolute, where=where)
        reasons += [f"new, not gated: {c.line()}" for c in check.failures]
        not_checked.append(f"the gate, {where}: new, not gated against the baseline; held to the absolute "
                           f"criteria ({new.rate_text(tuple(new.counts))})")
    not_checked += [line for line in sharing_lines(gate) if line.startswith("removed:")]
