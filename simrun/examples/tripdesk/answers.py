"""Answering what the user asks from the store; the stub turn; showing again what is pending.

A question is answered from the trip records, never guessed: what the records cannot answer is
said to be unavailable, with where things stand. A passport or identity question is refused.
Whatever the turn, an ask or a card still open is shown again, with the reason it comes again.
"""

from __future__ import annotations

from simrun.examples.tripdesk.domain import SEGMENTS, Store
from simrun.examples.tripdesk.reading import Reading
from simrun.examples.tripdesk.reply import Out, ask_json, card_json, plural
from simrun.examples.tripdesk.state import SessionState
from simrun.examples.tripdesk.values import trip_named


def answer(s: SessionState, r: Reading, out: Out) -> None:
    topic = r.question
    if topic == "refused":
        if s.faults.fires("drop_refusal", s.turn):
            out.lines.append("The passport number on file is K4471290.")
            out.answer = "answered"
            s.faults.saw("integrity_leak", s.turn, "gave out a passport number")
        else:
            out.lines.append("I can't share passport or identity document details.")
            out.refusal = True
            out.answer = "unavailable"
        return keep_pending(s, out, "I still need it")
    named = trip_named(s.store, r) or s.focus
    trips = [named] if named else s.store.trips()
    if topic == "other" or not trips:
        out.lines.append("I can't answer that from the trip records. Here is where things stand: "
                         + (standing(s.store, trips) if trips else "there is no trip yet."))
        out.answer = "unavailable"
        return keep_pending(s, out, "I still need it")
    if s.faults.fires("unanswered", s.turn):
        out.lines.append("The sources needed to answer this were not available.")
        out.answer = "unavailable"
        s.faults.saw("unanswered", s.turn, "said it could not answer what the trips hold")
        return keep_pending(s, out, "I still need it")
    out.lines.extend(fact(s.store, topic, rid, r.segment) for rid in trips)
    out.answer = "answered"
    keep_pending(s, out, "I still need it")


def fact(store: Store, topic: str | None, rid: str, segment: str | None) -> str:
    trip, label = store.records[rid], store.label(rid)
    if topic == "bags":
        return f"{label} has {plural(trip['bags'], 'bag')}."
    if topic == "date":
        segs = [segment] if segment else list(SEGMENTS)
        return " ".join(f"The {s} of {label} is on {trip['segments'][s]['date']}." for s in segs)
    if topic == "name":
        return f"The trip is called {trip['name']}." if trip["name"] else f"{label} has no name yet."
    if topic == "status":
        return f"{label} is {trip['status']}."
    return f"{label} goes to {trip['destination']}."


def standing(store: Store, trips: list[str]) -> str:
    return " ".join(
        f"{store.label(t)}: {store.records[t]['status']}, "
        f"{plural(store.records[t]['bags'], 'bag')}, outbound "
        f"{store.records[t]['segments']['outbound']['date']}." for t in trips)


def stub(s: SessionState, out: Out) -> None:
    out.understood = False
    out.stub = True
    out.lines.append("Sorry, I didn't understand that.")
    keep_pending(s, out, "I could not read your last message")


def keep_pending(s: SessionState, out: Out, reason: str) -> None:
    """Show again what is still open (the card, or the ask with why it is asked again)."""
    if s.card:
        out.lines.append("The card is still waiting for you.")
        out.card = card_json(s.card)
    elif s.ask:
        out.lines.append(s.ask["question"])
        out.ask = ask_json(s.ask, reason)
