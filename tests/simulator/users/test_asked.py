"""The scripted user hears questions, not words (simulator/users/_asked.py): families of the
phrasings an assistant uses when it asks for a thing, offers what it can do, or says what it did,
each heard as what it is."""

from __future__ import annotations

import pytest

from simrun.scoring.dataset._models import Step
from simrun.simulator.users._asked import asked_by_name

STEP = Step(operation="move_pickup", say=("x",), arguments={"rx_id": "RX-2", "date": "2027-01-20"},
            answers={"rx_id": ("{rx_id}",), "date": ("{date}",)})

ASKS = {
    # a direct question for the thing
    "Which date works for you?": ["date"],
    "What's the RX number of the prescription?": ["rx_id"],
    "What is the new date for the pickup?": ["date"],
    "And the date?": ["date"],
    # a request in other words
    "Please give me the RX number.": ["rx_id"],
    "I'll need the new date for the pickup.": ["date"],
    "Could you let me know the RX number and the date?": ["rx_id", "date"],
    # whose it is, said in another sentence
    "Which RX is it? Its number, please?": ["rx_id"],
    "Which prescription is it? Please give its RX number.": ["rx_id"],
    # a direct question inside an offer's words
    "Which date would you like to move the pickup to?": ["date"],
    "Sure, I can do that. Which date should the pickup of RX-2 move to?": ["date"],
    # an abbreviated identifier
    "What's your RX no. please?": ["rx_id"],
}
OFFERS_AND_STATEMENTS = [
    # an offer list that mentions the thing (the refill desk of issue 40, in its own words)
    "I can request a refill, move a pickup date, or cancel a refill. What would you like to do?",
    "Would you like to move the pickup date or cancel the refill?",
    "You can also change the date online. Can I help with anything else?",
    "Options: refill, new pickup date, cancel. Which one?",
    # a statement, then a question for nothing of the step's
    "There are no refills left on RX-9. Is there anything else?",
    "Your pickup date is 2027-01-12. Anything else I can help with?",
    "I moved the pickup of RX-2 to that date.",
    # an identifier that is not the prescription's
    "What's your phone number?",
]


@pytest.mark.parametrize(("reply", "asked"), ASKS.items())
def test_a_question_for_a_thing_is_heard_in_each_family_of_phrasings(reply, asked):
    assert asked_by_name(reply, STEP) == asked


@pytest.mark.parametrize("reply", OFFERS_AND_STATEMENTS)
def test_an_offer_list_or_a_statement_that_mentions_a_thing_asks_for_nothing(reply):
    assert asked_by_name(reply, STEP) == []
