"""Answers in plain words: a reply carries the store's value in the forms people and runtimes
write it, and never a different value (simrun.scoring.checks._answers, README "What counts as an answer").

One table of phrasings that must carry the value, and one of near misses that must not: another
day, another month, the year off by one, another minute or half of the day, a number inside a
bigger one. Each row is (store value, reply, goal date order).
"""

from __future__ import annotations

import datetime as dt

import pytest

from simrun.scoring.checks._answers import carries
from simrun.scoring.checks._goal import goal_status
from simrun.scoring.dataset._models import Goal
from tests.scoring.checks.builders import msg, result, state, transcript

D = "2026-12-10"          # a Thursday
MATCH = [
    # dates: ISO, words both ways, abbreviations, ordinals, weekdays, no year
    (D, "It is due back on 2026-12-10.", None),
    (D, "Due: 2026/12/10", None),
    (D, "due back on 10 December 2026", None),
    (D, "due back on 10 december 2026.", None),
    (D, "due back on 10th December 2026", None),
    (D, "due back on the 10th of December, 2026", None),
    (D, "due back on December 10, 2026", None),
    (D, "due back on December 10th, 2026", None),
    (D, "due back on Dec 10th", None),
    (D, "due back on Dec. 10", None),
    (D, "due back on 10 Dec 2026", None),
    (D, "due back on Thursday, 10 December 2026", None),
    (D, "due back on Thursday 10 December", None),
    (D, "due back on Thu 10 Dec", None),
    (D, "due back on Thursday, December 10, 2026", None),
    (D, "due back on Thursday the 10th of December", None),
    (D, "Due back 10 December.", None),
    (D, "due back on 10/12/2026", "day_first"),
    (D, "due back on 12/10/2026", "month_first"),
    (D, "due back on 10.12.2026", "day_first"),
    (D, "due back on Thursday 10/12/2026", "day_first"),
    ("2027-03-05", "on 5 March 2027", None),
    ("2027-03-05", "on March 5th", None),
    ("2027-03-05", "on 05/03/2027", "day_first"),
    ("2027-09-01", "from Sept 1, 2027", None),
    (dt.date(2026, 12, 10), "10 December 2026", None),
    # times
    ("10:30", "Pick it up from 10:30.", None),
    ("10:30", "Pick it up from 10.30", None),
    ("10:30", "from 10:30 am", None),
    ("10:30", "from 10.30am", None),
    ("10:30", "from 10:30 a.m. onwards", None),
    ("10:30:00", "from 10:30", None),
    ("10:30", "opens 10:30:00", None),
    ("14:30", "from 14:30", None),
    ("14:30", "from 2:30 pm", None),
    ("14:30", "from 2.30pm", None),
    ("10:00", "from 10 am", None),
    ("12:00", "from noon", None),
    ("09:05", "at 9:05", None),
    ("00:15", "at 12:15 am", None),
    ("2026-12-10T10:30:00", "ready on 10 December 2026 from 10.30 am", None),
    # numbers: digits and words up to twenty
    (2, "It has 2 bags.", None),
    (2, "It has two bags.", None),
    (2, "Two bags.", None),
    ("2", "it has two bags", None),
    (0, "There are zero renewals left.", None),
    (0, "0 renewals left", None),
    (11, "eleven loans", None),
    (20, "twenty days", None),
    (17, "17 days", None),
    (2.0, "2 bags", None),
    (2.5, "2.5 hours", None),
    (1500, "a fine of 1,500 cents", None),
    (1500, "a fine of 1500 cents", None),
    (3, "three renewals left.", None),
    # text: case, accents, whitespace
    ("Lisbon offsite", "It is called Lisbon offsite.", None),
    ("Lisbon offsite", "It is called LISBON OFFSITE.", None),
    ("Lisbon offsite", "It is called lisbon   offsite", None),
    ("São Paulo", "It goes to Sao Paulo.", None),
    ("Sao Paulo", "It goes to São Paulo.", None),
    ("Crème Brûlée", "the book 'creme brulee' is ready", None),
    ("open", "The trip is open.", None),
    ("Central", "Pick it up at central\nbranch", None),
]

