"""Moving an operation forward: ask for what is missing, confirm on a card, or commit.

`proceed` is the one road every operation takes, whether it came from a click, an offer taken in
words, an answered ask or a correction. It keeps these guarantees:
- it asks for missing arguments, one ask per turn, and asks the same again only with a reason;
- rebookings and cancellations are confirmed on a card before they commit;
- a receipt names an event the store holds as committed (`commit` adds one only then).
The faults that act at commit time (refused_offer, wrong_record) act here, and what was done
because of them, or of a stale click, is owned up to here too.
"""

from __future__ import annotations

from typing import Any

from simrun.examples.tripdesk.domain import CONFIRMED, REQUIRED, Store
from simrun.examples.tripdesk.reply import Out, ask_json, card_json, plural
from simrun.examples.tripdesk.state import SessionState

VALUE_ARGS = ("date", "name", "count", "segment", "destination", "traveler")


def proceed(s: SessionState, op: str, args: dict[str, Any], out: Out, *, offer: str | None,
            given: dict[str, Any], record: str | None = None) -> None:
    args = {k: v for k, v in args.items() if v is not None}
    if record and "trip" not in args:
        args["trip"] = record
    if op != "open_trip" and "trip" not in args:
        if s.focus:
            args["trip"] = s.focus
        elif len(s.store.trips(open_only=True)) == 1:
            args["trip"] = s.store.trips(open_only=True)[0]
    for arg in VALUE_ARGS:
        if arg in given:
            s.last_given = {"operation": op, "argument": arg, "value": given[arg],
                            "args": dict(args), "offer": offer}
            break
    s.ask = None
    missing = [a for a in REQUIRED[op] if a not in args]
    if missing:
        return ask(s, op, args, missing, out)
    reason = s.store.validate(op, args)
    if reason is not None:
        out.lines.append(f"I can't do that: {reason}.")
        if op == "rebook" and "date" in given:
            args.pop("date")
            return ask(s, op, args, ["date"], out, repeat_reason=reason)
        return
    if op in CONFIRMED:
        return show_card(s, op, args, out)
    commit(s, op, args, out, offer=offer, addressed=record is not None)


def ask(s: SessionState, op: str, args: dict[str, Any], missing: list[str], out: Out,
        repeat_reason: str | None = None) -> None:
    record = args.get("trip")
    words = {"traveler": "who is travelling", "destination": "where the trip goes",
             "name": "what to call the trip", "date": "the new date",
             "segment": "which flight (the outbound or the return)", "trip": "which trip"}
    question = "Please tell me " + " and ".join(words[m] for m in missing) + "?"
    s.ask = {"id": s.new_id("a"), "operation": op, "record": record,
             "arguments": missing, "known": args, "question": question}
    if s.stale_origin:
        s.ask["stale"] = s.stale_origin     # what answers this ask answers that stale click
    if repeat_reason is None and s.shown_ask == (op, record, tuple(sorted(missing))):
        # The same question as last turn: say why it comes again (never a silent loop).
        repeat_reason = f"I still need {' and '.join(missing)}"
    out.lines.append(question)
    out.ask = ask_json(s.ask, repeat_reason)


def show_card(s: SessionState, op: str, args: dict[str, Any], out: Out) -> None:
    card_id, yes, no = s.new_id("c"), s.new_id("o"), s.new_id("o")
    s.card = {"id": card_id, "operation": op, "args": args, "confirm": yes, "decline": no}
    label = s.store.label(args["trip"])
    if op == "rebook":
        old = s.store.records[args["trip"]]["segments"][args["segment"]]["date"]
        out.lines.append(f"Please confirm on the card: rebook the {args['segment']} of {label} "
                         f"from {old} to {args['date'].isoformat()}?")
    else:
        out.lines.append(f"Please confirm on the card: cancel {label}?")
    out.card = card_json(s.card)
    out.show_steps = False


def commit(s: SessionState, op: str, args: dict[str, Any], out: Out, *, offer: str | None,
           addressed: bool) -> None:
    """Commit `op`. `addressed`: the user's turn named the record (an offer, an ask)."""
    fresh = offer in s.on_screen
    if offer is not None and s.faults.fires("refused_offer", s.turn):
        event = s.store.refuse(op, args, turn=s.turn, offer=offer,
                               reason="the fare changed since it was offered")
        out.lines.append(f"Sorry, that could not be done: {event['reason']}.")
        if fresh:
            s.faults.saw("refused_offer", s.turn, f"refused {op}, taken from {offer}")
        return
    override = None
    others = [t for t in s.store.trips(open_only=True) if t != args.get("trip")]
    if op != "open_trip" and addressed and others and s.faults.fires("wrong_record", s.turn):
        override = others[0]
    event = s.store.apply(op, args, turn=s.turn, offer=offer, record=override)
    if event["status"] != "committed":
        out.lines.append(f"That was refused: {event['reason']}.")
        if offer is not None and fresh:
            s.faults.saw("refused_offer", s.turn, f"refused {op}, taken from {offer}")
        return
    out.receipts.append(event["id"])
    if offer is not None and not fresh:
        s.faults.saw("stale_click", s.turn, f"carried out {op} from expired {offer}")
    elif offer is None and s.stale_origin:
        s.faults.saw("stale_click", s.turn, f"carried out {op}, asked for after a click on expired {s.stale_origin}")
    if op != "open_trip" and event["record"] != args.get("trip"):
        s.faults.saw("wrong_record", s.turn, f"wrote {event['record']}, not {args.get('trip')}")
    s.focus = args.get("trip") or event["record"]
    if s.last_given is not None and s.last_given["operation"] == op:
        s.last_given.update(committed=True, record=event["record"])
    out.lines.append(done_line(s.store, op, args, event["record"]))
    if op == "open_trip":
        # A new trip has no name yet: lead the user on to it.
        ask(s, "name_trip", {"trip": event["record"]}, ["name"], out)


def done_line(store: Store, op: str, args: dict[str, Any], record: str) -> str:
    trip = store.records[record]
    label = store.label(record)
    if op == "open_trip":
        return (f"Opened a trip to {trip['destination']} for {args['traveler']} "
                f"({record.split(':')[1]}), outbound {trip['segments']['outbound']['date']}.")
    if op == "name_trip":
        return f"The trip is now called {trip['name']}."
    if op in ("add_bag", "remove_bag"):
        verb = "Added" if op == "add_bag" else "Removed"
        return f"{verb} {plural(int(args.get('count', 1)), 'bag')}; {label} now has {plural(trip['bags'], 'bag')}."
    if op == "rebook":
        return f"Rebooked the {args['segment']} of {label} to {trip['segments'][args['segment']]['date']}."
    if op == "change_destination":
        return f"Corrected: {label} now goes to {trip['destination']}."
    if op == "change_traveler":
        return f"Corrected: {label} is now for {args['traveler']}."
    return f"Cancelled {label}."
