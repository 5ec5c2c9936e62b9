"""The turn result: what a turn built up (`Out`), finished into the reply the protocol carries.

`finish` is where every turn ends, stub turns included: it adds the next steps, lets the
reply-level faults act, owns up to what the reply does that a class describes (`own_up`, planted
or not: the runtime knows), remembers what is now on screen, and writes the turn event to the
audit stream (unless the audit_gap fault drops it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simrun.examples.tripdesk.faults import FORBIDDEN_NOTE
from simrun.examples.tripdesk.offers import Offer, card_offer, jsonable, next_steps
from simrun.examples.tripdesk.state import SessionState


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


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def ask_json(ask: dict[str, Any], repeat_reason: str | None) -> dict[str, Any]:
    return {"id": ask["id"], "operation": ask["operation"], "record": ask["record"],
            "arguments": list(ask["arguments"]), "repeat_reason": repeat_reason}


def card_json(card: dict[str, Any]) -> dict[str, Any]:
    return {"id": card["id"], "operation": f"confirm_{card['operation']}",
            "record": card["args"]["trip"], "arguments": jsonable(card["args"]),
            "actions": [{"id": card["confirm"], "label": "Confirm"},
                        {"id": card["decline"], "label": "Keep as it is"}]}


def finish(s: SessionState, out: Out) -> dict[str, Any]:
    t = s.turn
    steps = next_steps(s.store, s.focus, s.new_id) if out.show_steps and not out.card else []
    if steps and not out.ask:
        out.lines.append("What next?")
    reply = " ".join(out.lines)
    card, mentions = out.card, [out.card["id"]] if out.card else []
    ask = out.ask
    if s.faults.fires("dead_end", t):
        steps, card, ask, mentions = [], None, None, []
        reply = " ".join(line for line in out.lines if not line.endswith("?")) or "Noted."
        reply = reply.rstrip("?") + ("" if reply.endswith(".") else ".")
    receipts = list(out.receipts)
    if receipts and s.faults.fires("phantom_receipt", t):
        receipts.append(f"e-{len(s.store.events) + 100}")
    if card and s.faults.fires("card_not_actionable", t):
        card = None
    if s.faults.fires("refusal_with_hedge", t):
        out.refusal = out.hedge = True
        reply = "I might be wrong, but I can't fully do that. " + reply
    if s.faults.fires("forbidden_phrase", t):
        reply = f"{reply} ({FORBIDDEN_NOTE})"
    verdicts = {"refusal_emitted": out.refusal, "hedge_injected": out.hedge,
                "identity_score": None if out.stub else 1.0, "safety": None, "ethics": None}
    own_up(s, t, out, reply, steps, card, ask, mentions, receipts)
    s.shown_ask = (ask["operation"], ask["record"], tuple(sorted(ask["arguments"]))) if ask else None
    if card is None:
        s.card = None   # a card no longer on screen cannot be confirmed
    shown = list(steps)
    if card:
        assert s.card is not None       # a card shown is the one pending
        shown += [card_offer(s.card, "confirm"), card_offer(s.card, "decline")]
    s.offers = {o.id: o for o in shown}
    s.history.update(s.offers)
    own = {"turn": t, "surface": reply, "verdicts": verdicts, "stub": out.stub}
    last = s.audit[-1] if s.audit else None
    if s.faults.fires("audit_gap", t):
        s.faults.saw("audit_gap", t, "left the turn out of the audit stream")
    elif last and last["turn"] == t - 1 and last["surface"] != reply and s.faults.fires("audit_misfiled", t):
        s.audit.append({**last, "turn": t})
        s.faults.saw("audit_gap", t, f"filed turn {t - 1}'s event under {t}, and left its own out")
    else:
        s.audit.append(own)
    return {
        "reply": reply, "understood": out.understood, "taken_offer": out.taken_offer,
        "ask": ask, "next_steps": [o.as_step() for o in steps], "card": card,
        "mentions": mentions, "receipts": receipts, "answer": out.answer,
        "verdicts": verdicts,
    }


def own_up(s: SessionState, t: int, out: Out, reply: str, steps: list[Offer], card: dict[str, Any] | None,
           ask: dict[str, Any] | None, mentions: list[str], receipts: list[str]) -> None:
    """Log what this reply does that a class describes, planted or not: the runtime knows."""
    saw = s.faults.saw
    if not steps and not card and not ask and not reply.rstrip().endswith("?"):
        saw("dead_end", t, "a reply with no way forward")
    if ask and not ask["repeat_reason"] and s.shown_ask == (ask["operation"], ask["record"],
                                                             tuple(sorted(ask["arguments"]))):
        saw("loop", t, "the same ask again, with no reason")
    if not out.understood:
        saw("not_understood", t, "a stub turn")
    committed = {e["id"] for e in s.store.events if e["status"] == "committed"}
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
