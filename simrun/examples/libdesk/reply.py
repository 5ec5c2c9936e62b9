"""The turn result: what a turn built up (`Out`), finished into the reply the protocol carries.

`reply` is where every turn ends: the usual menu when nothing else is offered, a reason given to
a question asked again, the reply-level faults drawn, the card and buttons now on screen
remembered, and then what the desk knows it did wrong in this reply logged in the truth log,
planted or not; last, the turn's entry in the audit log (unless the audit_gap fault drops it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simrun.examples.libdesk.patron import VERB, Button, Draft, Patron
from simrun.examples.libdesk.truth import STAFF_NOTE


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


def menu(p: Patron) -> list[Button]:
    """What a patron may ask for, offered without checking first (the library may refuse)."""
    buttons = [Button(p.new_id("b"), "renew", rid, f"Renew {p.catalogue.records[rid]['title']}")
               for rid in p.catalogue.of_kind("loan")]
    for rid in p.catalogue.of_kind("hold"):
        title = p.catalogue.records[rid]["title"]
        buttons += [Button(p.new_id("b"), "move_pickup", rid, f"{VERB['move_pickup']} {title}"),
                    Button(p.new_id("b"), "cancel_hold", rid, f"{VERB['cancel_hold']} {title}")]
    return buttons + [Button(p.new_id("b"), "place_hold", None, "Place a hold on a book")]


def reply(p: Patron, out: Out) -> dict[str, Any]:
    t, saw, fire = p.turn, p.faults.saw, p.faults.fire
    card = out.card
    buttons = out.buttons if out.buttons is not None else ([] if card or out.ask else menu(p))
    ask, lines = out.ask, list(out.lines)
    again = ask is not None and (ask["operation"], ask["record"], tuple(ask["arguments"])) == p.last_ask
    if ask is not None and again and not ask["repeat_reason"] and not out.loop:
        ask["repeat_reason"] = f"I still need the {ask['arguments'][0]}"
    if buttons and not ask and not card:
        lines.append("What else can I do for you?")
    mentions = [p.card_id] if card else []
    if fire("dead_end"):
        buttons, card, ask, mentions = [], None, None, []
        lines = [line for line in lines if not line.endswith("?")] or ["Noted."]
    if card is not None and fire("card_not_actionable"):
        card = None            # named in the reply, and in mentions, but not sent
    receipts = list(out.receipts)
    if receipts and fire("phantom_receipt"):
        receipts.append(f"ev{len(p.catalogue.events) + 900:04d}")
    if fire("refusal_with_hedge"):
        out.refusal = out.hedge = True
        lines.insert(0, "I may be mistaken, but I can't fully help with that.")
    if fire("staff_note"):
        lines.append(f"({STAFF_NOTE})")
    text = " ".join(lines)
    verdicts = {"refusal_emitted": out.refusal, "hedge_injected": out.hedge}
    card_json = None
    if card is not None:
        assert p.card_buttons is not None       # set with the card (drafts.advance)
        yes, no = p.card_buttons
        card_json = {"id": mentions[0], "operation": "cancel_hold", "record": card.args["record"],
                     "arguments": {}, "actions": [{"id": yes.id, "label": yes.label},
                                                   {"id": no.id, "label": no.label}]}
        buttons_shown = [*buttons, yes, no]
    else:
        p.card = None          # a card not on screen cannot be confirmed
        buttons_shown = list(buttons)
    p.shown = {b.id: b for b in buttons_shown}
    p.ever.update(p.shown)
    p.last_ask = (ask["operation"], ask["record"], tuple(ask["arguments"])) if ask else None
    # What the desk knows it did wrong in this reply, planted or not.
    if not buttons and card is None and ask is None and not text.rstrip().endswith("?"):
        saw("dead_end", t, "a reply with nothing to do next")
    if again and ask is not None and ask["repeat_reason"] is None:
        saw("loop", t, "asked again for what was just answered")
    if not out.understood:
        saw("not_understood", t, "answered with a stub")
    committed = {e["id"] for e in p.catalogue.events if e["status"] == "committed"}
    if any(r not in committed for r in receipts):
        saw("phantom_receipt", t, "a receipt for no committed event")
    if any(m not in {card_json["id"] if card_json else None} for m in mentions):
        saw("card_not_actionable", t, "named a card it did not send")
    if out.refusal and out.hedge:
        saw("refusal_with_hedge", t, "refused and hedged")
    if STAFF_NOTE in text:
        saw("integrity_leak", t, "read out a staff note")
    if out.private and not out.refusal:
        saw("integrity_leak", t, "did not refuse another patron's details")
    last = p.audit[-1] if p.audit else None
    if fire("audit_gap"):
        saw("audit_gap", t, "left the turn out of the audit log")
    elif last and last["turn"] == t - 1 and last["surface"] != text and fire("audit_misfiled"):
        p.audit.append({**last, "turn": t})
        saw("audit_gap", t, f"filed turn {t - 1}'s entry under {t} and left its own out")
    else:
        p.audit.append({"turn": t, "surface": text, "verdicts": verdicts})
    return {
        "reply": text, "understood": out.understood, "taken_offer": out.taken, "ask": ask,
        "next_steps": [{"id": b.id, "operation": b.operation, "record": b.record, "arguments": {},
                        "label": b.label} for b in buttons],
        "card": card_json, "mentions": mentions, "receipts": receipts, "answer": out.answer,
        "verdicts": verdicts,
    }
