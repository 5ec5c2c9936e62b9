"""What a model-played user is told, and how its answer is read.

The prompt has a stable prefix (the rules, the persona and its manners, the goal) that does not
change during a conversation, so providers can cache it, followed by the conversation as the
user sees it: each reply with the buttons of its offers and card. The model answers in one
structured form: send a message, click an offered button, or stop (done, or giving up).
"""

from __future__ import annotations

import json
from typing import Any

from scoring.transcript import UserTurn
from scoring.dataset import Goal, Persona

ACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["message", "click", "stop"],
                   "description": "message: type text; click: press a button by its id; stop: end."},
        "text": {"type": ["string", "null"], "description": "The message, for action message."},
        "offer": {"type": ["string", "null"], "description": "The button id, for action click."},
        "reason": {"type": ["string", "null"], "enum": ["done", "gave_up", None],
                   "description": "For action stop: done (the goal is reached) or gave_up."},
    },
    "required": ["action", "text", "offer", "reason"],
    "additionalProperties": False,
}

MANNER_PROMPTS = {
    "terse": "Write as briefly as you can (about {pct} of your messages): a few words, no greetings; "
             "leave details out until you are asked for them.",
    "wordy": "Write long, friendly messages (about {pct} of them): greet, give context, thank.",
    "typos": "Type carelessly: about {pct} of your longer words have one typing error (two letters "
             "swapped, one dropped, doubled or mistyped). Never misspell the names, dates and numbers "
             "of your goal.",
    "changes_mind": "Change your mind now and then (about {pct} of the values you give): first give a "
                    "wrong value, then correct it in your next message (\"sorry, I meant ...\"), "
                    "restating only the part that changes, e.g. a day and month without the year.",
    "complains": "You are impatient: about {pct} of your messages complain that this is slow or "
                 "complicated, while still asking for what you want.",
    "stale_clicks": "Your screen shows old messages too: in about {pct} of your clicks, press a button "
                    "from an earlier message instead of the latest one.",
}

RULES = """You are playing a USER who talks to an assistant, so that the assistant can be tested.
You are never the assistant and never an AI model: speak only as the user you play.
Never mention these instructions, the test, or that you are simulated.

Answer every turn with one JSON object and nothing else:
  {"action": "message", "text": "what you type", "offer": null, "reason": null}
  {"action": "click", "text": null, "offer": "o-3", "reason": null}   (press a button by its id)
  {"action": "stop", "text": null, "offer": null, "reason": "done"}    (your goal is reached)
  {"action": "stop", "text": null, "offer": null, "reason": "gave_up"} (you cannot get further)
Pursue your goal step by step. Answer the assistant's questions from your facts. Stop only when
the goal is done or you are truly stuck; do not stop before you have tried."""


def stable_prefix(persona: Persona, goal: Goal) -> str:
    """Rules, persona, manners and goal: the same for every turn of a conversation."""
    manners = [MANNER_PROMPTS[m].format(pct=f"{rate:.0%}") for m, rate in persona.manners.items() if rate > 0]
    facts = "\n".join(f"- {k}: {v}" for k, v in goal.facts.items()) or "- (none)"
    parts = [
        RULES,
        f"\n## Who you are\n{persona.name}. {persona.description}".rstrip(),
        "\n## How you write\n" + ("\n".join(f"- {m}" for m in manners) if manners else "- Plainly."),
        f"\n## Your goal\n{goal.title}\n\n{goal.instructions.strip()}",
        f"\n## Facts you know\n{facts}",
    ]
    return "\n".join(parts)


def render_result(result: dict[str, Any] | None) -> str:
    """A turn result as the user sees it: the reply, then the buttons it can press."""
    if result is None:
        return "(the assistant did not answer)"
    lines = [str(result.get("reply", ""))]
    steps = [o for o in result.get("next_steps") or [] if isinstance(o, dict) and "id" in o]
    if steps:
        lines.append("Buttons: " + " · ".join(f"[{o['id']}] {o.get('label') or o.get('operation')}" for o in steps))
    card = result.get("card")
    if isinstance(card, dict):
        actions = " · ".join(f"[{a['id']}] {a.get('label', '')}" for a in card.get("actions") or []
                             if isinstance(a, dict) and "id" in a)
        lines.append(f"Card ({card.get('operation')}): {actions}")
    return "\n".join(lines)


OPENING = "The conversation starts now. Write your first message to the assistant."


def action_json(turn: UserTurn) -> str:
    """The model's own earlier answer, as it goes back into the conversation."""
    return json.dumps({"action": turn.kind, "text": turn.text, "offer": turn.offer, "reason": turn.stop_reason})


def parse_action(text: str | dict | None) -> UserTurn:
    """The model's answer as a user turn; anything else is flagged for simulator_error."""
    data = text
    if isinstance(text, str):
        raw = text.strip()
        if raw.startswith("```"):
            raw = raw.strip("`").removeprefix("json").strip()
        try:
            data = json.loads(raw)
        except ValueError:
            return UserTurn("message", "", meta={"unparsed": str(text)[:2000]})
    if not isinstance(data, dict):
        return UserTurn("message", "", meta={"unparsed": str(text)[:2000]})
    action = data.get("action")
    if action == "message" and isinstance(data.get("text"), str):
        return UserTurn("message", data["text"])
    if action == "click" and isinstance(data.get("offer"), str) and data["offer"]:
        return UserTurn("click", offer=data["offer"])
    if action == "stop":
        return UserTurn("stop", stop_reason="done" if data.get("reason") == "done" else "gave_up")
    return UserTurn("message", "", meta={"unparsed": json.dumps(data)[:2000]})
