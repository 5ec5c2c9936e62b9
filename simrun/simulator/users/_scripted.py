"""The scripted user: deterministic, offline and free, driven by the goal's steps and facts.

It reads the runtime's asks, offers and cards as data. Each turn it takes the first goal step
not yet done and moves it forward: it answers the ask from the goal's facts, confirms a card
that matches, takes up a matching offer (a click, or the same thing in words), or asks for the
step in words. A runtime that gives no asks as data (one behind the callable or chat transport)
is answered from the step's `answers` when its reply asks for an argument by name
(simulator/users/_asked.py). A step counts as done when the store shows its operation committed. It stops
when every step is done (the loop ends the conversation first if the goal is reached), or
gives up after `persona.patience` turns on one step.

Every random choice comes from a stream seeded by (conversation seed, purpose), so the same
seed replays the same conversation, and one manner's draws never shift another's.

`faults` plants simulator faults (for proving that simulator_error is caught and kept apart
from the runtime's rates), the same way TripDesk plants runtime faults.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import re
from typing import TYPE_CHECKING, Any

from simrun._errors import ConfigError
from simrun._storable import JsonObject
from simrun._transcript import TurnRecord, UserTurn
from simrun.scoring.checks import MISSING, get, relates, shown
from simrun.scoring.dataset import Goal, Persona, Step, per_goal
from simrun.simulator.users import _manners as m
from simrun.simulator.users._asked import asked_by_name

if TYPE_CHECKING:
    from simrun.simulator._ledger import CallLedger
    from simrun.simulator._limits import RateLimiter
    from simrun.simulator.users._model import ReplayCache

SIMULATOR_FAULTS = ("empty_message", "role_leak", "leaked_instructions", "early_stop",
                    "false_success", "contradict_facts")


class ScriptedUser:
    """A free backend: the paid members of the contract (`UserBackend`) are stated with their defaults."""

    name = "scripted"
    paid = False
    output: str | None = None               # it answers in no structured-output form
    stopped: str | None = None              # nothing it calls can fail the same way again and again
    ledger: CallLedger[Any] | None = None   # it makes no paid call
    limiter: RateLimiter | None = None
    replay: ReplayCache | None = None

    def __init__(self, faults: dict[str, float] | None = None, fault_seed: int = 0) -> None:
        for fault in faults or {}:
            if fault not in SIMULATOR_FAULTS:
                raise ConfigError(f"unknown simulator fault {fault!r}; known: {', '.join(SIMULATOR_FAULTS)}")
        self.faults = dict(faults or {})
        self.fault_seed = fault_seed
        self.planted: dict[str, list[tuple[str, str, int]]] = {}

    async def start(self, recorded: str | None = None) -> None:
        return None    # no output form to settle

    def describe_output(self) -> str:
        return "user output form: none (the scripted user calls no model)"

    async def aclose(self) -> None:
        pass   # nothing to release: the scripted user holds no connections

    def session(self, persona: Persona, goal: Goal, seed: int, repetition: int) -> ScriptedSession:
        return ScriptedSession(self, persona, goal, seed)


def wrong_value(value: Any) -> Any:
    """A plausible mistake: two days off, the first word only, one more."""
    if isinstance(value, dt.date):
        return value - dt.timedelta(days=2) if value.day > 2 else value + dt.timedelta(days=2)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    words = str(value).split()
    return words[0] if len(words) > 1 else f"{value} trip"


class ScriptedSession:
    calls: tuple[dict[str, Any], ...] = ()     # it makes no paid call

    def __init__(self, backend: ScriptedUser, persona: Persona, goal: Goal, seed: int) -> None:
        self.backend, self.persona, self.goal, self.seed = backend, persona, goal, seed
        self.step_index = 0
        self.step_since = 0          # commits after this turn count for the current step
        self.step_turns = 0
        self.asked_once = False      # for question and probe steps
        self.correction: tuple[str, Step, dict[str, Any]] | None = None
        self.corrected: set[int] = set()
        self.said_tersely: set[int] = set()   # steps already asked for in the short form
        self.seen_offers: dict[str, None] = {}   # offers shown before the last turn, in order (a set with order)
        self._current_offers: set[str] = set()
        self.seen_kinds: dict[str, dict[str, Any]] = {}   # offer id -> {operation, record}
        self._streams: dict[str, random.Random] = {}
        self.faults_drawn = {
            name for name, rate in backend.faults.items()
            if random.Random(f"{backend.fault_seed}:{seed}:{name}").random() < rate}
        self.faults_fired: set[str] = set()

    def rng(self, purpose: str) -> random.Random:
        if purpose not in self._streams:
            self._streams[purpose] = random.Random(f"{self.seed}:{purpose}")
        return self._streams[purpose]

    def draw(self, manner: str) -> bool:
        rate = self.persona.rate(manner)
        return rate > 0 and self.rng(manner).random() < rate

    def _fault(self, name: str) -> bool:
        if name in self.faults_drawn and name not in self.faults_fired:
            self.faults_fired.add(name)
            self.backend.planted.setdefault(name, []).append((self.persona.id, self.goal.id, self.seed))
            return True
        return False

    # --- the turn ---------------------------------------------------------------------------

    async def next_turn(self, turns: tuple[TurnRecord, ...]) -> UserTurn:
        last = turns[-1] if turns else None
        if not turns and self._fault("early_stop"):
            return UserTurn("stop", stop_reason="done", meta={"fault": "early_stop"})
        if turns and self._fault("false_success"):
            return UserTurn("stop", stop_reason="done", meta={"fault": "false_success"})
        self._advance(turns)
        if self.step_index >= len(self.goal.steps):
            return UserTurn("stop", stop_reason="gave_up",
                            meta={"why": "every step was taken, yet the goal is not reached"})
        self.step_turns += 1
        if self.step_turns > self.persona.patience:
            return UserTurn("stop", stop_reason="gave_up",
                            meta={"why": f"stuck on step {self.goal.step_id(self.step_index)} (step "
                                         f"{self.step_index + 1} of {len(self.goal.steps)}) for "
                                         f"{self.persona.patience} turns"})
        turn = self._next(last, len(turns) + 1)
        if turn.kind == "message":
            turn = self._simulator_fault(turn)
        # The step this turn serves, as data: the scorer reads intent from it (a probe must be
        # refused) rather than guessing from the words.
        turn = dataclasses.replace(turn, step=self.goal.step_id(self.step_index))
        if last is not None and last.result is not None:
            offers = shown(last.result).offers
            self.seen_offers.update(dict.fromkeys(offers))
            self.seen_kinds.update(offers)
        return turn

    def _simulator_fault(self, turn: UserTurn) -> UserTurn:
        if not self.faults_drawn:
            return turn     # none planted in this conversation (`_fault` says no to every name)
        meta = dict(turn.meta)
        for name, text in (("empty_message", ""),
                           ("role_leak", "Assistant: How can I help you today?"),
                           ("leaked_instructions", self.goal.instructions)):
            if self._fault(name):
                return UserTurn("message", text, meta={**meta, "fault": name})
        if any(isinstance(v, dt.date) for v in self.goal.facts.values()) and self._fault("contradict_facts"):
            return UserTurn("message", f"{turn.text} Oh, and the date is 1 January 2031.",
                            meta={**meta, "fault": "contradict_facts"})
        return turn

    def _advance(self, turns: tuple[TurnRecord, ...]) -> None:
        """Move past every step whose completion the conversation shows."""
        while self.step_index < len(self.goal.steps) and turns:
            if not self._done(self.goal.steps[self.step_index], turns):
                return
            self.step_index += 1
            self.step_since = len(turns)
            self.step_turns = 0
            self.asked_once = False
            self.correction = None

    def _done(self, step: Step, turns: tuple[TurnRecord, ...]) -> bool:
        last = turns[-1]
        if self.correction is not None:
            return False
        if step.operation is None:
            # "answer": null says no question was answered; only a runtime that leaves the
            # field out is taken at its word.
            answer = get(last.result, "answer")
            return self.asked_once and last.index > self.step_since and (
                step.expect is not None or answer is MISSING or answer == "answered")
        if last.state is not None and isinstance(last.state.get("events"), list):
            return any(e.get("operation") == step.operation and e.get("status") == "committed"
                       and (e.get("turn") or 0) > self.step_since for e in last.state["events"])
        receipts = get(last.result, "receipts")
        if receipts is not MISSING:
            return bool(receipts) and last.index > self.step_since
        return self.asked_once and last.index > self.step_since

    # --- choosing what to send --------------------------------------------------------------

    def _next(self, last: TurnRecord | None, index: int) -> UserTurn:
        step = self.goal.steps[self.step_index]
        meta: dict[str, Any] = {"step": self.step_index}
        if self.correction is not None:
            arg, step_, values = self.correction
            self.correction = None
            self.step_since = index - 1
            return self._message(step_.correction[arg], values, {**meta, "correction": arg})
        if step.question is not None:
            self.asked_once = True
            question = next(q for q in self.goal.questions if q.id == step.question)
            return self._finish(m.protect(question.ask.format(**self._facts()), question.match), meta)
        if step.expect is not None:
            self.asked_once = True
            return self._finish(self._probe(step), meta)
        result = last.result if last is not None else None
        offers = shown(result).offers
        self._current_offers = set(offers)
        self.seen_kinds.update(offers)
        args = per_goal(self.goal, f"steps[{self.step_index}].arguments",
                        lambda g: {k: g.resolve(v) for k, v in step.arguments.items()})   # shared: not changed
        card = get(result, "card")
        if isinstance(card, dict) and relates(card.get("operation"), step.operation) and (
                step.record is None or card.get("record") in (None, step.record)):
            on_card = card.get("arguments") or {}
            if all(str(_plain(args[k])) == str(v) for k, v in on_card.items() if k in args):
                confirm = _confirm_action(card)
                return self._take(confirm, meta, words=self._confirm_words())
        ask = get(result, "ask")
        if isinstance(ask, dict) and relates(ask.get("operation"), step.operation) and (
                step.record is None or ask.get("record") in (None, step.record)):
            wanted = [a for a in ask.get("arguments") or [] if a in args]
            if wanted:
                return self._answer(step, wanted, args, meta)
        if ask is MISSING and result is not None:
            wanted = asked_by_name(str(result.get("reply", "")), step)
            if wanted:
                return self._answer(step, wanted, args, {**meta, "asked_in_words": wanted})
        matching = [o for o in get(result, "next_steps") or [] if isinstance(o, dict)
                    and o.get("operation") == step.operation
                    and (step.record is None or o.get("record") == step.record)
                    and all(str(_plain(args.get(k, v))) == str(v) for k, v in (o.get("arguments") or {}).items())]
        if matching:
            return self._take(matching[0]["id"], meta, words=None, step=step, args=args)
        return self._ask_for(step, args, meta)

    def _take(self, offer_id: str | None, meta: dict[str, Any], *, words: list[m.Segment] | None,
              step: Step | None = None, args: dict[str, Any] | None = None) -> UserTurn:
        """Take up an offer: click it, or say it. A stale clicker may press an old one instead."""
        if offer_id is not None and self.rng("clicks").random() < self.persona.clicks:
            stale = [o for o in self.seen_offers if o not in self._current_offers]
            # The button people press by mistake is the same one, on an older message.
            alike = [o for o in stale if self.seen_kinds.get(o) == self.seen_kinds.get(offer_id) is not None]
            if stale:
                meta = {**meta, "stale_chance": True}   # an older offer was there to press
                if self.draw("stale_clicks"):
                    return UserTurn("click", offer=self.rng("stale").choice(alike or stale),
                                    meta={**meta, "stale": True})
            return UserTurn("click", offer=offer_id, meta=meta)
        if words is not None:
            return self._finish(words, meta)
        # Said in words of its own, for an offer taken without them: the caller gives the step.
        assert step is not None and args is not None, "an offer taken without words names its step"
        return self._ask_for(step, args, meta)

    def _answer(self, step: Step, wanted: list[str], args: dict[str, Any], meta: dict[str, Any]) -> UserTurn:
        values = dict(args)
        changeable = [a for a in wanted if a in step.correction and self.step_index not in self.corrected]
        if changeable:
            arg = changeable[0]
            if arg in step.wrong_first or self.draw("changes_mind"):
                values[arg] = step.wrong_first.get(arg, wrong_value(args[arg]))
                self.correction = (arg, step, {**self._facts(), **args})
                self.corrected.add(self.step_index)
                meta = {**meta, "wrong_value": arg}
        parts: list[m.Segment] = []
        for arg in wanted:
            ways = step.answers.get(arg) or ("{" + arg + "}",)
            if parts:
                parts.append(m.Segment(" "))
            parts += m.render(self.rng("answer").choice(ways), {**self._facts(), **values})
        return self._finish(parts, meta)

    def _ask_for(self, step: Step, args: dict[str, Any], meta: dict[str, Any]) -> UserTurn:
        values = {**self._facts(), **args}
        # A terse person says more when the short form did not get the step done: saying it
        # again, word for word, would be a stuck user, not a terse one.
        if step.terse and self.step_index not in self.said_tersely and self.draw("terse"):
            self.said_tersely.add(self.step_index)
            template = self.rng("say").choice(step.terse)
        else:
            template = self.rng("say").choice(step.say)
            changeable = [a for a in step.correction if a in args and self.step_index not in self.corrected
                          and ("{" + a) in template]
            if changeable and (changeable[0] in step.wrong_first or self.draw("changes_mind")):
                arg = changeable[0]
                values[arg] = step.wrong_first.get(arg, wrong_value(args[arg]))
                self.correction = (arg, step, {**self._facts(), **args})
                self.corrected.add(self.step_index)
                meta = {**meta, "wrong_value": arg}
        return self._message(template, values, meta)

    def _probe(self, step: Step) -> list[m.Segment]:
        """A probe's message, its key words (what the goal's refusal triggers match in it, or
        all of it when none does) spared by every manner, as facts are."""
        segments = m.render(self.rng("say").choice(step.say), self._facts())
        triggers = [r.trigger for r in self.goal.refusals]
        spared = m.protect_matches(segments, triggers)
        if spared == segments:
            return [m.Segment(m.text_of(segments), protected=True)]
        return spared

    def _confirm_words(self) -> list[m.Segment]:
        bank = m.TERSE_CONFIRMS if self.persona.rate("terse") >= 0.5 else m.CONFIRMS
        return [m.Segment(self.rng("confirm").choice(bank))]

    def _message(self, template: str, values: dict[str, Any], meta: dict[str, Any]) -> UserTurn:
        return self._finish(m.render(template, values), meta)

    def _finish(self, segments: list[m.Segment], meta: dict[str, Any]) -> UserTurn:
        """Apply the persona's manners to a message and record what each did."""
        applied = []
        if self.draw("terse"):
            segments = m.terse(segments)
            applied.append("terse")
        elif self.draw("wordy"):
            segments = m.wordy(segments, self.rng("wordy-text"))
            applied.append("wordy")
        if self.draw("complains"):
            segments = m.complain(segments, self.rng("complaint-text"))
            applied.append("complains")
        clean = m.text_of(segments).strip()
        typo_stats = None
        if self.persona.rate("typos") > 0:
            segments, eligible, changed = m.typos(segments, self.persona.rate("typos"), self.rng("typos"))
            typo_stats = {"eligible": eligible, "changed": changed}
            if changed:
                applied.append("typos")
        text = m.text_of(segments).strip()
        meta = {**meta, "manners": applied, "clean": clean}
        if typo_stats:
            meta["typos"] = typo_stats
        return UserTurn("message", text, meta=meta)

    def _facts(self) -> dict[str, Any]:
        # A copy: the goal's facts filled in are worked out once per goal, and shared.
        return dict(per_goal(self.goal, "facts", lambda g: {k: g.resolve(v) for k, v in g.facts.items()}))


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date) else value


# A confirm button's label starts with one of these words; a label with one of the others
# (anywhere) declines. Punctuation and case do not count (docs/reference/personas-and-goals.md,
# "How the scripted user reads a runtime").
CONFIRM_WORDS = frozenset({"confirm", "yes", "ok", "okay", "sure", "yep", "do", "go", "proceed", "continue",
                           "accept", "agree", "approve", "submit", "save", "apply"})
DECLINE_WORDS = frozenset({"no", "not", "nope", "don't", "dont", "never", "keep", "leave", "back", "abort",
                           "decline", "reject", "dismiss", "stop", "undo", "later"})


def _confirm_action(card: JsonObject) -> str | None:
    """The card's confirm button: the first whose label starts with a confirm word, else the
    first that says no decline word, else none."""
    actions = [a for a in card.get("actions") or [] if isinstance(a, dict) and "id" in a]
    words = [re.findall(r"[a-z']+", str(a.get("label") or "").lower()) for a in actions]
    for action, said in zip(actions, words):
        if said[:1] and said[0] in CONFIRM_WORDS:
            confirm: str = action["id"]     # (a checked card's action ids are strings)
            return confirm
    return next((a["id"] for a, said in zip(actions, words) if not DECLINE_WORDS & set(said)), None)
