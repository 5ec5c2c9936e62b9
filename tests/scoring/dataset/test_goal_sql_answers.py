"""The cache of success-query answers: a store's answer is looked up, never run again, and never
answers for a store whose tables differ."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simrun.scoring.dataset._goal_sql import NotAnswered, forget_answers, known_answer, sql_holds

QUERIES = ("SELECT count(*) = 1 FROM events WHERE operation = 'rebook' AND status = 'committed'",
           "SELECT count(*) > 0 FROM records WHERE json_extract_string(data, '$.bags') = '2'",
           "SELECT bool_and(turn < 3) FROM events")

events = st.fixed_dictionaries(
    {"id": st.sampled_from(["e1", "e2"]), "turn": st.integers(1, 4), "operation": st.sampled_from(["rebook", "book"]),
     "status": st.sampled_from(["committed", "refused"])},
    optional={"arguments": st.dictionaries(st.sampled_from(["bags", "date"]), st.integers(0, 3), max_size=2),
              "reason": st.sampled_from(["", "full"])})
records = st.dictionaries(st.sampled_from(["t1", "t2"]), st.fixed_dictionaries(
    {"type": st.sampled_from(["trip", 1, None]), "bags": st.sampled_from([1, 2, "2"])}), max_size=2)
stores = st.builds(lambda r, e: {"records": r, "events": e}, records, st.lists(events, max_size=3))


def _answer(query, store):
    try:
        return known_answer(query, store)
    except NotAnswered:
        return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(QUERIES), stores, stores)
def test_a_kept_answer_is_the_answer_over_the_store_asked_about(query, first, second):
    forget_answers()
    sql_holds(query, first)
    kept = _answer(query, second)
    forget_answers()
    truth = sql_holds(query, second)
    assert kept is None or kept == truth
    assert _answer(query, copy.deepcopy(second)) == truth      # an equal store, another object: looked up
    if json.dumps(second) == json.dumps(first):      # the same store, its order too: looked up
        assert kept == truth


def test_a_changed_event_is_asked_again():
    forget_answers()
    store = {"records": {}, "events": [{"id": "e1", "turn": 1, "operation": "rebook", "status": "committed"}]}
    assert sql_holds(QUERIES[0], store) is True
    store["events"][0]["status"] = "refused"
    try:
        known_answer(QUERIES[0], store)
    except NotAnswered:
        pass
    else:
        raise AssertionError("an answer kept for another store was given")
    assert sql_holds(QUERIES[0], store) is False
