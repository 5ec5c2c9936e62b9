"""How a persona's manner changes what the scripted user writes. Pure text functions.

A message is built as segments, each marked protected or not: the goal's facts (names, dates)
are protected, so that typing errors fall on the words around them and a reached goal stays
checkable against the facts. Every function takes its own seeded `random.Random`.
"""

from __future__ import annotations

import functools
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simrun.scoring.dataset import patterns

WORDY_OPENERS = (
    "Hi there, I hope you're having a good day.",
    "Hello! Thanks so much for helping me with this.",
    "Good morning, and thank you for your patience.",
    "Hi! I hope this is not too much trouble.",
)
WORDY_CLOSERS = (
    "Thanks so much for your help!",
    "I really appreciate it, thank you.",
    "Thank you, that would be lovely.",
    "Cheers, thanks a lot.",
)
COMPLAINTS = (
    "Ugh, this is taking forever.",
    "Honestly, this should be simpler.",
    "Seriously, this is getting tedious.",
    "This is so slow, honestly.",
)
CONFIRMS = ("Yes, please confirm.", "Yes, go ahead.", "Confirm.", "Yes, that's right.")
TERSE_CONFIRMS = ("yes", "ok", "confirm", "yep")
KEYBOARD_NEIGHBOURS = {
    "a": "qs", "b": "vn", "c": "xv", "d": "sf", "e": "wr", "f": "dg", "g": "fh", "h": "gj",
    "i": "uo", "j": "hk", "k": "jl", "l": "k", "m": "n", "n": "bm", "o": "ip", "p": "o",
    "q": "w", "r": "et", "s": "ad", "t": "ry", "u": "yi", "v": "cb", "w": "qe", "x": "zc",
    "y": "tu", "z": "x",
}
TYPO_MIN_LETTERS = 4


@dataclass(frozen=True)
class Segment:
    text: str
    protected: bool = False


@functools.lru_cache(maxsize=1024)
def _parsed(template: str) -> tuple[tuple[str, str | None, str | None, str | None], ...]:
    # A goal's few templates are filled in on every turn of every conversation: parsed once.
    return tuple(string.Formatter().parse(template))


_CONVERSIONS: dict[str, Callable[[Any], str]] = {"r": repr, "s": str, "a": ascii}   # a template's !r, !s, !a


def render(template: str, values: dict[str, Any]) -> list[Segment]:
    """Fill a template; the filled-in values come back as protected segments."""
    segments = []
    for literal, name, spec, conversion in _parsed(template):
        if literal:
            segments.append(Segment(literal))
        if name:
            value = values[name]
            if conversion:
                value = _CONVERSIONS[conversion](value)
            segments.append(Segment(format(value, spec or ""), protected=True))
    return segments


def protect(text: str, pattern: str) -> list[Segment]:
    """Split `text` so that what `pattern` matches is protected (a question's key words)."""
    return protect_matches([Segment(text)], [pattern])


def protect_matches(segments: list[Segment], regexes: list[str]) -> list[Segment]:
    """The same segments, with what any of `regexes` (goal patterns) matches in their
    unprotected text protected too (a probe's key words)."""
    out = []
    for seg in segments:
        spans = sorted({span for p in regexes for span in patterns.spans(p, seg.text)})
        if seg.protected or not spans:
            out.append(seg)
            continue
        at = 0
        for start, end in spans:
            start = max(start, at)
            if end <= start:
                continue
            if start > at:
                out.append(Segment(seg.text[at:start]))
            out.append(Segment(seg.text[start:end], protected=True))
            at = end
        if at < len(seg.text):
            out.append(Segment(seg.text[at:]))
    return out


def text_of(segments: list[Segment]) -> str:
    return "".join(s.text for s in segments)


_POLITENESS = re.compile(r"\b(please|could you|can you|would you|kindly|i'd like to|i want to|i need to)\b\s*", re.I)


def terse(segments: list[Segment]) -> list[Segment]:
    """Strip politeness and final punctuation; keep facts as they are."""
    out = []
    for seg in segments:
        if seg.protected:
            out.append(seg)
            continue
        text = _POLITENESS.sub("", seg.text)
        out.append(Segment(text.lower()))
    joined = text_of(out).strip()
    if joined and not out[-1].protected:
        out[-1] = Segment(out[-1].text.rstrip(" .!"))
    if out and not out[0].protected:
        out[0] = Segment(out[0].text.lstrip())
    return out


def wordy(segments: list[Segment], rng: random.Random) -> list[Segment]:
    body = text_of(segments).rstrip()
    end = "" if body.endswith((".", "!", "?")) else "."
    return [Segment(rng.choice(WORDY_OPENERS) + " "), *segments,
            Segment(end + " " + rng.choice(WORDY_CLOSERS))]


def complain(segments: list[Segment], rng: random.Random) -> list[Segment]:
    body = text_of(segments).rstrip()
    end = "" if body.endswith((".", "!", "?")) else "."
    complaint = rng.choice(COMPLAINTS)
    if rng.random() < 0.5:
        return [Segment(complaint + " "), *segments]
    return [*segments, Segment(end + " " + complaint)]


def typo(word: str, rng: random.Random) -> str:
    """One typing error: neighbours swapped, a letter dropped, doubled or mistyped."""
    kinds = ["swap", "double", "neighbour"] + (["drop"] if len(word) > TYPO_MIN_LETTERS else [])
    for _ in range(10):
        kind = rng.choice(kinds)
        i = rng.randrange(1, len(word) - 1)   # keep the first and last letter, as people do
        if kind == "swap":
            out = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        elif kind == "drop":
            out = word[:i] + word[i + 1:]
        elif kind == "double":
            out = word[:i] + word[i] + word[i:]
        else:
            near = KEYBOARD_NEIGHBOURS.get(word[i].lower(), "")
            out = word[:i] + rng.choice(near) + word[i + 1:] if near else word
        if out != word:
            return out
    return word


_WORD = re.compile(r"[A-Za-z]+")


def typos(segments: list[Segment], rate: float, rng: random.Random) -> tuple[list[Segment], int, int]:
    """(segments with typing errors, words eligible, words changed)."""
    eligible = changed = 0

    def one(m: re.Match[str]) -> str:
        nonlocal eligible, changed
        word = m.group(0)
        if len(word) < TYPO_MIN_LETTERS:
            return word
        eligible += 1
        if rng.random() < rate:
            changed += 1
            return typo(word, rng)
        return word

    out = [s if s.protected else Segment(_WORD.sub(one, s.text)) for s in segments]
    return out, eligible, changed


def typo_eligible_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if len(w) >= TYPO_MIN_LETTERS]
