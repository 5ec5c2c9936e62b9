"""`simrun merge`: the shards of one run, each in its own DuckDB file, joined into one run.

A team that outgrows one CI job runs `simrun --shard i/n` in n jobs (a GitHub Actions matrix,
say) and merges the n files. The shards must be of the same run (the same configuration, matrix
and scorer, shards 0..n-1 of the same n); their conversations are copied into one new run whose
report and gate verdict are those of the unsharded run.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import duckdb

from simrun._errors import ConfigError, Parameter
from simrun.scoring.store._database import Store, reading
from simrun.scoring.store._duck import NamedRow, first_unstorable, one_row, reason, transaction
from simrun.scoring.store._run_ids import identifying, new_run_id

TABLES = ("conversations", "turns", "findings", "checks", "model_calls")


def _shard_runs(paths: list[Path]) -> list[tuple[Path, NamedRow]]:
    runs = []
    for path in paths:
        with reading(path) as store:      # a shard is another job's file: read, never written
            rows = store.con.execute("SELECT run_id FROM runs WHERE shard IS NOT NULL").fetchall()
            if len(rows) != 1:
                raise ConfigError(f"{path}: expected exactly one sharded run (made with --shard i/n), "
                                  f"found {len(rows)}", field="shards")
            _refuse_unstorable(store, path, rows[0][0])
            runs.append((path, store.run(rows[0][0])))
    return runs


def _refuse_unstorable(store: Store, path: Path, run_id: str) -> None:
    """A shard is another job's file, and may have been changed since it was written: every JSON
    value of its run is held to the rule the store's own are written by (simrun/_storable.py),
    before anything is read into the joined run, or copied."""
    found = first_unstorable(store.con, ("runs", *TABLES), run_id)
    if found is not None:
        table, column, problem = found
        raise ConfigError(f"{path}: {table}.{column} of run {run_id} holds {problem}, which a store cannot keep: "
                          "the file was changed since its job wrote it, or written by a simrun from before its "
                          "store refused such values", field="shards")


def merge(out: Path | str, shards: list[Path | str], *, partial: bool = False) -> str:
    """Join the shard files into a new run in `out`; return its id. A shard that did not finish
    is refused, unless `partial`: then the joined run is marked interrupted."""
    runs = _shard_runs([Path(p) for p in shards])
    first = runs[0][1]
    count = int(first["shard"].split("/")[1])
    same = ("dataset_hash", "scorer_version", "user_backend", "seed", "repetitions", "runtime_version")
    for path, run in runs:
        if any(run[k] != first[k] for k in same) or identifying(run["config"]) != identifying(first["config"]):
            raise ConfigError(f"{path}: run {run['run_id']} is not a shard of the same run as "
                              f"{runs[0][0]} (configuration, matrix, scorer or runtime version differ)", field="shards")
    got = sorted(int(run["shard"].split("/")[0]) for _, run in runs)
    if got != list(range(count)) or any(int(r["shard"].split("/")[1]) != count for _, r in runs):
        raise ConfigError(f"expected shards 0..{count - 1} of {count} once each, got {got}", field="shards")
    unfinished = [str(p) for p, r in runs if r["status"] != "finished"]
    if unfinished and not partial:
        path, run = next((p, r) for p, r in runs if r["status"] != "finished")
        raise ConfigError((f"{path}: shard {run['shard']} (run {run['run_id']}) is {run['status']}, not finished; "
                           f"finish it with `simrun resume --db {path}`, or pass ", Parameter("partial", True),
                           " to join what there is"), field="shards")
    run_id = new_run_id()
    # The shards, checked above, are the only files the new store's connection may attach.
    with Store(out, attach=tuple(p for p, _ in runs)) as store:
        con = store.con
        store.create_run(run_id, config=first["config"], dataset_hash=first["dataset_hash"],
                         dataset=first["dataset"], scorer_version=first["scorer_version"],
                         simrun_version=first["simrun_version"], user_backend=first["user_backend"],
                         runtime=first["runtime"], seed=first["seed"], repetitions=first["repetitions"],
                         budget_usd=sum((Decimal(str(r["budget_usd"])) for _, r in runs), Decimal(0)),
                         labels=list(dict.fromkeys(label for _, r in runs for label in r["labels"])),
                         runtime_version=first["runtime_version"], git_commit=first["git_commit"],
                         git_branch=first["git_branch"])
        try:
            with transaction(con):
                for n, (path, run) in enumerate(runs):
                    # A parameter, never the path pasted into SQL: a file name may hold a quote.
                    con.execute(f"ATTACH ? AS shard{n} (READ_ONLY)", [str(path)])
                    for table in TABLES:
                        columns = [c[0] for c in con.execute(f"DESCRIBE {table}").fetchall()]
                        select = ", ".join("? AS run_id" if c == "run_id" else c for c in columns)
                        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select} "
                                    f"FROM shard{n}.{table} WHERE run_id = ?", [run_id, run["run_id"]])
                spent = one_row(con.execute("SELECT coalesce(sum(cost_usd), 0) FROM model_calls WHERE run_id = ?",
                                            [run_id]))[0]
        except duckdb.Error as exc:
            raise ConfigError(f"cannot join the shards: {reason(exc)}", field="shards") from None
        finally:
            for n in range(len(runs)):
                con.execute(f"DETACH DATABASE IF EXISTS shard{n}")
        store.finish_run(run_id, status="interrupted" if unfinished else "finished", spent_usd=Decimal(spent),
                         planned=sum(r["conversations_planned"] or 0 for _, r in runs))
        store.set_identity(run_id, json.dumps({"merged_from": [r["run_id"] for _, r in runs]}), None)
        store.set_user_output(run_id, first.get("user_output"))
    return run_id
