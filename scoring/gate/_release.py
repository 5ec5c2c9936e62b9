"""The release check: what a run must meet, beyond its guarantees, to be released.

`simrun` (a run) fails, exit 1, when a criterion of budgets.toml's [release] fails, and names it
in one line; the report shows the same verdict, made by the same function. The criteria
(`simrun.scoring._settings.ReleaseSection`, where their defaults and bounds are stated):

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

from simrun.scoring._classes import PROGRESS_CLASSES
from simrun.scoring._settings import DEFAULT_GOAL_FLOOR, ReleaseSection
from simrun.scoring.store import Outcome, Rate


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

    def line(self) -> str:
        return f"{self.name}: {self.detail}"


@dataclass(frozen=True)
class Unchecked:
    """A default criterion no conversation could decide: listed as not checked, never failed."""

    cls: str                # the class (goal_reached for the floor)
    line: str


@dataclass(frozen=True)
class ReleaseCheck:
    criteria: tuple[Criterion, ...]
    unchecked: tuple[Unchecked, ...] = ()     # default ceilings on classes no conversation could decide

    @property
    def failures(self) -> list[Criterion]:
        return [c for c in self.criteria if not c.passed]

    @property
    def passed(self) -> bool:
        return not self.failures

    def headline(self) -> str:
        if self.passed:
            names = ", ".join(c.name for c in self.criteria)
            return f"release check passed ({names})" if names else "release check: no criterion set"
        return "release check FAILED: " + "; ".join(c.line() for c in self.failures)


def release_check(rates: list[Rate], outcome: Outcome, settings: ReleaseSection) -> ReleaseCheck:
    counts = {r.cls: (r.occurrences, r.scored) for r in [*rates, outcome.runtime_error_rate]}
    return check_counts(counts, (outcome.goal_reached, outcome.goal_scored), settings)


def check_counts(counts: Mapping[str, tuple[int, int]], goal: tuple[int, int], settings: ReleaseSection,
                 where: str = "") -> ReleaseCheck:
    """The criteria over (fired, decided) per class and (reached, decided) for the goal; `where`
    names a part of the run ("in goal renew-two") in every criterion's name."""
    criteria: list[Criterion] = []
    suffix = f" {where}" if where else ""
    if settings.fail_on_runtime_error:
        n, counted = counts["runtime_error"]
        criteria.append(Criterion("release.fail_on_runtime_error" + suffix, n == 0,
                                  f"the runtime failed in {n} of {counted} conversations" if n else "no runtime_error",
                                  "runtime_error", n, counted))
    unchecked: list[Unchecked] = []
    by_hand = settings.min_goal_reached is not None
    floor = DEFAULT_GOAL_FLOOR if settings.min_goal_reached is None else settings.min_goal_reached
    reached, scored = goal
    if floor > 0 and not scored and not by_hand:
        unchecked.append(Unchecked("goal_reached", f"the floor on goal reached{suffix}: no conversation could "
                                   "decide it (UNVERIFIABLE)"))
    elif floor > 0:
        ok = scored > 0 and reached / scored >= floor
        verdict = f"at least the floor {floor:.1%}" if ok else f"below the floor {floor:.1%}"
        criteria.append(Criterion("release.min_goal_reached" + suffix, ok, _compared(
            "goal reached", reached, scored, verdict) + ("" if by_hand else " (the default floor)"),
            "goal_reached", reached, scored, floor))
    ceilings: list[tuple[str, float, str]] = [(cls, ceiling, "") for cls, ceiling in settings.max_rate.items()]
    if settings.progress_ceiling < 1:
        ceilings += [(cls, settings.progress_ceiling, " (release.progress_ceiling)")
                     for cls in PROGRESS_CLASSES if cls not in settings.max_rate]
    for cls, ceiling, by_default in ceilings:
        k, n = counts[cls]
        if not n and by_default:
            unchecked.append(Unchecked(cls, f"the ceiling on {cls}{suffix}: no conversation could decide it "
                                            "(UNVERIFIABLE)"))
            continue
        ok = n > 0 and k / n <= ceiling
        criteria.append(Criterion(f"release.max_rate.{cls}{suffix}", ok, _compared(
            cls, k, n, f"within the ceiling {ceiling:.1%}" if ok else f"above the ceiling {ceiling:.1%}") + by_default,
            cls, k, n, ceiling))
    return ReleaseCheck(tuple(criteria), tuple(unchecked))


def _compared(what: str, k: int, n: int, verdict: str) -> str:
    if not n:
        return f"{what} could not be decided in any conversation (UNVERIFIABLE is never a pass)"
    return f"{what} {100 * k / n:.1f}% ({k}/{n}), {verdict}"
