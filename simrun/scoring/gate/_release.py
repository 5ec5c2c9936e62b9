"""The release check: what a run must meet, beyond its guarantees, to be released.

`simrun` (a run) fails, exit 1, when a criterion of budgets.toml's [release] fails, and names it
in one line; the report shows the same verdict, made by the same function. The criteria
(`simrun._settings.ReleaseSection`, where their defaults and bounds are stated):

- `fail_on_runtime_error` (on by default): any conversation that ended in runtime_error;
- `min_goal_reached` (50% by default): the goal-reached rate must reach this floor. A run where
  most conversations do not reach their goal is not a clean release, whatever else held: with a
  runtime that gives no progress evidence (a tool-calling assistant read from its traces: every
  progress class UNVERIFIABLE), goal reached is the only measure of progress there is. The
  default is low because goal reached depends on the simulated user too (`simrun check-user`
  measures that); 0 switches it off. Where no conversation could decide it, the default floor is
  listed as not checked, and a floor set by hand fails;
- `max_rate` (none by default): per class, the highest rate a run may have;
- `progress_ceiling` (10% by default): the ceiling of each progress class (dead_end, loop,
  refused_offer, not_understood, unanswered, simulator_error) that `max_rate` does not name. A
  run where one conversation in ten dead-ends is not a clean release, and the reference runtime,
  clean, has none; 1.0 switches it off. A class this default cannot decide (every conversation
  UNVERIFIABLE for it: the runtime does not give that evidence) is listed as not checked rather
  than failed; a ceiling set by hand on such a class fails.

The same criteria hold a goal or persona that a pull request adds or edits: its cells are not
gated against the baseline, so they answer to these absolute criteria alone (`check_counts`,
called by `simrun.scoring.gate._run_verdict`).

A rate that could not be decided (every conversation UNVERIFIABLE for it) fails its criterion:
UNVERIFIABLE is never a pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from simrun._classes import PROGRESS_CLASSES
from simrun._settings import DEFAULT_GOAL_FLOOR, ReleaseSection
from simrun.scoring.store import Outcome, Rate
from simrun.scoring.store import rates as R


@dataclass(frozen=True)
class Criterion:
    name: str               # as written in budgets.toml: release.min_goal_reached
    passed: bool
    detail: str
    # The figures behind `detail`, for the typed verdict (`simrun.scoring.gate._verdict_lines`):
    cls: str = ""                   # the class it bounds (goal_reached for the floor)
    fired: int = 0                  # conversations where the class fired (reached, for the floor)
    scored: int = 0                 # conversations that decided it
    limit: float | None = None      # the ceiling or the floor (None: fail_on_runtime_error)
    undecided: int = 0              # conversations that could not decide it (UNVERIFIABLE)

    def line(self) -> str:
        return f"{self.name}: {self.detail}"


@dataclass(frozen=True)
class Unchecked:
    """A criterion the undecided conversations could pass or fail: not checked, with its bounds.
    Set by hand it keeps the run from passing (`by_hand`); a default one is listed, never failed."""

    cls: str                # the class (goal_reached for the floor)
    line: str
    name: str = ""          # as budgets.toml names it: release.max_rate.dead_end
    by_hand: bool = False
    fired: int = 0
    scored: int = 0
    undecided: int = 0
    limit: float = 0.0      # the floor or the ceiling


@dataclass(frozen=True)
class ReleaseCheck:
    criteria: tuple[Criterion, ...]
    # Criteria the undecided conversations could change (none decided it, or its bounds straddle
    # its limit): never passed, never failed.
    unchecked: tuple[Unchecked, ...] = ()

    @property
    def failures(self) -> list[Criterion]:
        return [c for c in self.criteria if not c.passed]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def undecided_by_hand(self) -> list[Unchecked]:
        """The criteria set by hand that could not be judged: a run with one does not pass."""
        return [u for u in self.unchecked if u.by_hand]

    def headline(self) -> str:
        if self.passed:
            names = ", ".join(c.name for c in self.criteria)
            return f"release check passed ({names})" if names else "release check: no criterion set"
        return "release check FAILED: " + "; ".join(c.line() for c in self.failures)


def release_check(rates: list[Rate], outcome: Outcome, settings: ReleaseSection) -> ReleaseCheck:
    counts = {r.cls: (r.occurrences, r.scored, r.unverifiable) for r in [*rates, outcome.runtime_error_rate]}
    return check_counts(counts, (outcome.goal_reached, outcome.goal_scored, outcome.goal_unverifiable), settings)


def check_counts(counts: Mapping[str, tuple[int, int, int]], goal: tuple[int, int, int], settings: ReleaseSection,
                 where: str = "") -> ReleaseCheck:
    """The criteria over (fired, decided, undecided) per class and (reached, decided, undecided) for
    the goal; `where` names a part of the run ("in goal renew-two") in every criterion's name.

    Each rate is judged by its bounds (`simrun.scoring.store._rates.bounds`): the undecided
    conversations counted as not having the class, then as having it. A criterion passes or fails
    only when both bounds do; otherwise it is not checked, with its bounds, whatever the rate over
    the decided ones alone says: that sample may have been chosen by the outcome itself."""
    criteria: list[Criterion] = []
    unchecked: list[Unchecked] = []
    suffix = f" {where}" if where else ""
    if settings.fail_on_runtime_error:
        n, counted, _ = counts["runtime_error"]
        criteria.append(Criterion("release.fail_on_runtime_error" + suffix, n == 0,
                                  f"the runtime failed in {n} of {counted} conversations" if n else "no runtime_error",
                                  "runtime_error", n, counted))
    by_hand = settings.min_goal_reached is not None
    floor = DEFAULT_GOAL_FLOOR if settings.min_goal_reached is None else settings.min_goal_reached
    if floor > 0:
        _judge(criteria, unchecked, Limit("release.min_goal_reached" + suffix, "goal_reached", "goal reached",
                                          floor, is_floor=True, by_hand=by_hand, where=suffix), *goal)
    ceilings: list[tuple[str, float, bool]] = [(cls, ceiling, True) for cls, ceiling in settings.max_rate.items()]
    if settings.progress_ceiling < 1:
        ceilings += [(cls, settings.progress_ceiling, False)
                     for cls in PROGRESS_CLASSES if cls not in settings.max_rate]
    for cls, ceiling, set_by_hand in ceilings:
        _judge(criteria, unchecked, Limit(f"release.max_rate.{cls}{suffix}", cls, cls, ceiling, is_floor=False,
                                          by_hand=set_by_hand, where=suffix), *counts[cls])
    return ReleaseCheck(tuple(criteria), tuple(unchecked))


@dataclass(frozen=True)
class Limit:
    """One floor or ceiling, as a criterion names it."""

    name: str
    cls: str
    what: str               # how the rate is named in a line: "goal reached", "dead_end"
    limit: float
    is_floor: bool
    by_hand: bool           # set in budgets.toml (else a default: release.progress_ceiling, the default floor)
    where: str = ""

    @property
    def side(self) -> str:
        return f"the floor {self.limit:.1%}" if self.is_floor else f"the ceiling {self.limit:.1%}"

    @property
    def default_note(self) -> str:
        if self.by_hand:
            return ""
        return " (the default floor)" if self.is_floor else " (release.progress_ceiling)"

    def holds(self, rate: float) -> bool:
        return rate >= self.limit if self.is_floor else rate <= self.limit


def _judge(criteria: list[Criterion], unchecked: list[Unchecked], limit: Limit, k: int, n: int, u: int) -> None:
    """`limit` over k of n decided conversations and u undecided: a criterion where both bounds
    agree, else not checked. With no conversation at all, a default is listed as not checked and a
    limit set by hand fails (nothing was observed, and UNVERIFIABLE is never a pass)."""
    low_high = R.bounds(k, n, u)
    if low_high is None:
        if limit.by_hand:
            criteria.append(Criterion(limit.name, False, f"{limit.what} could not be decided in any conversation "
                                      "(UNVERIFIABLE is never a pass)", limit.cls, k, n, limit.limit, u))
        else:
            unchecked.append(Unchecked(limit.cls, f"{_plain(limit)}: no conversation could decide it (UNVERIFIABLE)",
                                       limit.name, False, k, n, u, limit.limit))
        return
    low, high = low_high
    if limit.holds(low) == limit.holds(high):
        ok = limit.holds(low)
        verdict = ("at least " if limit.is_floor else "within ") if ok else ("below " if limit.is_floor else "above ")
        told = f"{limit.what} {100 * k / n:.1f}% ({k}/{n})" if n else f"{limit.what} (no conversation decided it)"
        if u:
            told += f", {R.bounds_text(k, n, u)}"
        criteria.append(Criterion(limit.name, ok, f"{told}, {verdict}{limit.side}{limit.default_note}",
                                  limit.cls, k, n, limit.limit, u))
        return
    decided = f"{k}/{n} decided" if n else "none decided"
    if not n:
        line = (f"{limit.name}: {limit.what} could not be decided in any conversation (UNVERIFIABLE), so it "
                "could pass or fail" if limit.by_hand else f"{_plain(limit)}: no conversation could decide it "
                "(UNVERIFIABLE)")
    else:
        line = (f"{limit.name}: {limit.what} {R.bounds_text(k, n, u)}, {decided}: the undecided could pass or "
                f"fail {limit.side}{limit.default_note}")
    unchecked.append(Unchecked(limit.cls, line, limit.name, limit.by_hand, k, n, u, limit.limit))


def _plain(limit: Limit) -> str:
    """A default criterion named as people read it: "the ceiling on dead_end", "the floor on goal reached"."""
    return f"the {'floor' if limit.is_floor else 'ceiling'} on {limit.what}{limit.where}"
