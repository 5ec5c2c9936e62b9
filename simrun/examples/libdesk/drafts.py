"""A command put together over turns, then carried out; and a correction of one.

A button or a request starts a `Draft`; each message fills in what it gives (which loan or hold,
how many weeks, which branch, which title) and `advance` asks for what is still missing, one
thing at a time, until the draft is complete. A hold's cancellation then waits on a card; any
other command is carried out at once, naming the last button pressed for it as the event's
offer. The faults that act when a command is carried out (refused_offer, wrong_record) act here,
and what they, or a stale click, made the desk do is logged here too.
"""

from __future__ import annotations

import re
from typing import Any

from simrun.examples.libdesk.catalogue import BRANCHES, KIND_OF, MAX_WEEKS, NEEDS, Catalogue
from simrun.examples.libdesk.patron import VERB, Button, Draft, Patron
from simrun.examples.libdesk.reply import Out
from simrun.examples.libdesk.words import CHIT_CHAT, Reading, a_title, count, long_date


def named(p: Patron, kind: str, r: Reading) -> str | None:
    """The first record of this kind whose title the message names."""
    return next((rid for t in r.titles for rid in [p.catalogue.titled(kind, t)] if rid), None)


def fill(p: Patron, draft: Draft, r: Reading) -> list[str]:
    """Put what the message gives into the draft; the names filled."""
    filled = []
    if "record" not in draft.args and draft.operation != "place_hold":
        record = named(p, KIND_OF[draft.operation], r)
        if record:
            draft.args["record"] = record
            filled.append("record")
    if draft.operation == "renew" and r.weeks is not None:
        draft.args["weeks"] = r.weeks
        filled.append("weeks")
    if draft.operation in ("place_hold", "move_pickup") and r.branch:
        draft.args["branch"] = r.branch
        filled.append("branch")
    if draft.operation == "place_hold" and "title" not in draft.args:
        title = r.new_title or (_bare_title(r.text) if draft.asking == "title" else None)
        if title:
            draft.args["title"] = title
            filled.append("title")
    return filled


def _bare_title(text: str) -> str | None:
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s and not CHIT_CHAT.search(s)]
    return a_title(sentences[0]) if len(sentences) == 1 else None


def correct(p: Patron, r: Reading, out: Out) -> bool:
    """"Sorry, I meant 3 weeks": the draft takes the new value, or what was just done is amended."""
    values = {k: v for k, v in (("weeks", r.weeks), ("branch", r.branch)) if v is not None}
    if not values:
        return False
    if p.draft is not None and any(k in NEEDS[p.draft.operation] for k in values):
        fill(p, p.draft, r)
        advance(p, p.draft, out)
        return True
    if p.last_done is None:
        return False
    command, record, args = p.last_done
    changed = {k: v for k, v in values.items() if k in args and args[k] != v}
    if not changed:
        return False
    weeks = changed.get("weeks")
    if isinstance(weeks, int) and not 1 <= weeks <= MAX_WEEKS:     # (weeks, when given, are a number)
        return False
    event = p.catalogue.amend(command, record, {**changed, "was": args.get("weeks")}, turn=p.turn)
    p.last_done = (command, record, {**args, **changed})
    out.receipts.append(event["id"])
    out.lines.append("Corrected. " + done_line(p.catalogue, command, record, {**args, **changed}))
    return True


def advance(p: Patron, draft: Draft, out: Out) -> None:
    """Ask for the first thing the draft still lacks; when it lacks nothing, put it on a card (a
    hold's cancellation) or carry it out."""
    if "record" in NEEDS[draft.operation] and "record" not in draft.args:
        only = p.catalogue.of_kind(KIND_OF[draft.operation])
        if len(only) == 1:
            draft.args["record"] = only[0]
    missing = [n for n in NEEDS[draft.operation] if n not in draft.args]
    if missing:
        return ask(p, draft, missing[0], out)
    p.draft = None
    if draft.operation == "cancel_hold":
        title = p.catalogue.records[draft.args["record"]]["title"]
        out.lines.append(f"Cancel your hold on {title}? Please confirm on the card.")
        p.card = out.card = draft
        p.card_id = p.new_id("k")
        yes, no = Button(p.new_id("b"), "confirm", draft.args["record"], "Yes, cancel it", draft), \
            Button(p.new_id("b"), "keep", draft.args["record"], "No, keep it")
        p.card_buttons = (yes, no)
        return None
    return carry_out(p, draft, out)


def ask(p: Patron, draft: Draft, name: str, out: Out, reason: str | None = None) -> None:
    draft.asking = name
    kind = KIND_OF[draft.operation]
    questions = {
        "record": f"Which {kind} do you mean?",
        "weeks": f"For how many weeks (one to {count(MAX_WEEKS, 'week').split()[0]})?",
        "title": "Which book would you like to reserve?",
        "branch": f"At which branch would you like to collect it: {', '.join(BRANCHES[:-1])} or {BRANCHES[-1]}?",
    }
    out.lines.append(questions[name])
    out.ask = {"id": p.new_id("q"), "operation": draft.operation, "record": draft.args.get("record"),
               "arguments": [name], "repeat_reason": reason}
    out.buttons = []
    if name == "record":
        out.buttons = [Button(p.new_id("b"), draft.operation, rid,
                              f"{VERB[draft.operation]} {p.catalogue.records[rid]['title']}")
                       for rid in p.catalogue.of_kind(kind)]


def carry_out(p: Patron, draft: Draft, out: Out) -> None:
    command, args = draft.operation, draft.args
    refuse = "the catalogue is being updated" if draft.offer and draft.fresh \
        and p.faults.fire("refused_offer") else None
    onto = None
    if refuse is None and command != "place_hold" and p.catalogue.check(command, args) is None:
        others = [rid for rid in p.catalogue.of_kind(KIND_OF[command]) if rid != args["record"]
                  and p.catalogue.check(command, {**args, "record": rid}) is None]
        if others and p.faults.fire("wrong_record"):
            onto = others[0]
    event = p.catalogue.execute(command, args, turn=p.turn, offer=draft.offer, refuse=refuse, onto=onto)
    if event["status"] == "refused":
        out.lines.append(f"Sorry, I couldn't do that: {event['reason']}.")
        if draft.offer and draft.fresh:
            p.faults.saw("refused_offer", p.turn, f"refused {command} taken from {draft.offer}")
        return
    out.receipts.append(event["id"])
    if event["record"] != args.get("record") and command != "place_hold":
        p.faults.saw("wrong_record", p.turn, f"{command} written on {event['record']}, not {args['record']}")
    if draft.stale:
        p.faults.saw("stale_click", p.turn, f"{command} carried out from expired button {draft.offer}")
    p.last_done = (command, event["record"], {k: v for k, v in args.items() if k != "record"})
    out.lines.append(done_line(p.catalogue, command, event["record"], args))


def done_line(catalogue: Catalogue, command: str, record: str, args: dict[str, Any]) -> str:
    rec = catalogue.records[record]
    if command == "renew":
        return (f"Renewed {rec['title']} for {count(int(args['weeks']), 'week')}: it is now due back on "
                f"{long_date(rec['due'])}.")
    if command == "place_hold":
        return f"Placed a hold on {rec['title']}, to collect at {rec['branch']} when it comes in."
    if command == "move_pickup":
        return f"{rec['title']} will now wait for you at {rec['branch']}."
    return f"Cancelled your hold on {rec['title']}."
