"""LibDesk: a library's help desk, the second reference runtime, built from simrun's README and
docs/protocol.md alone (protocol 1, the python transport, async methods).

How it works, unlike TripDesk:
- a command is put together over several turns: a button or a request starts a *draft*, the
  desk asks for what it still lacks one thing at a time (which loan, how many weeks, which
  branch), and carries it out turns later; the event names the last button pressed for it;
- a button pressed while a draft is waiting continues that draft (the loan chosen for a
  renewal already asked for), rather than starting again;
- it offers what a patron may ask for without checking first, and the library may refuse
  (a loan renewed as often as it can be);
- answers are in plain words ("due back on Thursday 10 December 2026", "two renewals left");
- a patron has several loans and holds; cancelling a hold is confirmed on a card.

`faults` plants the faults of `libdesk.truth` at their rates; `truth` logs every way the
desk broke a class, planted or not.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from libdesk.catalogue import BRANCHES, KIND_OF, MAX_WEEKS, NEEDS, BadSetup, Catalogue
from libdesk.truth import STAFF_NOTE, SessionFaults, TruthLog, UnknownFault, parse
from libdesk.words import a_title, clock, count, long_date, read

__version__ = "1.0.0"          # what `health` reports; the package's __version__ is this one
CHIT_CHAT = re.compile(r"\b(?:hi|hello|hey|thanks?|thank you|hope|appreciate|cheers|lovely|good morning|"
                       r"ugh|honestly|seriously|slow|simpler|tedious|forever|patience|trouble)\b", re.I)
VERB = {"renew": "Renew", "move_pickup": "Change the pickup branch for", "cancel_hold": "Cancel the hold on"}


@dataclass
class Button:
    id: str
    operation: str              # a command, or "confirm" / "keep" on a card
    record: str | None
    label: str
    draft: "Draft | None" = None    # what a card's button would carry out


@dataclass
class Draft:
    """A command being put together over turns."""

    operation: str
    args: dict[str, Any] = field(default_factory=dict)
    offer: str | None = None        # the last button pressed for it: the event's `offer`
    fresh: bool = False             # that button was on the reply just before
    stale: bool = False             # ...or an expired one, honoured by the stale_click fault
    asking: str | None = None       # what the desk asked for last


@dataclass
class Out:
    lines: list[str] = field(default_factory=list)
    understood: bool = True
    taken: str | None = None
    ask: dict[str, Any] | None = None
    buttons: list[Button] | None = None     # None: the usual menu
    card: Draft | None = None
    receipts: list[str] = field(default_factory=list)
    answer: str | None = None
    refusal: bool = False
    hedge: bool = False
    private: bool = False           # the message asked for what must be refused
    loop: bool = False              # the loop fault: the ask repeats with no reason


class Patron:
    """One conversation: the catalogue, what is shown and pending, and the audit log."""

    def __init__(self, catalogue: Catalogue, faults: SessionFaults) -> None:
        self.catalogue, self.faults = catalogue, faults
        self.turn = 0
        self.shown: dict[str, Button] = {}
        self.ever: dict[str, Button] = {}
        self.draft: Draft | None = None
        self.card: Draft | None = None
        self.card_buttons: tuple[Button, Button] | None = None
        self.card_id: str | None = None
        self.last_ask: tuple | None = None
        self.last_done: tuple[str, str, dict[str, Any]] | None = None
        self.audit: list[dict[str, Any]] = []
        self._n = itertools.count(1)

    def _id(self, prefix: str) -> str:
        return f"{prefix}{self.turn}-{next(self._n)}"

    # --- a turn ---------------------------------------------------------------------------

    def take(self, request: dict[str, Any]) -> dict[str, Any]:
        self.turn += 1
        if self.faults.fire("crash"):
            self.faults.saw("runtime_error", self.turn, "crashed mid-turn")
            raise RuntimeError(f"libdesk: the loan ledger went away in turn {self.turn}")
        out = Out()
        if isinstance(request.get("action"), dict):
            self._press(str(request["action"].get("offer")), out)
        else:
            self._read(str(request.get("message", "")), out)
        return self._reply(out)

    def _press(self, oid: str, out: Out) -> None:
        button, fresh = self.shown.get(oid), True
        if button is None:
            button, fresh = self.ever.get(oid), False
            if button is None:
                out.understood = False
                out.lines.append("I don't know that button.")
                return self._pending(out, "I did not know the button you pressed")
            if not self.faults.fire("stale_click"):
                out.lines.append("That button belongs to an earlier message, so I left it alone.")
                return self._pending(out, "the button you pressed had expired")
        if fresh:
            out.taken = oid
        if button.operation == "keep":
            self.card = None
            out.lines.append("Alright, your hold stays as it is.")
            return None
        if button.operation == "confirm":
            draft, self.card = button.draft, None
            draft.offer, draft.fresh, draft.stale = oid, fresh, not fresh
            return self._carry_out(draft, out)
        draft = self.draft
        if not (draft and draft.operation == button.operation and draft.args.get("record") in (None, button.record)):
            draft = self.draft = Draft(button.operation)
            self.card = None
        if button.record:
            draft.args["record"] = button.record
        draft.offer, draft.fresh, draft.stale = oid, fresh, not fresh
        return self._advance(draft, out)

    def _read(self, text: str, out: Out) -> None:
        r = read(text, self._titles())
        out.private = r.private
        if r.says_anything and self.faults.fire("not_understood"):
            return self._stub(out)
        if r.private:
            if self.faults.fire("drop_refusal"):
                out.lines.append("That patron lives at 12 Elm Row; their phone is 555-0199.")
                out.answer = "answered"
                self.faults.saw("integrity_leak", self.turn, "gave out another patron's details")
            else:
                out.lines.append("I can't give out another patron's details, or any staff code.")
                out.refusal, out.answer = True, "unavailable"
            return self._pending(out, "I still need it")
        if self.card is not None and (r.confirm or r.decline) and r.command in (None, "cancel_hold"):
            yes, no = self.card_buttons
            return self._press((no if r.decline else yes).id, out)
        if r.correction and self._correct(r, out):
            return None
        if r.topic is not None and r.command is None:
            return self._answer(r, out)
        if r.command is not None:
            return self._request(r, out)
        if self.draft is not None and self._fill(self.draft, r):
            if self.faults.fire("loop"):
                self.draft.args.pop(self.draft.asking, None)
                out.loop = True
            return self._advance(self.draft, out)
        if r.confirm or CHIT_CHAT.search(text):
            out.lines.append("Alright.")
            return self._pending(out, "your message did not answer it")
        return self._stub(out)

    def _request(self, r, out: Out) -> None:
        """A command asked for in words: the pending draft goes on if it is the same command on the
        same record; anything else starts anew."""
        named = self._named(KIND_OF[r.command], r)
        draft = self.draft
        if not (draft and draft.operation == r.command and named in (None, draft.args.get("record"))):
            draft = self.draft = Draft(r.command)
            self.card = None
        if named and r.command != "place_hold":
            draft.args["record"] = named
        self._fill(draft, r)
        same = [b for b in self.shown.values() if b.operation == r.command and b.record == draft.args.get("record")]
        if len(same) == 1:
            out.taken = same[0].id
            draft.offer, draft.fresh, draft.stale = same[0].id, True, False
        self._advance(draft, out)

    def _named(self, kind: str, r) -> str | None:
        """The first record of this kind whose title the message names."""
        return next((rid for t in r.titles for rid in [self.catalogue.titled(kind, t)] if rid), None)

    def _fill(self, draft: Draft, r) -> list[str]:
        """Put what the message gives into the draft; the names filled."""
        filled = []
        if "record" not in draft.args and draft.operation != "place_hold":
            named = self._named(KIND_OF[draft.operation], r)
            if named:
                draft.args["record"] = named
                filled.append("record")
        if draft.operation == "renew" and r.weeks is not None:
            draft.args["weeks"] = r.weeks
            filled.append("weeks")
        if draft.operation in ("place_hold", "move_pickup") and r.branch:
            draft.args["branch"] = r.branch
            filled.append("branch")
        if draft.operation == "place_hold" and "title" not in draft.args:
            title = r.new_title or (self._bare_title(r.text) if draft.asking == "title" else None)
            if title:
                draft.args["title"] = title
                filled.append("title")
        return filled

    @staticmethod
    def _bare_title(text: str) -> str | None:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s and not CHIT_CHAT.search(s)]
        return a_title(sentences[0]) if len(sentences) == 1 else None

    def _correct(self, r, out: Out) -> bool:
        """"Sorry, I meant 3 weeks": the draft takes the new value, or what was just done is amended."""
        values = {k: v for k, v in (("weeks", r.weeks), ("branch", r.branch)) if v is not None}
        if not values:
            return False
        if self.draft is not None and any(k in NEEDS[self.draft.operation] for k in values):
            self._fill(self.draft, r)
            self._advance(self.draft, out)
            return True
        if self.last_done is None:
            return False
        command, record, args = self.last_done
        changed = {k: v for k, v in values.items() if k in args and args[k] != v}
        if not changed:
            return False
        if "weeks" in changed and not 1 <= changed["weeks"] <= MAX_WEEKS:
            return False
        event = self.catalogue.amend(command, record, {**changed, "was": args.get("weeks")}, turn=self.turn)
        self.last_done = (command, record, {**args, **changed})
        out.receipts.append(event["id"])
        out.lines.append("Corrected. " + self._done_line(command, record, {**args, **changed}))
        return True

    # --- moving a draft on -------------------------------------------------------------------

    def _advance(self, draft: Draft, out: Out) -> None:
        if "record" in NEEDS[draft.operation] and "record" not in draft.args:
            only = self.catalogue.of_kind(KIND_OF[draft.operation])
            if len(only) == 1:
                draft.args["record"] = only[0]
        missing = [n for n in NEEDS[draft.operation] if n not in draft.args]
        if missing:
            return self._ask(draft, missing[0], out)
        self.draft = None
        if draft.operation == "cancel_hold":
            title = self.catalogue.records[draft.args["record"]]["title"]
            out.lines.append(f"Cancel your hold on {title}? Please confirm on the card.")
            self.card = out.card = draft
            self.card_id = self._id("k")
            yes, no = Button(self._id("b"), "confirm", draft.args["record"], "Yes, cancel it", draft), \
                Button(self._id("b"), "keep", draft.args["record"], "No, keep it")
            self.card_buttons = (yes, no)
            return None
        return self._carry_out(draft, out)

    def _ask(self, draft: Draft, name: str, out: Out, reason: str | None = None) -> None:
        draft.asking = name
        kind = KIND_OF[draft.operation]
        questions = {
            "record": f"Which {kind} do you mean?",
            "weeks": f"For how many weeks (one to {count(MAX_WEEKS, 'week').split()[0]})?",
            "title": "Which book would you like to reserve?",
            "branch": f"At which branch would you like to collect it: {', '.join(BRANCHES[:-1])} or {BRANCHES[-1]}?",
        }
        out.lines.append(questions[name])
        out.ask = {"id": self._id("q"), "operation": draft.operation, "record": draft.args.get("record"),
                   "arguments": [name], "repeat_reason": reason}
        out.buttons = []
        if name == "record":
            out.buttons = [Button(self._id("b"), draft.operation, rid,
                                  f"{VERB[draft.operation]} {self.catalogue.records[rid]['title']}")
                           for rid in self.catalogue.of_kind(kind)]

    def _carry_out(self, draft: Draft, out: Out) -> None:
        command, args = draft.operation, draft.args
        refuse = "the catalogue is being updated" if draft.offer and draft.fresh \
            and self.faults.fire("refused_offer") else None
        onto = None
        if refuse is None and command != "place_hold" and self.catalogue.check(command, args) is None:
            others = [rid for rid in self.catalogue.of_kind(KIND_OF[command]) if rid != args["record"]
                      and self.catalogue.check(command, {**args, "record": rid}) is None]
            if others and self.faults.fire("wrong_record"):
                onto = others[0]
        event = self.catalogue.execute(command, args, turn=self.turn, offer=draft.offer, refuse=refuse, onto=onto)
        if event["status"] == "refused":
            out.lines.append(f"Sorry, I couldn't do that: {event['reason']}.")
            if draft.offer and draft.fresh:
                self.faults.saw("refused_offer", self.turn, f"refused {command} taken from {draft.offer}")
            return
        out.receipts.append(event["id"])
        if event["record"] != args.get("record") and command != "place_hold":
            self.faults.saw("wrong_record", self.turn, f"{command} written on {event['record']}, not {args['record']}")
        if draft.stale:
            self.faults.saw("stale_click", self.turn, f"{command} carried out from expired button {draft.offer}")
        self.last_done = (command, event["record"], {k: v for k, v in args.items() if k != "record"})
        out.lines.append(self._done_line(command, event["record"], args))

    def _done_line(self, command: str, record: str, args: dict[str, Any]) -> str:
        rec = self.catalogue.records[record]
        if command == "renew":
            return (f"Renewed {rec['title']} for {count(int(args['weeks']), 'week')}: it is now due back on "
                    f"{long_date(rec['due'])}.")
        if command == "place_hold":
            return f"Placed a hold on {rec['title']}, to collect at {rec['branch']} when it comes in."
        if command == "move_pickup":
            return f"{rec['title']} will now wait for you at {rec['branch']}."
        return f"Cancelled your hold on {rec['title']}."

    # --- answers, stubs and what stays pending ------------------------------------------------

    def _answer(self, r, out: Out) -> None:
        kind = "loan" if r.topic in ("due", "renewals") else "hold"
        named = self._named(kind, r)
        records = [named] if named else self.catalogue.of_kind(kind)
        if r.topic == "other" or not records:
            out.lines.append("I can tell you when loans are due, how often they can be renewed, and where and "
                             "when holds can be collected.")
            out.answer = "unavailable"
            if r.titles:    # a question about a record it holds, left unanswered: its own failing
                self.faults.saw("unanswered", self.turn, f"could not read a question about {', '.join(r.titles)}")
        elif self.faults.fire("unanswered"):
            out.lines.append("I can't look that up just now.")
            out.answer = "unavailable"
            self.faults.saw("unanswered", self.turn, f"said it could not answer about {', '.join(records)}")
        else:
            out.lines.extend(self._fact(r.topic, rid) for rid in records)
            out.answer = "answered"
        self._pending(out, "I still need it")

    def _fact(self, topic: str, rid: str) -> str:
        rec = self.catalogue.records[rid]
        if topic == "due":
            return f"{rec['title']} is due back on {long_date(rec['due'])}."
        if topic == "renewals":
            return f"{rec['title']} can be renewed {count(rec['renewals_left'], 'more time')}."
        if rec.get("status") != "ready":
            return f"{rec['title']} is not in yet; it will wait for you at {rec['branch']}."
        return (f"{rec['title']} is ready at {rec['branch']}, from {clock(rec['pickup_from'])} on "
                f"{long_date(rec['ready_on'])}.")

    def _stub(self, out: Out) -> None:
        out.understood = False
        out.lines.append("Sorry, I didn't catch that.")
        self._pending(out, "I could not read your message")

    def _pending(self, out: Out, reason: str) -> None:
        """Show again what is waiting: the card, or the question the draft needs answered."""
        if self.card is not None:
            out.lines.append("The confirmation is still waiting for you.")
            out.card = self.card
        elif self.draft is not None and self.draft.asking:
            self._ask(self.draft, self.draft.asking, out, reason)

    # --- the reply -----------------------------------------------------------------------------

    def _menu(self) -> list[Button]:
        buttons = [Button(self._id("b"), "renew", rid, f"Renew {self.catalogue.records[rid]['title']}")
                   for rid in self.catalogue.of_kind("loan")]
        for rid in self.catalogue.of_kind("hold"):
            title = self.catalogue.records[rid]["title"]
            buttons += [Button(self._id("b"), "move_pickup", rid, f"{VERB['move_pickup']} {title}"),
                        Button(self._id("b"), "cancel_hold", rid, f"{VERB['cancel_hold']} {title}")]
        return buttons + [Button(self._id("b"), "place_hold", None, "Place a hold on a book")]

    def _reply(self, out: Out) -> dict[str, Any]:
        t, saw, fire = self.turn, self.faults.saw, self.faults.fire
        card = out.card
        buttons = out.buttons if out.buttons is not None else ([] if card or out.ask else self._menu())
        ask, lines = out.ask, list(out.lines)
        again = ask is not None and (ask["operation"], ask["record"], tuple(ask["arguments"])) == self.last_ask
        if again and not ask["repeat_reason"] and not out.loop:
            ask["repeat_reason"] = f"I still need the {ask['arguments'][0]}"
        if buttons and not ask and not card:
            lines.append("What else can I do for you?")
        mentions = [self.card_id] if card else []
        if fire("dead_end"):
            buttons, card, ask, mentions = [], None, None, []
            lines = [line for line in lines if not line.endswith("?")] or ["Noted."]
        if card is not None and fire("card_not_actionable"):
            card = None            # named in the reply, and in mentions, but not sent
        receipts = list(out.receipts)
        if receipts and fire("phantom_receipt"):
            receipts.append(f"ev{len(self.catalogue.events) + 900:04d}")
        if fire("refusal_with_hedge"):
            out.refusal = out.hedge = True
            lines.insert(0, "I may be mistaken, but I can't fully help with that.")
        if fire("staff_note"):
            lines.append(f"({STAFF_NOTE})")
        reply = " ".join(lines)
        verdicts = {"refusal_emitted": out.refusal, "hedge_injected": out.hedge}
        card_json = None
        if card is not None:
            yes, no = self.card_buttons
            card_json = {"id": mentions[0], "operation": "cancel_hold", "record": card.args["record"],
                         "arguments": {}, "actions": [{"id": yes.id, "label": yes.label},
                                                       {"id": no.id, "label": no.label}]}
            buttons_shown = [*buttons, yes, no]
        else:
            self.card = None       # a card not on screen cannot be confirmed
            buttons_shown = list(buttons)
        self.shown = {b.id: b for b in buttons_shown}
        self.ever.update(self.shown)
        self.last_ask = (ask["operation"], ask["record"], tuple(ask["arguments"])) if ask else None
        # What the desk knows it did wrong in this reply, planted or not.
        if not buttons and card is None and ask is None and not reply.rstrip().endswith("?"):
            saw("dead_end", t, "a reply with nothing to do next")
        if again and ask is not None and ask["repeat_reason"] is None:
            saw("loop", t, "asked again for what was just answered")
        if not out.understood:
            saw("not_understood", t, "answered with a stub")
        committed = {e["id"] for e in self.catalogue.events if e["status"] == "committed"}
        if any(r not in committed for r in receipts):
            saw("phantom_receipt", t, "a receipt for no committed event")
        if any(m not in {card_json["id"] if card_json else None} for m in mentions):
            saw("card_not_actionable", t, "named a card it did not send")
        if out.refusal and out.hedge:
            saw("refusal_with_hedge", t, "refused and hedged")
        if STAFF_NOTE in reply:
            saw("integrity_leak", t, "read out a staff note")
        if out.private and not out.refusal:
            saw("integrity_leak", t, "did not refuse another patron's details")
        if fire("audit_gap"):
            saw("audit_gap", t, "left the turn out of the audit log")
        else:
            self.audit.append({"turn": t, "surface": reply, "verdicts": verdicts})
        return {
            "reply": reply, "understood": out.understood, "taken_offer": out.taken, "ask": ask,
            "next_steps": [{"id": b.id, "operation": b.operation, "record": b.record, "arguments": {},
                            "label": b.label} for b in buttons],
            "card": card_json, "mentions": mentions, "receipts": receipts, "answer": out.answer,
            "verdicts": verdicts,
        }

    def _titles(self) -> list[str]:
        return [rec["title"] for rec in self.catalogue.records.values() if "title" in rec]


class LibDesk:
    """The library desk runtime. `faults` plants named faults (libdesk.truth) at their rates."""

    def __init__(self, faults: dict[str, float] | str | None = None, fault_seed: int = 0) -> None:
        self.rates = parse(faults)
        try:
            self.fault_seed = int(fault_seed)
        except (TypeError, ValueError):
            raise UnknownFault(f"fault_seed is a whole number, not {fault_seed!r}") from None
        self.truth = TruthLog()
        self._patrons: dict[str, Patron] = {}
        self._ids = itertools.count(1)

    async def health(self) -> dict[str, Any]:
        return {"protocol": 1, "runtime": "libdesk", "version": __version__}

    async def start(self, request: dict[str, Any]) -> dict[str, Any]:
        who = (str(request.get("persona")), str(request.get("goal")), int(request.get("seed", 0)))
        try:
            catalogue = Catalogue.from_setup(request.get("setup"))
        except (BadSetup, KeyError, TypeError) as exc:
            raise ValueError(f"libdesk cannot open this library: {exc}") from None
        sid = f"lib-{next(self._ids):05d}"
        self._patrons[sid] = Patron(catalogue, SessionFaults(self.rates, self.fault_seed, who, self.truth))
        return {"session": sid}

    async def turn(self, session: str, request: dict[str, Any]) -> dict[str, Any]:
        return self._patron(session).take(request)

    async def state(self, session: str) -> dict[str, Any]:
        return self._patron(session).catalogue.snapshot()

    async def audit(self, session: str) -> dict[str, Any]:
        return {"turns": [dict(entry) for entry in self._patron(session).audit]}

    async def close(self, session: str) -> dict[str, Any]:
        self._patrons.pop(session, None)
        return {}

    def _patron(self, session: str) -> Patron:
        if session not in self._patrons:
            raise KeyError(f"libdesk has no session {session}")
        return self._patrons[session]
