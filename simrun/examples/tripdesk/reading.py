"""Reading a user's message by rules: typing errors mended, values pulled out, intent named.

No model is involved. The reader is tolerant on purpose: one typing error per word (a swap,
a dropped, doubled or wrong letter) is mended against the domain's vocabulary, and both terse
("rebook outbound") and wordy phrasing ("Hi! Could you please move my outbound flight…")
read the same. What it cannot read it says so (`Reading.intent is None`), and the runtime
answers with a stub turn instead of guessing.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
NUMBERS = {"a": 1, "an": 1, "one": 1, "another": 1, "extra": 1, "two": 2, "three": 3, "four": 4}
ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "last": -1}

BAG = {"bag", "bags", "luggage", "suitcase", "suitcases", "baggage"}
SEGMENT_WORDS = {"outbound": "outbound", "departure": "outbound", "outgoing": "outbound",
                 "return": "return", "inbound": "return"}
CONFIRM = {"yes", "yep", "yeah", "confirm", "confirmed", "ok", "okay", "sure", "correct",
           "proceed", "ahead", "fine", "absolutely", "definitely"}
DECLINE = {"no", "nope", "keep", "leave", "don't", "dont", "not"}
CORRECTION = {"sorry", "meant", "actually", "correction", "oops", "instead", "wait", "mistake"}
COMPLAINT = {"ugh", "slow", "forever", "ridiculous", "annoying", "frustrating", "seriously",
             "simpler", "complicated", "useless", "tedious", "tiresome", "already", "again"}
PLEASANTRY = {"hi", "hello", "hey", "thanks", "thank", "hope", "appreciate", "great",
              "wonderful", "lovely", "cheers", "morning", "afternoon", "evening", "there",
              "kindly", "much", "lot", "so"}
QUESTION_WORDS = {"how", "when", "what", "where", "which", "whats", "what's", "who"}
VERBS = {
    "open_trip": {"open", "new", "create", "start", "plan", "book", "set"},
    "name_trip": {"name", "call", "rename", "title"},
    "add_bag": {"add", "another", "extra", "plus"},
    "remove_bag": {"remove", "drop", "delete", "fewer", "less", "take"},
    "rebook": {"rebook", "move", "change", "reschedule", "shift", "push"},
    "cancel_trip": {"cancel", "scrap", "abandon"},
}
VOCAB = (set(MONTHS) | BAG | set(SEGMENT_WORDS) | CONFIRM | CORRECTION | COMPLAINT | PLEASANTRY
         | DECLINE | QUESTION_WORDS | set(NUMBERS) | set(ORDINALS)
         | set().union(*VERBS.values())
         | {"trip", "flight", "passport", "document", "status", "called", "date", "bags",
            "traveler", "traveller", "destination", "going", "named", "weather", "please"})
# Words that one typing error away from a vocabulary word are still themselves.
COMMON = {"same", "have", "with", "from", "your", "what", "when", "that", "this", "them",
          "then", "they", "than", "there", "were", "will", "would", "could", "should", "make",
          "just", "like", "want", "need", "also", "into", "onto", "over", "more", "some",
          "time", "trip", "does", "done", "gone", "good", "sure", "here", "home", "come",
          "back", "cane", "came", "nice", "mine", "note", "else", "many", "much",
          "mean", "means", "file", "form", "hers", "thus"}
CAPITALISED_NOISE = {"hi", "hello", "hey", "thanks", "thank", "please", "sure", "ugh", "i",
                     "the", "ok", "okay", "honestly", "yes", "no", "sorry", "oh", "well",
                     "great", "could", "can", "would", "let", "lets", "let's", "my", "it",
                     "call", "name", "open", "rebook", "move", "add", "and", "also", "for",
                     "that", "this", "again", "seriously", "hope", "good", "morning", "wait",
                     "actually", "a", "an", "just", "so", "we", "our", "is", "it's", "its",
                     "make", "go", "with", "trip", "as"}


def within_one_edit(a: str, b: str) -> bool:
    """True if b is a, or a with one swap of neighbours, one letter dropped, added or changed."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    if la == lb:
        diff = [i for i in range(la) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        return (len(diff) == 2 and diff[1] == diff[0] + 1
                and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if la < lb else (b, a)
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    return short[i:] == long_[i + 1:]


_vocab_by_len: dict[int, list[str]] = {}
for _word in sorted(VOCAB):
    _vocab_by_len.setdefault(len(_word), []).append(_word)


@functools.lru_cache(maxsize=4096)
def mend(word: str) -> str:
    """The vocabulary word one typing error away from `word`, or `word` itself. Remembered: it
    compares the word with the whole vocabulary, and users say the same words again and again."""
    low = word.lower()
    if low in VOCAB or low in COMMON or len(low) < 4 or not low.isalpha():
        return word
    candidates = [c for size in (len(low), len(low) - 1, len(low) + 1)
                  for c in _vocab_by_len.get(size, ()) if within_one_edit(low, c)]
    if not candidates:
        return word
    def fit(c: str) -> tuple[bool, bool, bool]:
        # People rarely mistype a word's first or last letter: "trop" is "trip", not "drop".
        return c[0] != low[0], c[-1] != low[-1], len(c) != len(low)

    ranked = sorted(candidates, key=fit)
    if len(ranked) > 1 and fit(ranked[1]) == fit(ranked[0]):
        return word   # two words fit as well: guessing could turn "add" into "remove"
    return ranked[0]


_WORD = re.compile(r"[A-Za-zÀ-ÿ]+(?:['’][A-Za-z]+)?")


@dataclass(frozen=True)
class PartialDate:
    """A date as the user gave it; a missing year is filled by the runtime, not here."""

    day: int
    month: int
    year: int | None

    def complete(self, year: int) -> dt.date | None:
        try:
            return dt.date(self.year or year, self.month, self.day)
        except ValueError:
            return None


@dataclass
class Reading:
    text: str                                   # the message with typing errors mended
    words: list[str] = field(default_factory=list)
    intent: str | None = None                   # an operation, "question", or None
    question: str | None = None                 # bags | date | name | status | destination | refused | other
    confirm: bool = False
    decline: bool = False
    correction: bool = False
    complaint: bool = False
    ordinal: int | None = None
    date: PartialDate | None = None
    count: int | None = None
    segment: str | None = None
    name: str | None = None
    traveler: str | None = None
    destination: str | None = None


_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_MONTH = r"(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DATE_PATTERNS = [
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), ("y", "m", "d")),
    (re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b"), ("d", "m", "y")),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+(\d{{4}}))?", re.I), ("d", "M", "y")),
    (re.compile(rf"\b{_MONTH}\s+(?:the\s+)?{_DAY}(?:,?\s+(\d{{4}}))?", re.I), ("M", "d", "y")),
]


