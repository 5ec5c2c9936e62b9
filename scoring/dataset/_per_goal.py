"""What is worked out from a goal alone, kept once per goal object.

Every conversation of a goal asks the same of it (its dates, its brief's runs of words, its
setup as JSON, its facts filled in), and at a fast model asking again on every turn is a
visible share of the harness's CPU (benchmarks/README.md, issue 28). A goal is a frozen model,
but not a `functools.cached_property`: pydantic's `model_copy(update=...)` copies such a cache
along with the fields, stale. So answers are kept here, by the goal's identity, with the goal
itself, so that a collected goal's id reused by another object is never taken for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
KEPT = 4096               # goals x kinds of answer; a run holds a few dozen goals
_kept: dict[tuple[int, str], tuple[Any, Any]] = {}
_lock = threading.Lock()  # the scorer may run in a worker thread (a large transcript)


def per_goal(goal: Any, what: str, work: Callable[[Any], T]) -> T:
    """`work(goal)`, worked out once per goal object and `what`. Its answer is shared: callers
    must not change it (return a copy from `work`'s caller when they would)."""
    key = (id(goal), what)
    kept = _kept.get(key)
    if kept is not None and kept[0] is goal:
        answer: T = kept[1]     # kept with `what`, by the same `work`
        return answer
    value = work(goal)
    with _lock:
        if len(_kept) >= KEPT:
            _kept.clear()
        _kept[key] = (goal, value)
    return value
