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

It hears questions, not words, sentence by sentence. The argument must be named in a sentence
that makes the request (its other words, which say whose it is, may be anywhere in the reply:
"Which booking is it? Its ref, please?"). A sentence that offers what the assistant can do
("I can request a refill, move a pickup date, or cancel a refill.", "Would you like to move the
date or cancel?", "Anything else I can help with?") asks for nothing, unless it puts a direct
question for the argument ("Which date would you like to move it to?": which or what right
before it). "No" is no identifier ("no refills left"); "no." before a word is ("booking no. 4?").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from simrun.scoring.dataset import Step

FAMILIES = (frozenset({"id", "ids", "ref", "reference", "number", "code", "identifier"}),
            frozenset({"date", "day"}))
IDENTIFIER = FAMILIES[0]
_REQUEST = re.compile(r"\?|\b(?:please|kindly)\s+(?:give|tell|provide|share|send|confirm|enter|type)\b"
                      r"|\blet me know\b|\bi(?:'ll| will)? need\b", re.IGNORECASE)
# The families of an offer: what the assistant can do, a choice between actions, anything else.
_OFFER = re.compile(r"\b(?:i|we|you)\s+(?:can|could|may)\b|\b(?:i|we)\s+(?:am|are|'m|'re)\s+able\s+to\b"
                    r"|\b(?:would|do)\s+you\s+(?:like|want|prefer)\s+(?:me\s+)?to\b|\banything\s+else\b"
                    r"|\b(?:options?|choices?)\b", re.IGNORECASE)
# A direct question for a thing: "which date", "what new date", "what is the date".
_DIRECT = r"\b(?:which|what)(?:'s|\s+is|\s+are)?\s+(?:(?:the|your|a|new|other)\s+){{0,2}}{word}\b"
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_ABBREVIATED = re.compile(r"\bno\.(?=\s*\w)|#", re.IGNORECASE)     # "booking no. 4", "booking #"


def words_of(name: str) -> list[str]:
    """An argument's name as lower-case words: `new_date`, `bookingRef`, `seat-class`."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return [w.lower() for w in re.split(r"[\s_\-.]+", spaced) if w]


def _forms(word: str) -> set[str]:
    """`word`, its plural, and the words of its family."""
    forms = {word, word + "s", word + "es"}
    for family in FAMILIES:
        if word in family:
            forms |= family
    return forms


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9']+", text.replace("_", " ").lower()))


def _asks_in(sentence: str, head: str) -> bool:
    """Whether this sentence requests the thing `head` names."""
    if not _REQUEST.search(sentence) or not _forms(head) & _words(sentence):
        return False
    if not _OFFER.search(sentence):
        return True
    # An offer asks for nothing, unless it puts a direct question for the thing.
    return any(re.search(_DIRECT.format(word=re.escape(form)), sentence, re.IGNORECASE) for form in _forms(head))


def asks_for(reply: str, name: str) -> bool:
    reply = _ABBREVIATED.sub(" number ", reply)
    *qualifiers, head = words_of(name) or [name.lower()]
    if not any(_asks_in(sentence, head) for sentence in _SENTENCE.split(reply)):
        return False
    said = _words(reply)
    return head not in IDENTIFIER or not qualifiers or any(_forms(q) & said for q in qualifiers)


def asked_by_name(reply: str, step: Step) -> list[str]:
    """The step's arguments with `answers` that `reply` asks for, in the step's order."""
    names: Iterable[str] = (name for name in step.answers if name in step.arguments)
    return [name for name in names if asks_for(reply, name)]