def parse_date(text: str) -> PartialDate | None:
    for pattern, order in _DATE_PATTERNS:
        m = pattern.search(text)
        if not m:
            continue
        parts = dict(zip(order, m.groups()))
        month = MONTHS[parts["M"].lower()] if "M" in parts else int(parts["m"])
        year = int(parts["y"]) if parts.get("y") else None
        day = int(parts["d"])
        if 1 <= month <= 12 and 1 <= day <= 31:
            return PartialDate(day, month, year)
    return None


_NAME_AFTER_VERB = re.compile(
    r"\b(?:call|name|rename|title)(?:d)?\s+(?:it|the trip|this trip|my trip|this|that)?\s*"
    r"(?:to|as)?\s*[\"“']?(?P<name>[^\"”.!?,;]+)", re.I)
_RENAME_TO = re.compile(r"\brename\b.*?\b(?:to|as)\s+[\"“']?(?P<name>[^\"”.!?,;]+)", re.I)
_TRAILING_FILLER = re.compile(
    r"\s+(?:please|thanks|thank you|if (?:that's|that is|you can|possible).*|for me|then)$", re.I)
_LEADING_FILLER = re.compile(
    r"^(?:(?:ok|okay|sure|yes|well|hmm|so|um)[,!]?\s+)*(?:it's|it is|let's go with|let's do|"
    r"go with|make it|use|the name is|name it|call it)?\s*", re.I)
_CAPITALISED = re.compile(r"[A-ZÀ-Þ][\wÀ-ÿ'’-]*(?:\s+[A-ZÀ-Þ][\wÀ-ÿ'’-]*)*")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def _is_fluff(sentence: str) -> bool:
    words = {w.lower() for w in _WORD.findall(sentence)}
    return bool(words & (PLEASANTRY | COMPLAINT)) and not words & (
        set().union(*VERBS.values()) | BAG | set(SEGMENT_WORDS) | {"trip"})


def core_sentence(text: str) -> str:
    """The part of a message that is not greeting, thanks or complaint."""
    return " ".join(s for s in _sentences(text) if not _is_fluff(s))


def clean_value(value: str) -> str:
    value = _TRAILING_FILLER.sub("", value.strip())
    value = _LEADING_FILLER.sub("", value)
    return value.strip(" \"'“”.!?,")


