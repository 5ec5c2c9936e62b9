"""Was the goal reached? Decided on the store's state: record matches, SQL over the store's
tables, and questions answered with the store's value; UNVERIFIABLE where there is no state.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from simrun._transcript import Transcript, TurnRecord, UserTurn
from simrun.scoring.checks._goal import goal_status
from simrun.scoring.dataset._goal_sql import check_goal_sql
from simrun.scoring.dataset._models import Goal

ROOT = Path(__file__).resolve().parents[3]

# --- builders --------------------------------------------------------------------------------

RECORDS = {
    "traveler:P-1": {"type": "traveler", "name": "Ana Souza"},
    "trip:T-1": {"type": "trip", "name": "Lisbon offsite", "bags": 1, "status": "booked",
                 "segments": {"outbound": {"date": "2027-03-14"}, "return": {"date": "2027-03-17"}}},
    "trip:T-2": {"type": "trip", "name": "Porto visit", "bags": 2, "status": "booked",
                 "segments": {"outbound": {"date": "2027-02-02"}, "return": {"date": "2027-02-09"}}},
}
QUESTIONS = [
    {"id": "bags", "ask": "How many bags are on the Porto trip?", "match": "how many bags",
     "record": "trip:T-2", "field": "bags"},
    {"id": "outbound", "ask": "When do I fly out to Lisbon?", "match": "fly out",
     "where": {"name": "{trip}"}, "field": "segments.outbound.date"},
]


def goal(success: dict, **fields: Any) -> Goal:
    data = {"id": "g", "title": "t", "instructions": "Rebook the Lisbon outbound, then ask.",
            "facts": {"trip": "Lisbon offsite", "outbound_date": dt.date(2027, 3, 14), "bags": 2},
            "steps": [{"operation": "rebook", "record": "trip:T-1", "say": ["Rebook {trip}."]}],
            "questions": QUESTIONS, "success": success}
    return Goal.model_validate({**data, **fields})


def state(records: dict | None = None, *events: dict) -> dict:
    return {"records": RECORDS if records is None else records, "events": list(events)}


def event(eid: str, turn: int, operation: str = "add_bag", record: str = "trip:T-2",
          status: str = "committed", **extra: Any) -> dict:
    return {"id": eid, "turn": turn, "operation": operation, "record": record, "status": status,
            "offer": None, "reason": None, **extra}


def transcript(*turns: tuple[str, dict], turn_state: dict | None = None) -> Transcript:
    """Turns as (message, turn result); each turn sees `turn_state` (default: the records)."""
    s = state() if turn_state is None else turn_state
    records = tuple(TurnRecord(i, UserTurn("message", text), res, s)
                    for i, (text, res) in enumerate(turns, start=1))
    return Transcript("p", "g", 7, 0, records, "user_stopped", initial_state=state(), final_state=s)


def with_record(rid: str, **changes: Any) -> dict:
    return {**RECORDS, rid: {**RECORDS[rid], **changes}}


EMPTY = transcript()


# --- records ---------------------------------------------------------------------------------

def test_a_record_matched_by_id_holds():
    g = goal({"records": [{"id": "trip:T-2", "match": {"bags": 2, "name": "Porto visit"}}]})
    assert goal_status(g, EMPTY, state()) == (True, "every success check holds")


def test_a_record_matched_by_id_fails_on_another_record_s_values():
    # trip:T-1 has 1 bag; trip:T-2, which has 2, must not stand in for it.
    g = goal({"records": [{"id": "trip:T-1", "match": {"bags": 2}}]})
    reached, why = goal_status(g, EMPTY, state())
    assert reached is False
    assert why.startswith("success.records[0] does not hold")


def test_a_record_check_with_no_id_holds_on_any_record():
    g = goal({"records": [{"match": {"type": "trip", "bags": 2}}]})
    assert goal_status(g, EMPTY, state())[0] is True
    none_with_three = goal({"records": [{"match": {"type": "trip", "bags": 3}}]})
    assert goal_status(none_with_three, EMPTY, state())[0] is False


def test_a_record_check_needs_every_field_on_one_record():
    # One trip has 2 bags, another is named Lisbon offsite: no one record has both.
    g = goal({"records": [{"match": {"bags": 2, "name": "Lisbon offsite"}}]})
    assert goal_status(g, EMPTY, state())[0] is False


def test_a_missing_record_does_not_hold():
    g = goal({"records": [{"id": "trip:T-9", "match": {"type": "trip"}}]})
    assert goal_status(g, EMPTY, state())[0] is False


def test_a_dotted_path_reads_nested_fields_and_a_date_fact_matches_its_iso_text():
    g = goal({"records": [{"id": "trip:T-1", "match": {"segments.outbound.date": "{outbound_date}"}}]})
    assert goal_status(g, EMPTY, state())[0] is True
    moved = with_record("trip:T-1", segments={"outbound": {"date": "2027-03-12"}})
    assert goal_status(g, EMPTY, state(moved))[0] is False


def test_a_dotted_path_that_is_not_there_does_not_hold():
    g = goal({"records": [{"id": "trip:T-1", "match": {"segments.inbound.date": "2027-03-17"}}]})
    assert goal_status(g, EMPTY, state())[0] is False


def test_fact_placeholders_resolve_whole_and_inside_text():
    g = goal({"records": [{"id": "trip:T-1", "match": {"name": "{trip}", "status": "booked"}},
                          {"id": "trip:T-2", "match": {"bags": "{bags}", "name": "Porto visit"}}]})
    assert goal_status(g, EMPTY, state())[0] is True
    g = goal({"records": [{"id": "trip:T-1", "match": {"name": "{trip} (moved)"}}]})
    assert goal_status(g, EMPTY, state(with_record("trip:T-1", name="Lisbon offsite (moved)")))[0] is True
    assert goal_status(g, EMPTY, state())[0] is False


def test_every_record_check_must_hold_and_the_first_failure_is_named():
    g = goal({"records": [{"id": "trip:T-1", "match": {"bags": 1}}, {"id": "trip:T-2", "match": {"bags": 5}}]})
    reached, why = goal_status(g, EMPTY, state())
    assert reached is False and why.startswith("success.records[1]")


# --- SQL over the store ----------------------------------------------------------------------

BAGS_SQL = ("SELECT count(*) = 1 FROM records WHERE type = 'trip' "
            "AND CAST(json_extract(data, '$.bags') AS INTEGER) = 3")
EVENT_SQL = ("SELECT count(*) = 1 FROM events WHERE operation = 'add_bag' AND status = 'committed' "
             "AND record = 'trip:T-2' AND turn = 2 AND CAST(json_extract(arguments, '$.n') AS INTEGER) = 1")


def test_sql_over_the_records_table():
    g = goal({"sql": [BAGS_SQL]})
    assert goal_status(g, EMPTY, state(with_record("trip:T-2", bags=3)))[0] is True
    reached, why = goal_status(g, EMPTY, state())
    assert reached is False and why == "success.sql[0] is false"


def test_sql_over_the_events_table():
    g = goal({"sql": [EVENT_SQL]})
    done = state(None, event("e-1", 2, arguments={"n": 1}))
    assert goal_status(g, EMPTY, done)[0] is True
    refused = state(None, event("e-1", 2, status="refused", arguments={"n": 1}))
    assert goal_status(g, EMPTY, refused)[0] is False
    elsewhere = state(None, event("e-1", 2, record="trip:T-1", arguments={"n": 1}))
    assert goal_status(g, EMPTY, elsewhere)[0] is False


def test_a_false_query_over_events_that_carry_no_arguments_is_unverifiable_not_false():
    """A tool span without its (opt-in) arguments gives an event with neither arguments nor
    record: a query that names its operation and is false could have held with them."""
    g = goal({"sql": [EVENT_SQL]})
    blind = state(None, event("e-1", 2, record=None, arguments=None))
    reached, why = goal_status(g, EMPTY, blind)
    assert reached is None and "add_bag events it names carry neither arguments nor record" in why
    # A blind event of an operation the query does not name, or one refused, changes nothing.
    other = state(None, event("e-1", 2, operation="rebook", record=None, arguments=None))
    refused = state(None, event("e-1", 2, record=None, arguments=None, status="refused"))
    assert goal_status(g, EMPTY, other)[0] is False and goal_status(g, EMPTY, refused)[0] is False


def test_sql_sees_only_the_state_it_is_given():
    g = goal({"sql": ["SELECT count(*) = 0 FROM events"]})
    assert goal_status(g, EMPTY, state(None, event("e-1", 1)))[0] is False
    assert goal_status(g, EMPTY, state())[0] is True     # the previous call's rows are gone


def test_every_kind_of_check_must_hold():
    g = goal({"records": [{"id": "trip:T-2", "match": {"bags": 2}}], "sql": ["SELECT false"]})
    assert goal_status(g, EMPTY, state()) == (False, "success.sql[0] is false")


def test_sql_that_fails_on_the_data_is_unverifiable_not_false():
    query = "SELECT bool_and(CAST(json_extract_string(data, '$.name') AS INTEGER) > 0) FROM records"
    assert check_goal_sql(query) is None        # runs on the empty schema
    reached, why = goal_status(goal({"sql": [query]}), EMPTY, state())
    assert reached is None
    assert why.startswith("UNVERIFIABLE: goal g: success.sql[0] failed with a DuckDB ConversionException")
    assert "Porto" not in why and "Lisbon" not in why    # DuckDB quotes the value; the detail never does


# --- answered questions ----------------------------------------------------------------------

def bags_goal() -> Goal:
    return goal({"answered": ["bags"]})


def test_a_question_answered_with_the_store_value_holds():
    t = transcript(("Hello.", {"reply": "Hi."}),
                   ("How many bags are on the Porto trip?", {"reply": "Porto visit has 2 bags.", "answer": "answered"}))
    assert goal_status(bags_goal(), t, state()) == (True, "every success check holds")


def test_a_question_found_by_where_and_a_dotted_field_holds():
    t = transcript(("When do I fly out?", {"reply": "You fly out on 2027-03-14.", "answer": "answered"}))
    assert goal_status(goal({"answered": ["outbound"]}), t, state())[0] is True


@pytest.mark.parametrize("turns", [
    [("How many bags are on the Porto trip?", {"reply": "I can't see that, 2 is my guess.", "answer": "unavailable"})],
    [("How many bags are on the Porto trip?", {"reply": "Porto visit has some bags.", "answer": "answered"})],
    [("Is the Porto trip booked?", {"reply": "Yes, with 2 bags.", "answer": "answered"})],   # never asked
    [],
], ids=["unavailable", "value-not-in-reply", "not-asked", "no-turns"])
def test_a_question_not_answered_from_the_store_does_not_hold(turns):
    reached, why = goal_status(bags_goal(), transcript(*turns), state())
    assert reached is False
    assert why.startswith("question 'bags' was not answered from the store: ")


def test_the_answer_is_the_value_the_store_held_at_that_turn():
    # The reply says 2, the final store holds 2, but the store at that turn held 3.
    t = transcript(("How many bags are on the Porto trip?", {"reply": "It has 2 bags.", "answer": "answered"}),
                   turn_state=state(with_record("trip:T-2", bags=3)))
    assert goal_status(bags_goal(), t, state())[0] is False


def test_a_store_value_no_check_can_read_costs_this_conversation_s_goal_never_the_run():
    """The goal check is one door from a runtime's store: a bags count of 5,000 digits (past what
    Python turns into an int) makes the goal UNVERIFIABLE here, with the reason, and raises nothing."""
    huge = "7" * 5000
    t = transcript(("How many bags are on the Porto trip?", {"reply": f"It has {huge} bags.", "answer": "answered"}),
                   turn_state=state(with_record("trip:T-2", bags=huge)))
    reached, why = goal_status(bags_goal(), t, state(with_record("trip:T-2", bags=huge)))
    assert reached is None
    assert why == ("UNVERIFIABLE: goal g: the goal check could not read this store (a number of more digits than "
                   "any check reads (over 4,300): the runtime's store holds it)")
    assert huge not in why and "set_int_max_str_digits" not in why     # no fix that is not the user's to make


def test_a_wrong_number_that_contains_the_value_is_not_an_answer():
    t = transcript(("How many bags are on the Porto trip?",
                    {"reply": "Porto visit has 12 bags.", "answer": "answered"}))
    assert goal_status(bags_goal(), t, state())[0] is False


# --- no state: UNVERIFIABLE ------------------------------------------------------------------

@pytest.mark.parametrize("no_state", [None, {}, {"records": None, "events": []}, {"records": []}])
def test_no_store_state_is_unverifiable(no_state):
    g = goal({"records": [{"id": "trip:T-2", "match": {"bags": 2}}], "sql": ["SELECT true"]})
    reached, why = goal_status(g, EMPTY, no_state)
    assert reached is None
    assert why.startswith("UNVERIFIABLE")


# --- check_goal_sql --------------------------------------------------------------------------

@pytest.mark.parametrize("query", [
    BAGS_SQL, EVENT_SQL, "SELECT true",
    "SELECT count(*) = 1 FROM records r JOIN events e ON e.record = r.id WHERE e.reason IS NULL AND e.offer IS NULL",
])
def test_check_goal_sql_accepts_queries_over_the_store_schema(query):
    assert check_goal_sql(query) is None


@pytest.mark.parametrize("query, says", [
    ("SELECT count(*) > 0 FROM records WHERE bags = 2", 'column "bags"'),
    ("SELECT count(*) > 0 FROM events WHERE events.amount > 0", "amount"),
    ("SELECT count(*) > 0 FROM trips", "trips"),
])
def test_check_goal_sql_rejects_what_the_store_schema_cannot_run(query, says):
    problem = check_goal_sql(query)
    assert problem is not None
    assert problem.startswith("success query does not run on the store schema (records, events)")
    assert says.lower() in problem.lower()


def test_check_goal_sql_names_a_syntax_error():
    assert check_goal_sql("SELEKT 1") == 'not valid SQL: Parser Error: syntax error at or near "SELEKT"'


@pytest.mark.parametrize("query", ["SELECT true, false", "SELECT id FROM records",
                                   "SELECT * FROM (VALUES (true), (false)) t(x)"])
def test_check_goal_sql_rejects_queries_that_are_not_one_value(query):
    assert check_goal_sql(query) == "a success query must return exactly one value (true when the goal is reached)"


# --- packaging -------------------------------------------------------------------------------

def test_the_scoring_package_imports_on_its_own():
    # Once a circular import (scoring -> simulator -> simrun.scoring.checks._goal); conftest imports hid it.
    run = subprocess.run([sys.executable, "-c", "import simrun.scoring.checks._goal"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr


def test_a_query_answered_once_is_not_run_again_on_the_same_store_but_is_on_a_changed_one(monkeypatch):
    import simrun.scoring.dataset._goal_sql as goal_module

    ran = []
    real = goal_module.run_select
    monkeypatch.setattr(goal_module, "run_select", lambda *args: ran.append(args) or real(*args))
    monkeypatch.setattr(goal_module, "_answers", goal_module.collections.OrderedDict())
    g = goal({"sql": ["SELECT count(*) = 1 FROM events WHERE operation = 'add_bag' AND status = 'committed'"]})
    committed, refused = state(None, event("e-1", 2)), state(None, event("e-1", 2, status="refused"))
    assert goal_status(g, EMPTY, committed)[0] is True
    assert goal_status(g, EMPTY, committed)[0] is True and len(ran) == 1
    assert goal_status(g, EMPTY, refused)[0] is False and len(ran) == 2    # one field of one event differs
    monkeypatch.setattr(goal_module, "ANSWERS_KEPT", 2)      # the least recent answer makes room
    assert goal_status(g, EMPTY, state(with_record("trip:T-2", bags=3), event("e-1", 2)))[0] is True
    assert len(ran) == 3
    assert goal_status(g, EMPTY, refused)[0] is False and len(ran) == 3     # still kept
    assert goal_status(g, EMPTY, committed)[0] is True and len(ran) == 4    # made room, asked again
    assert len(goal_module._answers) == 2


def test_a_record_type_that_is_not_text_is_queried_as_its_json():
    odd = {**RECORDS, "trip:T-3": {"type": {"kind": "trip"}, "name": "Odd"}}
    g = goal({"sql": ["""SELECT count(*) = 1 FROM records WHERE type = '{"kind": "trip"}'"""]})
    assert goal_status(g, EMPTY, state(odd))[0] is True


# --- a store of tool events only (an assistant read through its traces) -----------------------

def test_a_goal_over_events_alone_is_decided_and_what_needs_records_is_unverifiable_with_why():
    events_only = {"events": [event("call-1", 1, "rebook", "trip:T-1", arguments={"date": "2027-03-14"})]}
    over_events = goal({"sql": ["SELECT count(*) = 1 FROM events WHERE operation = 'rebook' AND "
                                "arguments->>'date' = '2027-03-14'"]})
    assert goal_status(over_events, EMPTY, events_only) == (True, "every success check holds")
    assert goal_status(over_events, EMPTY, {"events": []})[0] is False
    for needs_records in (goal({"records": [{"id": "trip:T-1", "match": {"bags": 1}}]}),
                          goal({"answered": ["bags"]}),
                          goal({"sql": ["SELECT count(*) > 0 FROM events e JOIN records r ON r.id = e.record"]})):
        reached, why = goal_status(needs_records, EMPTY, events_only)
        assert reached is None and "gives no records as data" in why and "runtime.state" in why, why
    # The same query over a store that does give records, even none, is decided.
    joined = goal({"sql": ["SELECT count(*) > 0 FROM events e JOIN records r ON r.id = e.record"]})
    assert goal_status(joined, EMPTY, {**events_only, "records": {}})[0] is False
    assert goal_status(joined, EMPTY, {**events_only, "records": RECORDS})[0] is True
