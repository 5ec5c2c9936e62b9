"""The store: every run in DuckDB, and what is read back out of it.

    database    Store: runs, conversations, turns, findings, checks and model calls
    rows        a transcript as the store's rows hold it (what a Ray worker sends back)
    migrations  the schema, as numbered migrations recorded in the database itself
    duck        transactions, and bulk inserts with secrets cut out
    run_ids     run ids, made in one place and checked wherever they come from
    rates       class rates with intervals, outcomes, the worst conversations: SQL over a run
    rescore     a stored run scored again by the current judge, at no cost
    bundle      a run exported as items, and items imported to be scored
    merge       the shards of one run joined into one
    seen        what a run's stores held, and the goals that name what none held

Imports: the shared vocabulary of `simrun.scoring`, `simrun.scoring.dataset` and the judge
(`simrun.scoring.checks`), never the gate or the pages.
"""