def capitalised_phrase(text: str, *, skip: AbstractSet[str] = frozenset()) -> str | None:
    best = None
    for m in _CAPITALISED.finditer(text):
        words = [w for w in m.group(0).split()
                 if w.lower().strip("'’") not in CAPITALISED_NOISE and w.lower() not in MONTHS
                 and w.lower() not in skip]
        phrase = " ".join(words)
        if phrase and (best is None or len(phrase) > len(best)):
            best = phrase
    return best


def _mend_in_place(m: re.Match[str]) -> str:
    word = m.group(0)
    # A capitalised word inside a sentence is a name ("Crete", "Dave"), not mended, unless it
    # is a mistyped month, which is capitalised too ("14 Mrach").
    before = m.string[:m.start()].rstrip()
    mended = mend(word)
    if word[:1].isupper() and before and before[-1] not in ".!?" and mended not in MONTHS:
        return word
    return mended


def read(message: str) -> Reading:
    fixed = _WORD.sub(_mend_in_place, message)
    words = [w.lower() for w in _WORD.findall(fixed)]
    wordset = set(words)
    r = Reading(text=fixed, words=words)
    core = core_sentence(fixed)

    r.date = parse_date(fixed)
    r.segment = next((SEGMENT_WORDS[w] for w in words if w in SEGMENT_WORDS), None)
    r.correction = bool(wordset & CORRECTION) or bool(re.match(r"\s*no[,.!]\s+\S", fixed, re.I))
    r.complaint = bool(wordset & COMPLAINT)
    r.confirm = bool(wordset & CONFIRM) or bool(re.search(r"\b(go ahead|do it|that one)\b", fixed, re.I))
    r.decline = not r.correction and bool(wordset & DECLINE) and not (wordset & {"yes", "confirm"})
    for w in words:
        if w in ORDINALS:
            r.ordinal = ORDINALS[w]
    m = re.search(r"\b(\d+)\s+(?:more\s+|extra\s+)?(?:" + "|".join(BAG) + r")\b", fixed, re.I)
    if m:
        r.count = int(m.group(1))
    else:
        for w, nxt in zip(words, words[1:] + [""]):
            if w in NUMBERS and (nxt in BAG or nxt in {"more", "extra"}):
                r.count = NUMBERS[w]
                break

    m = _RENAME_TO.search(core) or _NAME_AFTER_VERB.search(core)
    if m and not wordset & {"what", "whats", "what's"}:
        r.name = clean_value(m.group("name")) or None
    m = re.search(r"\bfor\s+(?:my\s+\w+\s+|traveler\s+|traveller\s+)?"
                  r"([A-ZÀ-Þ][\wÀ-ÿ'’-]+(?:\s+[A-ZÀ-Þ][\wÀ-ÿ'’-]+)*)", fixed)
    if m:
        r.traveler = capitalised_phrase(m.group(1))
    m = re.search(r"\b(?:to|in|for a trip to|visit)\s+([A-ZÀ-Þ][\wÀ-ÿ'’-]+(?:\s+[A-ZÀ-Þ][\wÀ-ÿ'’-]+)*)",
                  fixed)
    if m and m.group(1).split()[0].lower() not in MONTHS:
        r.destination = capitalised_phrase(m.group(1))

    r.intent = _intent(r, wordset, words, fixed)
    return r


def _intent(r: Reading, wordset: set[str], words: list[str], text: str) -> str | None:
    asks = bool(words) and (words[0] in QUESTION_WORDS or (
        "?" in text and words[0] in {"is", "are", "does", "do"}))
    has_bag = bool(wordset & BAG)
    command = None
    if "rebook" in wordset or (wordset & VERBS["rebook"] and (r.segment or r.date or "flight" in wordset)):
        command = "rebook"
    elif wordset & VERBS["cancel_trip"] and ("trip" in wordset or "booking" in wordset):
        command = "cancel_trip"
    elif has_bag and wordset & VERBS["remove_bag"]:
        command = "remove_bag"
    elif has_bag and wordset & VERBS["add_bag"]:
        command = "add_bag"
    elif (wordset & VERBS["name_trip"] or "named" in wordset) and r.name:
        command = "name_trip"
    elif wordset & VERBS["open_trip"] and "trip" in wordset:
        command = "open_trip"
    if command and not asks:
        return command
    if asks or "?" in text:
        r.question = _topic(wordset)
        return "question"
    return command


def _topic(wordset: set[str]) -> str:
    if wordset & {"passport", "document"}:
        return "refused"
    if wordset & BAG:
        return "bags"
    if wordset & {"when", "date"} or wordset & set(SEGMENT_WORDS):
        return "date"
    if wordset & {"name", "called", "named"}:
        return "name"
    if wordset & {"status", "cancelled", "canceled", "still"}:
        return "status"
    if "where" in wordset or "destination" in wordset:
        return "destination"
    return "other"
