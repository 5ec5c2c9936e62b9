"""Which of a step's arguments a reply asks for in words, for a runtime that gives no asks as data.

An assistant asks in its own phrasing: "What's the booking reference?", "Which day works for
you?", "Please give me the appointment ref". The rule: the reply makes a request (it puts a
question, or says please give, tell, provide, share, send or confirm, or let me know, or I
need), and names the argument. A name is read as its words (`new_date` is "new" and "date",
`bookingRef` is "booking" and "ref"); the last of them, its head, is what is asked for
("Which date?" asks for `new_date`), in the singular or plural, or as a word of the same family
(an identifier is an id, ref, reference, number or code: "booking reference" is `booking_id`;
a date is a day). A head that is an identifier names nothing on its own ("What's your phone
number?" does not ask for `booking_id`): the reply must name another word of the argument too.
Only the step's arguments that have `answers` are answered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

FAMILIES = (frozenset({"id", "ids", "ref", "reference", "number", "no", "code", "identifier"}),
            frozenset({"date", "day"}))
IDENTIFIER = FAMILIES[0]
_REQUEST = re.compile(r"\?|\b(?:please|kindly)\s+(?:give|tell|provide|share|send|confirm|enter|type)\b"
                      r"|\blet me know\b|\bi(?:'ll| will)? need\b", re.IGNORECASE)


def words_of(name: str) -> list[str]:
    """An argument's name as lower-case words: `new_date`, `bookingRef`, `seat-class`."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return [w.lower() for w in re.split(r"[\s_\-.]+", spaced) if w]


def _names(word: str, said: set[str]) -> bool:
    """Whether `said` (a reply's words) holds `word`, its plural, or a word of its family."""
    if {word, word + "s", word + "es"} & said:
        return True
    return any(word in family and family & said for family in FAMILIES)


def asks_for(reply: str, name: str) -> bool:
    if not _REQUEST.search(reply):
        return False
    said = set(re.findall(r"[a-z0-9']+", reply.replace("_", " ").lower()))
    *qualifiers, head = words_of(name) or [name.lower()]
    if not _names(head, said):
        return False
    return head not in IDENTIFIER or not qualifiers or any(_names(q, said) for q in qualifiers)


def asked_by_name(reply: str, step) -> list[str]:
    """The step's arguments with `answers` that `reply` asks for, in the step's order."""
    names: Iterable[str] = (name for name in step.answers if name in step.arguments)
    return [name for name in names if asks_for(reply, name)]
