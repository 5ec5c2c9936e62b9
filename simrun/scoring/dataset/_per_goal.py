"""What is worked out from a goal alone, kept by the goal's value.

Every conversation of a goal asks the same of it (its dates, its brief's runs of words, its
setup as JSON, its facts filled in), and at a fast model asking again on every turn is a
visible share of the harness's CPU (benchmarks/call_cpu.py). An answer is a pure function of
the goal's content, so it is kept under that content: the goal's id, then the goal itself,
matched by value. Not by the object's identity (an `id()` is reused once its object is
collected, and two loads of one goal file are the same goal), and not as a
`functools.cached_property` (pydantic's `model_copy(update=...)` copies such a cache along with
the fields, stale).

A goal is frozen: the object already kept is recognised without comparing (as a dict does);
another object is compared by its exact JSON (`1`, `1.0` and `true` are three values here,
though Python's `==` takes them for one), once, and then kept beside it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, TypeVar, cast


class Goal(Protocol):
    """What is asked of a goal here (`simrun.scoring.dataset.Goal` is one): its id, and its exact JSON."""

    @property
    def id(self) -> str: ...

    def model_dump_json(self, *, warnings: bool = True) -> str: ...


G = TypeVar("G", bound=Goal)
T = TypeVar("T")
KEPT = 4096               # (goal id, kind of answer) pairs, the oldest out first
GOALS_PER_KEY = 8         # goal objects kept for one pair: copies and other loads of one goal
# (goal id, what) -> ((goal, answer), ...), each goal the same by value as the one answered. A
# pair's tuple is replaced, never changed, so that a reader in another thread (the scorer of a
# large transcript) needs no lock; writers take one.
_kept: dict[tuple[str, str], tuple[tuple[Goal, object], ...]] = {}
_lock = threading.Lock()


def per_goal(goal: G, what: str, work: Callable[[G], T]) -> T:
    """`work(goal)`, worked out once per goal value and `what`. Its answer is shared: callers
    must not change it (return a copy from `work`'s caller when they would)."""
    key = (goal.id, what)
    kept = _kept.get(key, ())
    for seen, answer in kept:
        if seen is goal:
            return cast("T", answer)    # kept with `what`, by the same `work`
    if kept:
        # Another object: compared by value (a dump of each), once per object, then kept too.
        mine = _exact(goal)
        for seen, answer in kept:
            if mine is not None and type(seen) is type(goal) and _exact(seen) == mine:
                _keep(key, goal, answer)
                return cast("T", answer)
    value = work(goal)
    _keep(key, goal, value)
    return value


def _exact(goal: Goal) -> str | None:
    """The goal's exact JSON; None for one that has none (a copy given a value no JSON holds),
    which is then matched by nothing but itself."""
    try:
        return goal.model_dump_json(warnings=False)
    except ValueError:          # pydantic's PydanticSerializationError is one
        return None


def _keep(key: tuple[str, str], goal: Goal, answer: object) -> None:
    with _lock:
        kept = _kept.pop(key, ())
        _kept[key] = (*kept[-(GOALS_PER_KEY - 1):], (goal, answer))
        while len(_kept) > KEPT:
            del _kept[next(iter(_kept))]
