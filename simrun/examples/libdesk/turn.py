"""A LibDesk turn: a button pressed or a message read, routed to what handles it, then replied to.

A button pressed while a draft waits for the same command on the same record continues that
draft; an expired button is left alone unless the stale_click fault honours it. A message is
read for, in order: what must be refused, an answer to the card, a correction, a question, a
command, and what the pending draft still lacks.
"""

from __future__ import annotations

from typing import Any

from simrun.examples.libdesk.answers import answer, pending, stub
from simrun.examples.libdesk.catalogue import KIND_OF
from simrun.examples.libdesk.drafts import advance, carry_out, correct, fill, named
from simrun.examples.libdesk.patron import Button, Draft, Patron
from simrun.examples.libdesk.reply import Out, reply
from simrun.examples.libdesk.words import CHIT_CHAT, Reading, read


def take(p: Patron, request: dict[str, Any]) -> dict[str, Any]:
    p.turn += 1
    if p.faults.fire("crash"):
        p.faults.saw("runtime_error", p.turn, "crashed mid-turn")
        raise RuntimeError(f"libdesk: the loan ledger went away in turn {p.turn}")
    out = Out()
    if isinstance(request.get("action"), dict):
        _press(p, str(request["action"].get("offer")), out)
    else:
        _read(p, str(request.get("message", "")), out)
    return reply(p, out)


def _press(p: Patron, oid: str, out: Out) -> None:
    button, fresh = p.shown.get(oid), True
    if button is None:
        button, fresh = p.ever.get(oid), False
        if button is None:
            out.understood = False
            out.lines.append("I don't know that button.")
            return pending(p, out, "I did not know the button you pressed")
        if not p.faults.fire("stale_click"):
            if _unnamed_eligible(p, button) and p.faults.fire("stale_click_unnamed"):
                return _honour_unnamed(p, button, out)
            out.lines.append("That button belongs to an earlier message, so I left it alone.")
            return pending(p, out, "the button you pressed had expired")
    if fresh:
        out.taken = oid
    if button.operation == "keep":
        p.card = None
        out.lines.append("Alright, your hold stays as it is.")
        return None
    if button.operation == "confirm":
        draft, p.card = button.draft, None
        assert draft is not None        # a card's confirm button carries its draft
        draft.offer, draft.fresh, draft.stale = oid, fresh, not fresh
        return carry_out(p, draft, out)
    draft = p.draft
    if not (draft and draft.operation == button.operation and draft.args.get("record") in (None, button.record)):
        draft = p.draft = Draft(button.operation)
        p.card = None
    if button.record:
        draft.args["record"] = button.record
    draft.offer, draft.fresh, draft.stale = oid, fresh, not fresh
    return advance(p, draft, out)


def _unnamed_eligible(p: Patron, button: Button) -> bool:
    """The stale_click_unnamed fault can show on a command button (not a card's) that does not
    merely go on with the draft pending now: that would ask the same again, and the expired
    press would change nothing anyone could see."""
    if button.operation in ("confirm", "keep"):
        return False
    draft = p.draft
    return not (draft and draft.operation == button.operation and draft.args.get("record") in (None, button.record))


def _honour_unnamed(p: Patron, button: Button, out: Out) -> None:
    """The stale_click_unnamed fault: the expired button starts its command, but the draft
    remembers no button, so the event, when the command is carried out, names none."""
    draft = p.draft = Draft(button.operation)
    p.card = None
    if button.record:
        draft.args["record"] = button.record
    draft.offer, draft.fresh, draft.stale = None, False, True
    return advance(p, draft, out)


def _read(p: Patron, text: str, out: Out) -> None:
    r = read(text, _titles(p))
    out.private = r.private
    if r.says_anything and p.faults.fire("not_understood"):
        return stub(p, out)
    if r.private:
        if p.faults.fire("drop_refusal"):
            out.lines.append("That patron lives at 12 Elm Row; their phone is 555-0199.")
            out.answer = "answered"
            p.faults.saw("integrity_leak", p.turn, "gave out another patron's details")
        else:
            out.lines.append("I can't give out another patron's details, or any staff code.")
            out.refusal, out.answer = True, "unavailable"
        return pending(p, out, "I still need it")
    if p.card is not None and (r.confirm or r.decline) and r.command in (None, "cancel_hold"):
        assert p.card_buttons is not None       # set with the card (drafts.advance)
        yes, no = p.card_buttons
        return _press(p, (no if r.decline else yes).id, out)
    if r.correction and correct(p, r, out):
        return None
    if r.topic is not None and r.command is None:
        return answer(p, r, out)
    if r.command is not None:
        return _request(p, r, r.command, out)
    if p.draft is not None and fill(p, p.draft, r):
        if p.faults.fire("loop"):
            if p.draft.asking is not None:
                p.draft.args.pop(p.draft.asking, None)
            out.loop = True
        return advance(p, p.draft, out)
    if r.confirm or CHIT_CHAT.search(text):
        out.lines.append("Alright.")
        return pending(p, out, "your message did not answer it")
    return stub(p, out)


def _request(p: Patron, r: Reading, command: str, out: Out) -> None:
    """A command asked for in words (`command`, as `r` read it): the pending draft goes on if it
    is the same command on the same record; anything else starts anew."""
    record = named(p, KIND_OF[command], r)
    draft = p.draft
    if not (draft and draft.operation == command and record in (None, draft.args.get("record"))):
        draft = p.draft = Draft(command)
        p.card = None
    if record and command != "place_hold":
        draft.args["record"] = record
    fill(p, draft, r)
    same = [b for b in p.shown.values() if b.operation == command and b.record == draft.args.get("record")]
    if len(same) == 1:
        out.taken = same[0].id
        draft.offer, draft.fresh, draft.stale = same[0].id, True, False
    advance(p, draft, out)


def _titles(p: Patron) -> list[str]:
    return [rec["title"] for rec in p.catalogue.records.values() if "title" in rec]
