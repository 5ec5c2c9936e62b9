"""Goal patterns: the regular expressions a goal file writes (`questions[].match`,
`refusals[].trigger`), matched in linear time.

A goal file may come from an untrusted pull request, and a pattern like `(a+)+$` makes a
backtracking engine (Python's `re`) run for ever on a short message, which would stall every
conversation of a run. RE2 matches in time linear in the text whatever the pattern; what it
cannot do (lookarounds, backreferences) is refused when the goal is loaded. Matching ignores case.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Protocol

import re2

MAX_PATTERN_CHARS = 2_000


class PatternError(ValueError):
    """A goal pattern RE2 cannot compile; the message says why."""


def _options() -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False      # RE2 would print its own copy of the error to stderr
    return options


class Match(Protocol):
    """What is read of an RE2 match (the module ships no types)."""

    def start(self) -> int: ...
    def end(self) -> int: ...


class Pattern(Protocol):
    """What is used of a compiled RE2 pattern."""

    def search(self, text: str) -> Match | None: ...
    def finditer(self, text: str) -> Iterator[Match]: ...


@functools.lru_cache(maxsize=4096)
def compiled(pattern: str) -> Pattern:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"a pattern may be at most {MAX_PATTERN_CHARS:,} characters, this one has {len(pattern):,}")
    try:
        regex: Pattern = re2.compile(pattern, _options())
        return regex
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(f"not a regular expression simrun can match in linear time (RE2): {reason}; "
                           "lookarounds and backreferences are not supported") from None


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches anywhere in `text`, ignoring case."""
    return compiled(pattern).search(text) is not None


def spans(pattern: str, text: str) -> list[tuple[int, int]]:
    """Where `pattern` matches in `text`, in order, without overlaps."""
    return [(m.start(), m.end()) for m in compiled(pattern).finditer(text) if m.end() > m.start()]
