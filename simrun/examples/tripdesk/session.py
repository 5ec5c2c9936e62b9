"""One TripDesk conversation: a turn taken in, routed to what handles it, and finished.

A message is read first against what the last turn offered (a correction of the last value
given, the card, the pending ask, a next step named in words or by its place in the list), and
only then over the whole catalogue; a click takes the offer it names, and an expired one is
declined unless the stale_click fault honours it. Whatever the route, the turn ends in
`Session._finish`, which hands it to `reply.finish`: one method to wrap to change every reply of
every session, as the report tests do.
"""

from __future__ import annotations

from typing import Any

from simrun.examples.tripdesk.answers import answer, keep_pending, stub
from simrun.examples.tripdesk.corrections import correct
from simrun.examples.tripdesk.domain import CONFIRMED, REQUIRED
from simrun.examples.tripdesk.offers import Offer, card_offer
from simrun.examples.tripdesk.operations import ask, commit, proceed
from simrun.examples.tripdesk.reading import read
from simrun.examples.tripdesk.reply import Out, ask_json, finish
from simrun.examples.tripdesk.state import SessionState
from simrun.examples.tripdesk.values import fill, match_offer, values


class Session(SessionState):
    """A conversation: what it remembers (`SessionState`) and how each of its turns is taken."""

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        self.turn += 1
        out = Out()
        self.on_screen = set(self.offers)     # what the user could press when it sent this turn
        self.stale_origin = None
        if self.faults.fires("crash", self.turn):
            self.faults.saw("runtime_error", self.turn, "raised mid-turn")
            raise RuntimeError(f"injected crash in turn {self.turn}")
        action = request.get("action")
        if action is not None:
            self._click(str((action or {}).get("offer")), out)
        else:
            self._message(str(request.get("message", "")), out)
        return self._finish(out)

    def _finish(self, out: Out) -> dict[str, Any]:
        # A method, not a bare call of `finish`: the one place to wrap every reply (tests do).
        return finish(self, out)

    def _message(self, message: str, out: Out) -> None:
        r = read(message)
        out.probe = r.question == "refused"
        if self.faults.fires("not_understood", self.turn):
            # Even a stub turn runs the safety check (ADR-0039): it refuses what it must.
            if r.question == "refused" and not self.faults.fires("drop_refusal", self.turn):
                out.lines.append("I can't share passport or identity document details.")
                out.refusal = True
            return stub(self, out)
        if r.correction and r.intent != "question" and correct(self, r, out):
            return
        if self.card and r.intent not in REQUIRED and r.intent != "question":
            kind = "confirm" if r.confirm and not r.decline else "decline" if r.decline else None
            if kind:
                offer = card_offer(self.card, kind)
                out.taken_offer = offer.id
                return self._take(offer, out)
        if self.ask and (r.intent is None or r.intent == self.ask["operation"]):
            # A message read as going on with the ask carries on what started it.
            self.stale_origin = self.ask.get("stale")
            filled = fill(self.store, self.ask["arguments"], r)
            if filled:
                if self.faults.fires("loop", self.turn):
                    # Ignores the answer and asks the very same thing again, with no reason.
                    out.lines.append(self.ask["question"])
                    out.ask = ask_json(self.ask, None)
                    return
                known = {**self.ask["known"], **filled}
                return proceed(self, self.ask["operation"], known, out, offer=None,
                               given=filled, record=self.ask["record"])
        if r.intent in REQUIRED:
            args = values(self, r, r.intent)
            matched = match_offer(self, r)
            if matched is not None:
                out.taken_offer = matched.id
                return proceed(self, matched.operation, {**matched.arguments, **args}, out,
                               offer=matched.id, given=args, record=matched.record)
            return proceed(self, r.intent, args, out, offer=None, given=args)
        steps = [o for o in self.offers.values() if o.kind == "step"]
        if r.intent != "question" and steps and (
                r.ordinal is not None or (r.confirm and len(steps) == 1)):
            offer = steps[r.ordinal if r.ordinal is not None and r.ordinal < len(steps) else 0]
            out.taken_offer = offer.id
            return self._take(offer, out)
        if r.intent == "question":
            return answer(self, r, out)
        if r.complaint or r.confirm:
            out.lines.append("Sorry this is taking a while." if r.complaint else "Alright.")
            return keep_pending(self, out, "your message did not answer it")
        return stub(self, out)

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
                    return commit(self, old.operation, args, out, offer=offer_id, addressed=True)
                return self._take(old, out)
            wanted = self._stale_ask(old)
            if wanted and self.faults.fires("stale_click_ask", self.turn):
                self.stale_origin = offer_id
                out.show_steps = False      # nothing else to press: the answer comes in words
                return ask(self, old.operation, dict(old.arguments), wanted, out)
            out.lines.append("That option was from an earlier step, so I did nothing with it.")
            return keep_pending(self, out, "the option you pressed had expired")
        out.understood = False
        out.stub = True
        out.lines.append("I don't know that option.")

    def _stale_ask(self, old: Offer) -> list[str]:
        """What the stale_click_ask fault asks for when it honours a click on expired `old`: the
        trip, and whatever else the step lacks; nothing for a step that is confirmed on a card,
        or when that ask is the one pending now (asking it again is keeping it pending)."""
        if old.kind != "step" or old.operation in CONFIRMED:
            return []
        wanted = [a for a in REQUIRED[old.operation] if a == "trip" or a not in old.arguments]
        pending = self.ask and (self.ask["operation"], self.ask["record"], sorted(self.ask["arguments"]))
        return [] if pending == (old.operation, None, sorted(wanted)) else wanted

    def _take(self, offer: Offer, out: Out) -> None:
        if offer.kind == "confirm":
            card, self.card = self.card, None
            assert card is not None     # a confirm offer is the pending card's
            return commit(self, card["operation"], card["args"], out, offer=offer.id, addressed=True)
        if offer.kind == "decline":
            self.card = None
            out.lines.append("Alright, I left it as it was.")
            return
        proceed(self, offer.operation, {**offer.arguments, "trip": offer.record}, out,
                offer=offer.id, given={}, record=offer.record)
