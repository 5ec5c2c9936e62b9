"""Answering what a patron asks from the catalogue, in plain words; the stub turn; showing again
what is pending.

A question about loans is answered with when they are due or how often they can still be renewed,
one about holds with where and when they can be collected. A question the desk cannot read, about
a record it holds, is its own failing and is logged as unanswered. Whatever the turn, a card or a
question still open is shown again, with the reason it comes again.
"""

from __future__ import annotations

from simrun.examples.libdesk.catalogue import Catalogue
from simrun.examples.libdesk.drafts import ask, named
from simrun.examples.libdesk.patron import Patron
from simrun.examples.libdesk.reply import Out
from simrun.examples.libdesk.words import Reading, clock, count, long_date


def answer(p: Patron, r: Reading, out: Out) -> None:
    kind = "loan" if r.topic in ("due", "renewals") else "hold"
    record = named(p, kind, r)
    records = [record] if record else p.catalogue.of_kind(kind)
    if r.topic == "other" or not records:
        out.lines.append("I can tell you when loans are due, how often they can be renewed, and where and "
                         "when holds can be collected.")
        out.answer = "unavailable"
        if r.titles:    # a question about a record it holds, left unanswered: its own failing
            p.faults.saw("unanswered", p.turn, f"could not read a question about {', '.join(r.titles)}")
    elif p.faults.fire("unanswered"):
        out.lines.append("I can't look that up just now.")
        out.answer = "unavailable"
        p.faults.saw("unanswered", p.turn, f"said it could not answer about {', '.join(records)}")
    else:
        out.lines.extend(fact(p.catalogue, r.topic, rid) for rid in records)
        out.answer = "answered"
    pending(p, out, "I still need it")


def fact(catalogue: Catalogue, topic: str | None, rid: str) -> str:
    rec = catalogue.records[rid]
    if topic == "due":
        return f"{rec['title']} is due back on {long_date(rec['due'])}."
    if topic == "renewals":
        return f"{rec['title']} can be renewed {count(rec['renewals_left'], 'more time')}."
    if rec.get("status") != "ready":
        return f"{rec['title']} is not in yet; it will wait for you at {rec['branch']}."
    return (f"{rec['title']} is ready at {rec['branch']}, from {clock(rec['pickup_from'])} on "
            f"{long_date(rec['ready_on'])}.")


def stub(p: Patron, out: Out) -> None:
    out.understood = False
    out.lines.append("Sorry, I didn't catch that.")
    pending(p, out, "I could not read your message")


def pending(p: Patron, out: Out, reason: str) -> None:
    """Show again what is waiting: the card, or the question the draft needs answered."""
    if p.card is not None:
        out.lines.append("The confirmation is still waiting for you.")
        out.card = p.card
    elif p.draft is not None and p.draft.asking:
        ask(p, p.draft, p.draft.asking, out, reason)
