"""Corrections ("sorry, I meant the 14th"): the last value the user gave, set right.

A correction keeps what it does not restate: a day and month keep the corrected date's year.
What is not done yet goes on with the corrected value; what is done already is corrected by the
operation that sets the value right (a rebook again, a bag added or removed, the destination or
traveler of a trip just opened changed).
"""

from __future__ import annotations

import re

from simrun.examples.tripdesk.operations import proceed
from simrun.examples.tripdesk.reading import Reading, clean_value, core_sentence
from simrun.examples.tripdesk.reply import Out
from simrun.examples.tripdesk.state import SessionState


def correct(s: SessionState, r: Reading, out: Out) -> bool:
    """Correct the last value given, if the message restates it; False if it does not."""
    last = s.last_given
    if last is None:
        return False
    arg = last["argument"]
    new: object = None          # the argument's new value: a date, a name, a count, ...
    if arg == "date" and r.date is not None:
        # A correction keeps what it does not restate: the year of the date it corrects.
        new = r.date.complete(year=last["value"].year)
    elif arg == "name":
        text = core_sentence(r.text)
        text = re.sub(r"^\W*(?:(?:no|sorry|oops|wait|actually)\W+)*(?:i\s+mean[t]?|make\s+(?:it|that)"
                      r"|it\s+should\s+be|call\s+it|name\s+it)?\s*", "", text, flags=re.I)
        new = clean_value(text) or None
    elif arg in ("count", "segment", "destination", "traveler"):
        new = getattr(r, arg)
    if new is None or new == last["value"]:
        return False
    op, record = last["operation"], last.get("record")
    if not last.get("committed"):
        # Not done yet (asked for, or waiting on its card): go on with the corrected value.
        s.card = None
        proceed(s, op, {**last["args"], arg: new}, out, offer=None, given={arg: new})
        return True
    # Done already: correct it with the operation that sets the value right.
    if op in ("name_trip", "rebook"):
        fix, args = op, {**last["args"], arg: new, "trip": record}
    elif op in ("add_bag", "remove_bag") and arg == "count":
        delta = (new - last["value"]) * (1 if op == "add_bag" else -1)
        fix, args = ("add_bag" if delta > 0 else "remove_bag"), {"trip": record, "count": abs(delta)}
    elif op == "open_trip" and arg in ("destination", "traveler"):
        fix, args = f"change_{arg}", {"trip": record, arg: new}
    else:
        return False
    offer = next((o for o in s.offers.values() if o.kind == "step" and o.operation == fix
                  and o.record == record), None)
    if offer is not None:
        out.taken_offer = offer.id
    proceed(s, fix, args, out, offer=offer.id if offer else None, given={arg: new},
            record=record)
    return True
