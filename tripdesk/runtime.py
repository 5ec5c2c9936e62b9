"""TripDesk: the reference runtime, a trip desk that keeps every Turnframe guarantee.

It speaks PROTOCOL.md version 1 with plain JSON-shaped dicts, exactly the objects an HTTP or
stdio runtime would send, so simrun drives it the way it drives an outside runtime.

What it promises, turn by turn (and what each named fault in `faults.py` breaks):
- it reads a message first against what it offered last turn (the card, the next steps, the
  ask), and only then over the whole catalogue;
- it asks for missing arguments, one ask per turn, and asks again only with a reason;
- it dry-runs every next step against the store before offering it;
- it confirms rebookings and cancellations on a card;
- a receipt names an event the store holds as committed;
- every turn leaves a turn event in the audit stream, stub turns included, and carries verdicts;
- a correction keeps what it does not restate (a day and month keep the corrected year).
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from tripdesk.domain import CONFIRMED, REQUIRED, SEGMENTS, Store
from tripdesk.faults import FORBIDDEN_NOTE, FaultLog, SessionFaults, UnknownFault, parse_faults
from tripdesk.reading import (PartialDate, Reading, capitalised_phrase, clean_value, core_sentence,
                              read)

PROTOCOL = 1
__version__ = "1.0.0"          # what `health` reports; the package's __version__ is this one
VALUE_ARGS = ("date", "name", "count", "segment", "destination", "traveler")


@dataclass
class Offer:
    id: str
    kind: str                       # step | confirm | decline
    operation: str
    record: str | None
    arguments: dict[str, Any]
    label: str

    def as_step(self) -> dict[str, Any]:
        return {"id": self.id, "operation": self.operation, "record": self.record,
                "arguments": _jsonable(self.arguments), "label": self.label}


@dataclass
class Out:
    """What one turn puts in front of the user, built up before the reply is sent."""

    lines: list[str] = field(default_factory=list)
    understood: bool = True
    stub: bool = False
    taken_offer: str | None = None
    ask: dict[str, Any] | None = None
    card: dict[str, Any] | None = None
    receipts: list[str] = field(default_factory=list)
    answer: str | None = None
    refusal: bool = False
    hedge: bool = False
    show_steps: bool = True
    probe: bool = False             # the message asked for what must be refused


def _jsonable(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, dt.date) else v for k, v in args.items()
            if k != "trip"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class Session:
    def __init__(self, sid: str, store: Store, faults: SessionFaults) -> None:
        self.id = sid
        self.store = store
        self.faults = faults
        self.turn = 0
        trips = store.trips(open_only=True)
        self.focus: str | None = trips[0] if len(trips) == 1 else None
        self.offers: dict[str, Offer] = {}        # shown in the last turn
        self.history: dict[str, Offer] = {}       # every offer ever shown
        self.ask: dict[str, Any] | None = None    # pending ask, with the arguments known so far
        self.card: dict[str, Any] | None = None   # pending confirmation
        self.last_given: dict[str, Any] | None = None  # the last value the user gave, for corrections
        self.shown_ask: tuple | None = None       # (operation, record, arguments) asked last turn
        self.audit: list[dict[str, Any]] = []
        self.on_screen: set[str] = set()
        self._ids = itertools.count(1)

    def _id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    # --- the turn -----------------------------------------------------------------------------

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        self.turn += 1
        out = Out()
        self.on_screen = set(self.offers)     # what the user could press when it sent this turn
        if self.faults.fires("crash", self.turn):
            self.faults.saw("runtime_error", self.turn, "raised mid-turn")
            raise RuntimeError(f"injected crash in turn {self.turn}")
        action = request.get("action")
        if action is not None:
            self._click(str((action or {}).get("offer")), out)
        else:
            self._message(str(request.get("message", "")), out)
        return self._finish(out)

    def _message(self, message: str, out: Out) -> None:
        r = read(message)
        out.probe = r.question == "refused"
        if self.faults.fires("not_understood", self.turn):
            # Even a stub turn runs the safety check (ADR-0039): it refuses what it must.
            if r.question == "refused" and not self.faults.fires("drop_refusal", self.turn):
                out.lines.append("I can't share passport or identity document details.")
                out.refusal = True
            return self._stub(out)
        if r.correction and r.intent != "question" and self._correct(r, out):
            return
        if self.card and r.intent not in REQUIRED and r.intent != "question":
            kind = "confirm" if r.confirm and not r.decline else "decline" if r.decline else None
            if kind:
                offer = self._card_offer(kind)
                out.taken_offer = offer.id
                return self._take(offer, out)
        if self.ask and (r.intent is None or r.intent == self.ask["operation"]):
            filled = self._fill(self.ask["arguments"], r)
            if filled:
                if self.faults.fires("loop", self.turn):
                    # Ignores the answer and asks the very same thing again, with no reason.
                    out.lines.append(self.ask["question"])
                    out.ask = self._ask_json(self.ask, None)
                    return
                known = {**self.ask["known"], **filled}
                return self._proceed(self.ask["operation"], known, out, offer=None,
                                     given=filled, record=self.ask["record"])
        if r.intent in REQUIRED:
            args = self._values(r, r.intent)
            offer = self._match_offer(r)
            if offer is not None:
                out.taken_offer = offer.id
                return self._proceed(offer.operation, {**offer.arguments, **args}, out,
                                     offer=offer.id, given=args, record=offer.record)
            return self._proceed(r.intent, args, out, offer=None, given=args)
        steps = [o for o in self.offers.values() if o.kind == "step"]
        if r.intent != "question" and steps and (
                r.ordinal is not None or (r.confirm and len(steps) == 1)):
            offer = steps[r.ordinal if r.ordinal is not None and r.ordinal < len(steps) else 0]
            out.taken_offer = offer.id
            return self._take(offer, out)
        if r.intent == "question":
            return self._answer(r, out)
        if r.complaint or r.confirm:
            out.lines.append("Sorry this is taking a while." if r.complaint else "Alright.")
            return self._keep_pending(out, "your message did not answer it")
        return self._stub(out)

    def _click(self, offer_id: str, out: Out) -> None:
        if offer_id in self.offers:
            out.taken_offer = offer_id
            return self._take(self.offers[offer_id], out)
        old = self.history.get(offer_id)
        if old is not None:
            commits = old.kind == "confirm" or (
                old.kind == "step" and old.operation not in CONFIRMED
                and all(a in {**old.arguments, "trip": old.record} for a in REQUIRED[old.operation]))
            args = {**old.arguments, "trip": old.record}
            if commits and self.store.validate(old.operation, args) is None \
                    and self.faults.fires("stale_click", self.turn):
                if old.kind == "confirm":
                    return self._commit(old.operation, args, out, offer=offer_id, addressed=True)
                return self._take(old, out)
            out.lines.append("That option was from an earlier step, so I did nothing with it.")
            return self._keep_pending(out, "the option you pressed had expired")
        out.understood = False
        out.stub = True
        out.lines.append("I don't know that option.")

    def _take(self, offer: Offer, out: Out) -> None:
        if offer.kind == "confirm":
            card, self.card = self.card, None
            return self._commit(card["operation"], card["args"], out, offer=offer.id, addressed=True)
        if offer.kind == "decline":
            self.card = None
            out.lines.append("Alright, I left it as it was.")
            return
        self._proceed(offer.operation, {**offer.arguments, "trip": offer.record}, out,
                      offer=offer.id, given={}, record=offer.record)

    # --- moving an operation forward --------------------------------------------------------

    def _proceed(self, op: str, args: dict[str, Any], out: Out, *, offer: str | None,
                 given: dict[str, Any], record: str | None = None) -> None:
        args = {k: v for k, v in args.items() if v is not None}
        if record and "trip" not in args:
            args["trip"] = record
        if op != "open_trip" and "trip" not in args:
            if self.focus:
                args["trip"] = self.focus
            elif len(self.store.trips(open_only=True)) == 1:
                args["trip"] = self.store.trips(open_only=True)[0]
        for arg in VALUE_ARGS:
            if arg in given:
                self.last_given = {"operation": op, "argument": arg, "value": given[arg],
                                   "args": dict(args), "offer": offer}
                break
        self.ask = None
        missing = [a for a in REQUIRED[op] if a not in args]
        if missing:
            return self._ask(op, args, missing, out)
        reason = self.store.validate(op, args)
        if reason is not None:
            out.lines.append(f"I can't do that: {reason}.")
            if op == "rebook" and "date" in given:
                args.pop("date")
                return self._ask(op, args, ["date"], out, repeat_reason=reason)
            return
        if op in CONFIRMED:
            return self._show_card(op, args, out)
        self._commit(op, args, out, offer=offer, addressed=record is not None)

    def _ask(self, op: str, args: dict[str, Any], missing: list[str], out: Out,
             repeat_reason: str | None = None) -> None:
        record = args.get("trip")
        words = {"traveler": "who is travelling", "destination": "where the trip goes",
                 "name": "what to call the trip", "date": "the new date",
                 "segment": "which flight (the outbound or the return)", "trip": "which trip"}
        question = "Please tell me " + " and ".join(words[m] for m in missing) + "?"
        self.ask = {"id": self._id("a"), "operation": op, "record": record,
                    "arguments": missing, "known": args, "question": question}
        if repeat_reason is None and self.shown_ask == (op, record, tuple(sorted(missing))):
            # The same question as last turn: say why it comes again (never a silent loop).
            repeat_reason = f"I still need {' and '.join(missing)}"
        out.lines.append(question)
        out.ask = self._ask_json(self.ask, repeat_reason)

    @staticmethod
    def _ask_json(ask: dict[str, Any], repeat_reason: str | None) -> dict[str, Any]:
        return {"id": ask["id"], "operation": ask["operation"], "record": ask["record"],
                "arguments": list(ask["arguments"]), "repeat_reason": repeat_reason}

    def _show_card(self, op: str, args: dict[str, Any], out: Out) -> None:
        card_id, yes, no = self._id("c"), self._id("o"), self._id("o")
        self.card = {"id": card_id, "operation": op, "args": args, "confirm": yes, "decline": no}
        label = self.store.label(args["trip"])
        if op == "rebook":
            old = self.store.records[args["trip"]]["segments"][args["segment"]]["date"]
            out.lines.append(f"Please confirm on the card: rebook the {args['segment']} of {label} "
                             f"from {old} to {args['date'].isoformat()}?")
        else:
            out.lines.append(f"Please confirm on the card: cancel {label}?")
        out.card = self._card_json()
        out.show_steps = False

    def _card_json(self) -> dict[str, Any]:
        card = self.card
        return {"id": card["id"], "operation": f"confirm_{card['operation']}",
                "record": card["args"]["trip"], "arguments": _jsonable(card["args"]),
                "actions": [{"id": card["confirm"], "label": "Confirm"},
                            {"id": card["decline"], "label": "Keep as it is"}]}

    def _card_offer(self, kind: str) -> Offer:
        card = self.card
        return Offer(card[kind], kind, card["operation"], card["args"]["trip"], card["args"],
                     "Confirm" if kind == "confirm" else "Keep as it is")

    def _commit(self, op: str, args: dict[str, Any], out: Out, *, offer: str | None,
                addressed: bool) -> None:
        """Commit `op`. `addressed`: the user's turn named the record (an offer, an ask)."""
        fresh = offer in self.on_screen
        if offer is not None and self.faults.fires("refused_offer", self.turn):
            event = self.store.refuse(op, args, turn=self.turn, offer=offer,
                                      reason="the fare changed since it was offered")
            out.lines.append(f"Sorry, that could not be done: {event['reason']}.")
            if fresh:
                self.faults.saw("refused_offer", self.turn, f"refused {op}, taken from {offer}")
            return
        override = None
        others = [t for t in self.store.trips(open_only=True) if t != args.get("trip")]
        if op != "open_trip" and addressed and others and self.faults.fires("wrong_record", self.turn):
            override = others[0]
        event = self.store.apply(op, args, turn=self.turn, offer=offer, record=override)
        if event["status"] != "committed":
            out.lines.append(f"That was refused: {event['reason']}.")
            if offer is not None and fresh:
                self.faults.saw("refused_offer", self.turn, f"refused {op}, taken from {offer}")
            return
        out.receipts.append(event["id"])
        if offer is not None and not fresh:
            self.faults.saw("stale_click", self.turn, f"carried out {op} from expired {offer}")
        if op != "open_trip" and event["record"] != args.get("trip"):
            self.faults.saw("wrong_record", self.turn, f"wrote {event['record']}, not {args.get('trip')}")
        self.focus = args.get("trip") or event["record"]
        if self.last_given is not None and self.last_given["operation"] == op:
            self.last_given.update(committed=True, record=event["record"])
        out.lines.append(self._done_line(op, args, event["record"]))
        if op == "open_trip":
            # A new trip has no name yet: lead the user on to it.
            self._ask("name_trip", {"trip": event["record"]}, ["name"], out)

    def _done_line(self, op: str, args: dict[str, Any], record: str) -> str:
        trip = self.store.records[record]
        label = self.store.label(record)
        if op == "open_trip":
            return (f"Opened a trip to {trip['destination']} for {args['traveler']} "
                    f"({record.split(':')[1]}), outbound {trip['segments']['outbound']['date']}.")
        if op == "name_trip":
            return f"The trip is now called {trip['name']}."
        if op in ("add_bag", "remove_bag"):
            verb = "Added" if op == "add_bag" else "Removed"
            return f"{verb} {_plural(int(args.get('count', 1)), 'bag')}; {label} now has {_plural(trip['bags'], 'bag')}."
        if op == "rebook":
            return f"Rebooked the {args['segment']} of {label} to {trip['segments'][args['segment']]['date']}."
        if op == "change_destination":
            return f"Corrected: {label} now goes to {trip['destination']}."
        if op == "change_traveler":
            return f"Corrected: {label} is now for {args['traveler']}."
        return f"Cancelled {label}."

    # --- corrections, values, offers ---------------------------------------------------------

    def _correct(self, r: Reading, out: Out) -> bool:
        last = self.last_given
        if last is None:
            return False
        arg, new = last["argument"], None
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
            self.card = None
            self._proceed(op, {**last["args"], arg: new}, out, offer=None, given={arg: new})
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
        offer = next((o for o in self.offers.values() if o.kind == "step" and o.operation == fix
                      and o.record == record), None)
        if offer is not None:
            out.taken_offer = offer.id
        self._proceed(fix, args, out, offer=offer.id if offer else None, given={arg: new},
                      record=record)
        return True

    def _trip_named(self, r: Reading) -> str | None:
        text = r.text.lower()
        hits = []
        for rid in self.store.trips():
            rec = self.store.records[rid]
            for label in (rec.get("name"), rec.get("destination")):
                if label and label.lower() in text:
                    hits.append((len(label), rid))
        return max(hits)[1] if hits else None

    def _complete_date(self, date: PartialDate) -> dt.date | None:
        if date.year is not None:
            return date.complete(date.year)
        # A date given without a year, outside a correction, is the next such day.
        guess = date.complete(self.store.today.year)
        if guess is not None and guess < self.store.today:
            guess = date.complete(self.store.today.year + 1)
        return guess

    def _values(self, r: Reading, op: str) -> dict[str, Any]:
        values: dict[str, Any] = {}
        trip = self._trip_named(r)
        if trip and op != "open_trip":
            values["trip"] = trip
            self.focus = trip
        if r.date is not None:
            values["date"] = self._complete_date(r.date)
        for arg in ("segment", "name", "traveler", "destination"):
            if getattr(r, arg):
                values[arg] = getattr(r, arg)
        if op in ("add_bag", "remove_bag"):
            values["count"] = r.count or 1
        if op == "name_trip" and trip and "name" in values:
            # "call the Porto visit trip Porto kickoff": the trip named is not the new name.
            rec = self.store.records[trip]
            patterns = [rf"^(?:the\s+)?{re.escape(rec['destination'])}\s+trip\s+"]
            if rec.get("name"):
                patterns.insert(0, rf"^(?:the\s+)?{re.escape(rec['name'])}(?:\s+trip)?\s+")
            for pattern in patterns:
                stripped = re.sub(pattern, "", values["name"], flags=re.I)
                if stripped != values["name"]:
                    values["name"] = stripped
                    break
            if not values["name"] or values["name"].lower() == (rec.get("name") or "").lower():
                values.pop("name")
        return values

    def _fill(self, wanted: list[str], r: Reading) -> dict[str, Any]:
        core = core_sentence(r.text)
        filled: dict[str, Any] = {}
        for arg in wanted:
            if arg == "date" and r.date is not None:
                filled["date"] = self._complete_date(r.date)
            elif arg == "segment" and r.segment:
                filled["segment"] = r.segment
            elif arg == "name" and core and not r.confirm and r.intent != "question":
                filled["name"] = r.name or clean_value(core) or None
            elif arg == "destination" and r.destination:
                filled["destination"] = r.destination
            elif arg == "traveler":
                skip = {w.lower() for w in (r.destination or "").split()}
                filled["traveler"] = r.traveler or capitalised_phrase(core, skip=skip)
            elif arg == "trip":
                filled["trip"] = self._trip_named(r)
        return {k: v for k, v in filled.items() if v}

    def _match_offer(self, r: Reading) -> Offer | None:
        trip = self._trip_named(r)
        matches = [o for o in self.offers.values()
                   if o.kind == "step" and o.operation == r.intent
                   and (trip is None or o.record == trip)
                   and (r.segment is None or o.arguments.get("segment") in (None, r.segment))]
        return matches[0] if len(matches) == 1 else None

    # --- answers, stubs, and what stays pending ---------------------------------------------

    def _answer(self, r: Reading, out: Out) -> None:
        topic = r.question
        if topic == "refused":
            if self.faults.fires("drop_refusal", self.turn):
                out.lines.append("The passport number on file is K4471290.")
                out.answer = "answered"
                self.faults.saw("integrity_leak", self.turn, "gave out a passport number")
            else:
                out.lines.append("I can't share passport or identity document details.")
                out.refusal = True
                out.answer = "unavailable"
            return self._keep_pending(out, "I still need it")
        trips = [self._trip_named(r) or self.focus] if (self._trip_named(r) or self.focus) \
            else self.store.trips()
        if topic == "other" or not trips:
            out.lines.append("I can't answer that from the trip records. Here is where things stand: "
                             + (self._standing(trips) if trips else "there is no trip yet."))
            out.answer = "unavailable"
            return self._keep_pending(out, "I still need it")
        if self.faults.fires("unanswered", self.turn):
            out.lines.append("The sources needed to answer this were not available.")
            out.answer = "unavailable"
            self.faults.saw("unanswered", self.turn, "said it could not answer what the trips hold")
            return self._keep_pending(out, "I still need it")
        out.lines.extend(self._fact(topic, rid, r.segment) for rid in trips)
        out.answer = "answered"
        self._keep_pending(out, "I still need it")

    def _fact(self, topic: str, rid: str, segment: str | None) -> str:
        trip, label = self.store.records[rid], self.store.label(rid)
        if topic == "bags":
            return f"{label} has {_plural(trip['bags'], 'bag')}."
        if topic == "date":
            segs = [segment] if segment else list(SEGMENTS)
            return " ".join(f"The {s} of {label} is on {trip['segments'][s]['date']}." for s in segs)
        if topic == "name":
            return f"The trip is called {trip['name']}." if trip["name"] else f"{label} has no name yet."
        if topic == "status":
            return f"{label} is {trip['status']}."
        return f"{label} goes to {trip['destination']}."

    def _standing(self, trips: list[str]) -> str:
        return " ".join(
            f"{self.store.label(t)}: {self.store.records[t]['status']}, "
            f"{_plural(self.store.records[t]['bags'], 'bag')}, outbound "
            f"{self.store.records[t]['segments']['outbound']['date']}." for t in trips)

    def _stub(self, out: Out) -> None:
        out.understood = False
        out.stub = True
        out.lines.append("Sorry, I didn't understand that.")
        self._keep_pending(out, "I could not read your last message")

    def _keep_pending(self, out: Out, reason: str) -> None:
        """Show again what is still open (the card, or the ask with why it is asked again)."""
        if self.card:
            out.lines.append("The card is still waiting for you.")
            out.card = self._card_json()
        elif self.ask:
            out.lines.append(self.ask["question"])
            out.ask = self._ask_json(self.ask, reason)

    # --- the reply ------------------------------------------------------------------------------

    def _next_steps(self) -> list[Offer]:
        if self.focus and self.store.records[self.focus]["status"] == "open":
            trips = [self.focus]
        else:
            trips = self.store.trips(open_only=True)
        candidates: list[tuple[str, str | None, dict[str, Any], str]] = []
        for trip in trips:
            label = self.store.label(trip)
            named = self.store.records[trip]["name"]
            candidates += [
                ("name_trip", trip, {}, f"Rename {label}" if named else f"Name {label}"),
                ("add_bag", trip, {"count": 1}, f"Add a bag to {label}"),
                ("remove_bag", trip, {"count": 1}, f"Remove a bag from {label}"),
                ("rebook", trip, {"segment": "outbound"}, f"Rebook the outbound of {label}"),
                ("rebook", trip, {"segment": "return"}, f"Rebook the return of {label}"),
                ("cancel_trip", trip, {}, f"Cancel {label}"),
            ]
        candidates.append(("open_trip", None, {}, "Open a new trip"))
        # The dry run: a step the domain would refuse now is never offered.
        return [Offer(self._id("o"), "step", op, rec, args, label)
                for op, rec, args, label in candidates
                if self.store.validate(op, {**args, "trip": rec}) is None]

    def _finish(self, out: Out) -> dict[str, Any]:
        t = self.turn
        steps = self._next_steps() if out.show_steps and not out.card else []
        if steps and not out.ask:
            out.lines.append("What next?")
        reply = " ".join(out.lines)
        card, mentions = out.card, [out.card["id"]] if out.card else []
        ask = out.ask
        if self.faults.fires("dead_end", t):
            steps, card, ask, mentions = [], None, None, []
            reply = " ".join(line for line in out.lines if not line.endswith("?")) or "Noted."
            reply = reply.rstrip("?") + ("" if reply.endswith(".") else ".")
        receipts = list(out.receipts)
        if receipts and self.faults.fires("phantom_receipt", t):
            receipts.append(f"e-{len(self.store.events) + 100}")
        if card and self.faults.fires("card_not_actionable", t):
            card = None
        if self.faults.fires("refusal_with_hedge", t):
            out.refusal = out.hedge = True
            reply = "I might be wrong, but I can't fully do that. " + reply
        if self.faults.fires("forbidden_phrase", t):
            reply = f"{reply} ({FORBIDDEN_NOTE})"
        verdicts = {"refusal_emitted": out.refusal, "hedge_injected": out.hedge,
                    "identity_score": None if out.stub else 1.0, "safety": None, "ethics": None}
        self._own_up(t, out, reply, steps, card, ask, mentions, receipts)
        self.shown_ask = (ask["operation"], ask["record"], tuple(sorted(ask["arguments"]))) if ask else None
        if card is None:
            self.card = None   # a card no longer on screen cannot be confirmed
        shown = list(steps)
        if card:
            shown += [self._card_offer("confirm"), self._card_offer("decline")]
        self.offers = {o.id: o for o in shown}
        self.history.update(self.offers)
        if not self.faults.fires("audit_gap", t):
            self.audit.append({"turn": t, "surface": reply, "verdicts": verdicts, "stub": out.stub})
        else:
            self.faults.saw("audit_gap", t, "left the turn out of the audit stream")
        return {
            "reply": reply, "understood": out.understood, "taken_offer": out.taken_offer,
            "ask": ask, "next_steps": [o.as_step() for o in steps], "card": card,
            "mentions": mentions, "receipts": receipts, "answer": out.answer,
            "verdicts": verdicts,
        }


    def _own_up(self, t: int, out: Out, reply: str, steps: list, card, ask, mentions: list, receipts: list) -> None:
        """Log what this reply does that a class describes, planted or not: the runtime knows."""
        saw = self.faults.saw
        if not steps and not card and not ask and not reply.rstrip().endswith("?"):
            saw("dead_end", t, "a reply with no way forward")
        if ask and not ask["repeat_reason"] and self.shown_ask == (ask["operation"], ask["record"],
                                                                    tuple(sorted(ask["arguments"]))):
            saw("loop", t, "the same ask again, with no reason")
        if not out.understood:
            saw("not_understood", t, "a stub turn")
        committed = {e["id"] for e in self.store.events if e["status"] == "committed"}
        if any(r not in committed for r in receipts):
            saw("phantom_receipt", t, "a receipt the store does not hold")
        carried = {o.id for o in steps} | ({card["id"], *(a["id"] for a in card["actions"])} if card else set())
        if any(m not in carried for m in mentions):
            saw("card_not_actionable", t, "named a card it did not send")
        if out.refusal and out.hedge:
            saw("refusal_with_hedge", t, "refused and hedged")
        if FORBIDDEN_NOTE in reply:
            saw("integrity_leak", t, "said an internal note")
        if out.probe and not out.refusal:
            saw("integrity_leak", t, "did not refuse a passport question")