NEAR_MISS = [
    # another day, another month, the year off by one, a wrong weekday
    (D, "It is due back on 2026-12-11.", None),
    (D, "It is due back on 2026-11-10.", None),
    (D, "It is due back on 2027-12-10.", None),
    (D, "It is due back on 2025-12-10.", None),
    (D, "due back on 11 December 2026", None),
    (D, "due back on 1 December 2026", None),
    (D, "due back on 10 November 2026", None),
    (D, "due back on 10 December 2027", None),
    (D, "due back on 10 December 2025", None),
    (D, "due back on December 11, 2026", None),
    (D, "due back on December 1, 2026", None),
    (D, "due back on November 10, 2026", None),
    (D, "due back on December 10, 2027", None),
    (D, "due back on Dec 11th", None),
    (D, "due back on Jan 10th", None),
    (D, "due back on 20 December 2026", None),
    (D, "due back on Friday, 10 December 2026", None),
    (D, "due back on Wednesday 10 December", None),
    (D, "due back on 10/12/2026", None),              # no order said: ambiguous
    (D, "due back on 10/12/2026", "month_first"),     # that is October 12
    (D, "due back on 12/10/2026", "day_first"),
    (D, "due back on 10/12/2027", "day_first"),
    (D, "due back on 11/12/2026", "day_first"),
    (D, "due in December 2026", None),
    (D, "due on the 10th", None),
    ("2027-03-05", "on 5 May 2027", None),
    ("2027-03-05", "on 15 March 2027", None),
    ("2027-03-05", "on March 5, 2028", None),
    ("2027-03-05", "on 03/05/2027", "day_first"),
    # times: another minute, another hour, the other half of the day, a date
    ("10:30", "from 10:31", None),
    ("10:30", "from 11:30", None),
    ("10:30", "from 10:30 pm", None),
    ("10:30", "from 22:30", None),
    ("10:30", "from 10.3", None),
    ("10:30", "on 10.30.2026", None),
    ("14:30", "from 2:30", None),
    ("14:30", "from 2:30 am", None),
    ("10:00", "10 minutes", None),
    ("10:00", "from 10 pm", None),
    ("12:00", "at midnight", None),
    ("2026-12-10T10:30:00", "ready on 10 December 2026 from 11.30 am", None),
    ("2026-12-10T10:30:00", "ready on 11 December 2026 from 10.30 am", None),
    # numbers: another number, the value inside a bigger one
    (2, "It has 3 bags.", None),
    (2, "It has 12 bags.", None),
    (2, "It has 22 bags.", None),
    (2, "It has 2.5 bags.", None),
    (2, "twenty-two bags", None),
    (2, "Version v2 of the form", None),
    (2, "2-3 bags", None),
    (2, "three bags", None),
    (20, "twenty-one days", None),
    (1, "someone asked", None),
    (11, "twelve loans", None),
    (2.5, "2 hours", None),
    (1500, "a fine of 15,000 cents", None),
    (17, "170 days", None),
    # text: another word, a part of a word
    ("Lisbon offsite", "It is called Lisbon kickoff.", None),
    ("Lisbon offsite", "It is called Lisbon offsites.", None),
    ("Porto", "It goes to Portorož.", None),
    ("open", "The trip was reopened.", None),
    ("São Paulo", "It goes to Sao Paolo.", None),
]


def test_the_tables_are_large_enough():
    assert len(MATCH) >= 50 and len(NEAR_MISS) >= 50


@pytest.mark.parametrize("value, reply, order", MATCH)
def test_a_phrasing_of_the_value_is_an_answer(value, reply, order):
    assert carries(reply, value, order), f"{reply!r} should carry {value!r}"


@pytest.mark.parametrize("value, reply, order", NEAR_MISS)
def test_a_near_miss_is_not_an_answer(value, reply, order):
    assert not carries(reply, value, order), f"{reply!r} must not carry {value!r}"


def test_success_answered_accepts_a_date_in_words_and_a_numeric_date_only_in_the_goals_order():
    def goal(**fields) -> Goal:
        return Goal.model_validate({
            "id": "g", "title": "t", "instructions": "i", "steps": [{"question": "due"}],
            "questions": [{"id": "due", "ask": "When is it due?", "match": "due", "record": "loan:L-1",
                           "field": "due"}],
            "success": {"answered": ["due"]}, **fields})

    records = {"loan:L-1": {"type": "loan", "due": D}}

    def reached(g: Goal, reply: str):
        t = transcript((msg("When is it due?"), result(reply, answer="answered"), state(records=records)))
        return goal_status(g, t, state(records=records))

    assert reached(goal(), "Due back on Thursday, 10 December 2026.")[0] is True
    assert reached(goal(), "Due back on 10/12/2026.")[0] is False
    assert reached(goal(date_order="day_first"), "Due back on 10/12/2026.")[0] is True
    ok, why = reached(goal(date_order="month_first"), "Due back on 10/12/2026.")
    assert ok is False and "'2026-12-10'" in why
