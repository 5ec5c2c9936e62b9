"""What the stores of a run held (record types and their fields, operations, arguments), and the
goals of the run that name something none of them held (`simrun.scoring.checks._goal_names`).

Read with DuckDB's JSON functions over the stored states and turn results, so that a run of any
size is read in the database, not in Python: only the distinct names come back.
"""

from __future__ import annotations

from collections import defaultdict

from simrun._transcript import NOT_THE_RUNTIME
from simrun.scoring.checks import Seen, goal_problems
from simrun.scoring.dataset import Goal
from simrun.scoring.store._database import Store
from simrun.scoring.store._duck import insert_rows, one_row, transaction

MOST_NAMES = 100_000         # a hostile store's names stay bounded
MOST_RECORDS = 20_000        # distinct records read for their fields; past it, fields are not checked
# The stored states and turn results, read with JSON paths and wildcards (one parse per value):
# DuckDB's json_each is quadratic in an array's length, and a hostile reply holds 100,000 offers.
_STATES = """states AS (SELECT state AS s FROM turns WHERE run_id = $run AND state IS NOT NULL
               UNION ALL SELECT initial_state FROM conversations WHERE run_id = $run AND initial_state IS NOT NULL
               UNION ALL SELECT final_state FROM conversations WHERE run_id = $run AND final_state IS NOT NULL)"""
_RECORDS = f"""{_STATES},
    records AS (SELECT DISTINCT id, rec FROM (
                    SELECT unnest(json_keys(s, '$.records')) AS id, unnest(json_extract(s, '$.records.*')) AS rec
                    FROM states WHERE json_type(s, '$.records') = 'OBJECT')
                WHERE json_type(rec) = 'OBJECT' LIMIT {MOST_RECORDS + 1})"""
_OPERATIONS = f"""{_STATES},
    events AS (SELECT DISTINCT unnest(json_extract(s, '$.events[*]')) AS ev FROM states
               WHERE json_type(s, '$.events') = 'ARRAY'),
    results AS (SELECT result AS r FROM turns WHERE run_id = $run AND json_type(result) = 'OBJECT'),
    named AS (SELECT ev->>'operation' AS op, CASE WHEN json_type(ev, '$.arguments') = 'OBJECT'
                                                  THEN json_keys(ev, '$.arguments') END AS args FROM events
              UNION ALL SELECT unnest(json_extract_string(r, '$.next_steps[*].operation')), NULL FROM results
                  WHERE json_type(r, '$.next_steps') = 'ARRAY'
              UNION ALL SELECT r->'card'->>'operation', NULL FROM results
              UNION ALL SELECT r->'ask'->>'operation', CASE WHEN json_type(r, '$.ask.arguments') = 'ARRAY'
                  THEN json_extract_string(r, '$.ask.arguments[*]') END FROM results)"""


def seen_in_run(store: Store, run_id: str) -> Seen:
    """Every record type with its field paths, record id with its type, operation and argument
    the run's stores and turn results held."""
    con, run = store.con, {"run": run_id}
    fields: dict[str, set[str]] = defaultdict(set)
    types_of: dict[str, str] = {}
    if one_row(con.execute(f"WITH {_RECORDS} SELECT count(*) FROM records", run))[0] <= MOST_RECORDS:
        for rtype, path in con.execute(f"""WITH {_RECORDS}
                SELECT DISTINCT coalesce(rec->>'type', ''), t.fullkey FROM records, json_tree(rec) t
                WHERE t.fullkey <> '$' AND NOT contains(t.fullkey, '[') LIMIT {MOST_NAMES}""", run).fetchall():
            fields[rtype].add(".".join(part.strip('"') for part in path[2:].split(".")))
        types_of = dict(con.execute(f"""WITH {_RECORDS}
                SELECT id, any_value(coalesce(rec->>'type', '')) FROM records GROUP BY id""", run).fetchall())
    arguments: dict[str, set[str]] = defaultdict(set)
    operations: set[str] = set()
    for op, argument in con.execute(f"""WITH {_OPERATIONS}
            SELECT DISTINCT op, unnest(coalesce(args, [NULL])) FROM named WHERE op IS NOT NULL
            LIMIT {MOST_NAMES}""", run).fetchall():
        operations.add(op)
        if argument is not None:
            arguments[op].add(argument)
    return Seen({t: frozenset(f) for t, f in fields.items()}, types_of, frozenset(operations),
                {op: frozenset(a) for op, a in arguments.items()})


def record_goal_problems(store: Store, run_id: str, goals: tuple[Goal, ...] | list[Goal]) -> list[str]:
    """Find the run's goal-file problems and keep them with the run (its verdict reads them).

    Only what the run could have shown is held against a goal: a run its budget cut short may
    never have reached another goal's operations, so it names none; nor is a goal whose every
    conversation ended for a reason that is not the runtime's (a simulator or provider error)."""
    ends = store.con.execute("SELECT goal, list(DISTINCT end_reason) FROM conversations WHERE run_id = ? "
                             "GROUP BY goal", [run_id]).fetchall()
    cut_short = any("budget_cut" in reasons for _, reasons in ends)
    judged = {goal for goal, reasons in ends if set(reasons) - NOT_THE_RUNTIME}
    seen = None if cut_short else seen_in_run(store, run_id)
    problems = [] if seen is None else [(goal.id, line) for goal in goals if goal.id in judged
                                        for line in goal_problems(goal, seen)]
    with transaction(store.con) as con:
        con.execute("DELETE FROM goal_problems WHERE run_id = ?", [run_id])
        insert_rows(con, "goal_problems", [[goal, line] for goal, line in problems], leading=(run_id,))
    return [line for _, line in problems]


def stored_goal_problems(store: Store, run_id: str) -> list[str]:
    return [line for (line,) in store.con.execute(
        "SELECT problem FROM goal_problems WHERE run_id = ? ORDER BY goal, rowid", [run_id]).fetchall()]
