"""The release check: what a run must meet, beyond its guarantees, to be released.

`simrun` (a run) fails, exit 1, when a criterion of budgets.toml's [release] fails, and names it
in one line; the report shows the same verdict, made by the same function. The criteria:

- `fail_on_runtime_error` (on by default): any conversation that ended in runtime_error;
- `min_goal_reached` (off by default): the goal-reached rate must reach this floor;
- `max_rate` (off by default): per class, the highest rate a run may have.

A rate that could not be decided (every conversation UNVERIFIABLE for it) fails its criterion:
UNVERIFIABLE is never a pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from scoring.store.rates import Outcome, Rate
from scoring.checks.scorer import ALL_CLASSES

CEILING_CLASSES = (*ALL_CLASSES, "runtime_error")


class ReleaseSettings(Protocol):
    fail_on_runtime_error: bool
    min_goal_reached: float | None
    max_rate: Mapping[str, float]


@dataclass(frozen=True)
class Criterion:
    name: str               # as written in budgets.toml: release.min_goal_reached
    passed: bool
    detail: str

    def line(self) -> str:
        return f"{self.name}: {self.detail}"


@dataclass(frozen=True)
class ReleaseCheck:
    criteria: tuple[Criterion, ...]

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


def release_check(rates: list[Rate], outcome: Outcome, settings: ReleaseSettings) -> ReleaseCheck:
    criteria = []
    if settings.fail_on_runtime_error:
        n = outcome.runtime_errors
        criteria.append(Criterion("release.fail_on_runtime_error", n == 0,
                                  f"the runtime failed in {n} of {outcome.counted} conversations"
                                  if n else "no runtime_error"))
    if settings.min_goal_reached is not None:
        floor = settings.min_goal_reached
        rate = outcome.goal_rate
        ok = rate is not None and rate >= floor
        criteria.append(Criterion("release.min_goal_reached", ok, _compared(
            "goal reached", outcome.goal_reached, outcome.goal_scored,
            f"at least the floor {floor:.1%}" if ok else f"below the floor {floor:.1%}")))
    by_class = {r.cls: r for r in [*rates, outcome.runtime_error_rate]}
    for cls, ceiling in settings.max_rate.items():
        rate = by_class[cls]
        ok = rate.rate is not None and rate.rate <= ceiling
        criteria.append(Criterion(f"release.max_rate.{cls}", ok, _compared(
            cls, rate.occurrences, rate.scored,
            f"within the ceiling {ceiling:.1%}" if ok else f"above the ceiling {ceiling:.1%}")))
    return ReleaseCheck(tuple(criteria))


def _compared(what: str, k: int, n: int, verdict: str) -> str:
    if not n:
        return f"{what} could not be decided in any conversation (UNVERIFIABLE is never a pass)"
    return f"{what} {100 * k / n:.1f}% ({k}/{n}), {verdict}"
