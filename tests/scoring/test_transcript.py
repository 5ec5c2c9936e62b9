"""What a transcript can tell about its own turns: the label of the button a click took."""

from __future__ import annotations

from simrun._transcript import Transcript, TurnRecord, UserTurn


def turn(index: int, user: UserTurn, result: dict | None) -> TurnRecord:
    return TurnRecord(index=index, user=user, result=result, state=None)


def test_a_clicked_offer_is_labelled_as_last_shown_before_the_click():
    said = UserTurn(kind="message", text="hi")
    transcript = Transcript(persona="p", goal="g", seed=1, repetition=0, end="done", turns=(
        turn(1, said, {"reply": "a", "next_steps": [{"id": "o-1", "label": "Add a bag"},
                                                     {"id": "o-2", "operation": "rebook"}]}),
        turn(2, said, {"reply": "b", "card": {"id": "c-1", "actions": [{"id": "o-3", "label": "Confirm"}]},
                       "next_steps": "not a list"}),
        turn(3, UserTurn(kind="click", offer="o-1"), {"reply": "c", "next_steps": [{"id": "o-1", "label": "Later"}]}),
        turn(4, UserTurn(kind="click", offer="o-3"), None),
    ))
    assert transcript.offer_label("o-3", 4) == ("Confirm", 2)          # a card's action
    assert transcript.offer_label("o-1", 3) == ("Add a bag", 1)        # stale: two turns back
    assert transcript.offer_label("o-1", 4) == ("Later", 3)            # the latest showing wins
    assert transcript.offer_label("o-2", 3) == ("rebook", 1)           # no label: its operation
    assert transcript.offer_label("o-9", 4) is None                    # never shown
    assert transcript.offer_label("o-1", 1) is None                    # not shown before turn 1