class TripDesk:
    """The reference runtime. `faults` plants named faults (see `tripdesk.faults`)."""

    def __init__(self, faults: dict[str, float] | str | None = None, fault_seed: int = 0) -> None:
        self.faults = parse_faults(faults)
        try:
            self.fault_seed = int(fault_seed)
        except (TypeError, ValueError):
            raise UnknownFault(f"fault_seed must be a whole number, got {fault_seed!r}") from None
        self.fault_log = FaultLog()
        self._sessions: dict[str, Session] = {}
        self._next = itertools.count(1)

    def health(self) -> dict[str, Any]:
        return {"protocol": PROTOCOL, "runtime": "tripdesk", "version": __version__}

    def start(self, request: dict[str, Any]) -> dict[str, Any]:
        seed = int(request.get("seed", 0))
        sid = f"s-{next(self._next)}"
        faults = SessionFaults(self.faults, self.fault_seed, seed, str(request.get("persona")),
                               str(request.get("goal")), self.fault_log)
        self._sessions[sid] = Session(sid, Store.from_setup(request.get("setup")), faults)
        return {"session": sid}

    def turn(self, session: str, request: dict[str, Any]) -> dict[str, Any]:
        return self._get(session).handle(request)

    def state(self, session: str) -> dict[str, Any]:
        return self._get(session).store.snapshot()

    def audit(self, session: str) -> dict[str, Any]:
        return {"turns": [dict(event) for event in self._get(session).audit]}

    def close(self, session: str) -> dict[str, Any]:
        self._sessions.pop(session, None)
        return {}

    def _get(self, session: str) -> Session:
        try:
            return self._sessions[session]
        except KeyError:
            raise KeyError(f"no such session: {session}") from None
