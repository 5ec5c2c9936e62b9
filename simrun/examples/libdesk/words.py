"""How the library desk reads a patron's message, and how it writes dates, times and numbers.

Reading is by keywords, forgiving of typing errors: a word counts as a keyword when it is close
enough to one (difflib's similarity of 0.8 or more, for words of four letters or more). Titles
and branch names are found by the records and branches the library knows. What the desk writes
is plain English: "Thursday 10 December 2026", "10.30 am", "two renewals".
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from simrun.examples.libdesk.catalogue import BRANCHES

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
KEYWORDS = {
    "renew": ("renew", "renewal", "extend", "extension", "longer"),
    "place_hold": ("hold", "reserve", "reservation", "request"),
    "move_pickup": ("move", "switch", "change", "collect", "pickup", "pick"),
    "cancel_hold": ("cancel", "drop", "withdraw"),
}
QUESTION = ("when", "what", "how", "where", "which", "until")
CONFIRM = ("yes", "yep", "yeah", "confirm", "sure", "ok", "okay", "fine", "proceed", "ahead", "right")
DECLINE = ("no", "nope", "keep", "don't", "dont", "stop")
CORRECTION = ("sorry", "meant", "mean", "actually", "instead", "correction", "oops")
# Greetings, thanks and complaints: they ask for nothing, and are not a title given alone.
CHIT_CHAT = re.compile(r"\b(?:hi|hello|hey|thanks?|thank you|hope|appreciate|cheers|lovely|good morning|"
                       r"ugh|honestly|seriously|slow|simpler|tedious|forever|patience|trouble)\b", re.I)
# Another patron's details, or staff-only codes: never given out.
PRIVATE = re.compile(r"\b(?:home\s+address|address|phone(?:\s+number)?|e-?mail|pin|password|"
                     r"who\s+(?:has|borrowed)|borrowed\s+by)\b", re.I)


@dataclass
class Reading:
    text: str
    words: list[str]
    command: str | None = None          # what the patron asks to be done
    topic: str | None = None            # what the patron asks about: due, renewals, pickup, branch
    titles: list[str] = field(default_factory=list)   # titles of known records named
    weeks: int | None = None
    branch: str | None = None
    new_title: str | None = None        # a title to put on hold
    confirm: bool = False
    decline: bool = False
    correction: bool = False
    private: bool = False

    @property
    def says_anything(self) -> bool:
        return bool(self.command or self.topic or self.titles or self.weeks or self.branch
                    or self.new_title or self.confirm or self.decline or self.private)


@functools.lru_cache(maxsize=8192)
def _near(word: str, keywords: tuple[str, ...]) -> bool:
    """The word is a keyword, or one typing error from one (similar enough, or two letters swapped).
    Remembered: difflib's comparison was LibDesk's largest cost, and users repeat their words."""
    if word in keywords:
        return True
    if len(word) < 4:
        return False
    long_enough = [k for k in keywords if len(k) >= 4]
    return bool(difflib.get_close_matches(word, long_enough, 1, 0.8)) or any(
        len(k) == len(word) and k[0] == word[0] and sorted(k) == sorted(word) for k in long_enough)


def read(text: str, titles: list[str]) -> Reading:
    """What a message says, given the titles of the records the library holds for this patron."""
    lowered = text.lower()
    words = re.findall(r"[a-z']+|\d+", lowered)
    r = Reading(text, words)
    r.titles = sorted({t for t in titles if re.search(rf"(?<!\w){re.escape(t.lower())}(?!\w)", lowered)},
                      key=lambda t: lowered.index(t.lower()))
    for w in words:
        for command, keys in KEYWORDS.items():
            if r.command is None and _near(w, keys):
                r.command = command
    if r.command == "place_hold" and any(_near(w, KEYWORDS["cancel_hold"]) for w in words):
        r.command = "cancel_hold"
    if r.command == "place_hold" and any(_near(w, ("move", "change", "switch", "collect")) for w in words):
        r.command = "move_pickup"
    r.private = bool(PRIVATE.search(text))
    r.topic = _topic(lowered, words)
    if r.topic is not None and r.command in ("renew", "move_pickup") and "?" in text:
        r.command = None            # "How many renewals are left?" asks; it does not renew
    r.weeks = _weeks(lowered)
    r.branch = next((b for b in BRANCHES if re.search(rf"\b{b.lower()}\b", lowered)), None)
    if r.command == "place_hold":
        r.new_title = _title_to_hold(text, titles)
    r.confirm = any(w in CONFIRM for w in words)
    r.decline = any(w in DECLINE for w in words)
    r.correction = any(w in CORRECTION for w in words)
    return r


def _topic(lowered: str, words: list[str]) -> str | None:
    if not any(_near(w, QUESTION) for w in words) and "?" not in lowered:
        return None
    said: Callable[..., bool] = lambda *keys: any(_near(w, keys) for w in words)  # noqa: E731
    if said("renew", "renewed", "renewal", "renewals", "extend"):
        return "renewals"
    if said("due", "back", "return"):
        return "due"
    if said("time", "hour", "o'clock"):
        return "pickup_time"
    if said("where", "branch", "library"):
        return "branch"
    if said("ready", "collect", "pick", "pickup", "day"):
        return "pickup"
    return "other"


def _weeks(lowered: str) -> int | None:
    m = re.search(r"\b(\d+|" + "|".join(NUMBER_WORDS) + r")\s*(?:more\s+|extra\s+)?weeks?\b", lowered)
    if m:
        return int(m.group(1)) if m.group(1).isdigit() else NUMBER_WORDS.index(m.group(1))
    bare = re.fullmatch(r"\W*(?:for\s+)?(\d+|" + "|".join(NUMBER_WORDS) + r")\W*", lowered)
    if bare:
        return int(bare.group(1)) if bare.group(1).isdigit() else NUMBER_WORDS.index(bare.group(1))
    return None


def _title_to_hold(text: str, known: list[str]) -> str | None:
    """The title after "hold on", "reserve" and the like, up to where the branch is named."""
    m = re.search(r"(?:\b\w{3,5}\s+(?:on|for)|reserve|request)\s+(?:the\s+book\s+|a\s+copy\s+of\s+)?['\"]?"
                  r"(?P<title>[A-Z0-9][^'\".!?,]*?)['\"]?(?=\s+(?:for|at|in|from|to)\b|[.!?,'\"]|\s*$)", text)
    if not m:
        return None
    title = m.group("title").strip()
    return title if title and title.lower() not in {k.lower() for k in known} | {"a", "it"} else None


def a_title(text: str) -> str | None:
    """A message that is only a title (an answer to "which book?")."""
    bare = re.sub(r"^(?:the\s+book\s+is\s+|it'?s\s+|it\s+is\s+)", "", text.strip(), flags=re.I).strip(" .!?'\"")
    return bare if bare and bare[0].isupper() and len(bare.split()) <= 6 else None


# --- writing ---------------------------------------------------------------------------------------

def long_date(iso: str) -> str:
    day = dt.date.fromisoformat(iso)
    return f"{day:%A} {day.day} {day:%B %Y}"


def clock(hhmm: str) -> str:
    hour, minute = (int(x) for x in hhmm.split(":")[:2])
    half = "am" if hour < 12 else "pm"
    return f"{(hour % 12) or 12}.{minute:02d} {half}"


def count(n: int, noun: str) -> str:
    word = NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)
    return f"{word} {noun}{'' if n == 1 else 's'}"
