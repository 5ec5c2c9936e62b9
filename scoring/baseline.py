"""Run summaries: per-cell counts of every class, the only thing the gate compares.

A summary comes from a stored run, from conversations scored in process (the calibration
benchmark), or from a blessed baseline file: a small JSON file meant to be committed to git,
one line per cell, so that a diff shows which cells moved. `simrun baseline bless RUN --out
FILE` writes it; loading validates it with pydantic and names the file in every error.

A summary never holds a transcript: it is counts, the dataset hash and the scorer version,
which is all a verdict needs and all two runs must agree on to be compared.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError, model_validator

from scoring import rates as R
from scoring.scorer import ALL_CLASSES, SCORER_VERSION, kind_of
from scoring.store import Store
from scoring.transcript import NOT_THE_RUNTIME, Scorecard
from scoring.errors import SimrunError, StoreError

GATE_CLASSES = (*ALL_CLASSES, *R.OUTCOME_CLASSES)
FORMAT = "simrun-baseline"
FORMAT_VERSION = 1
COUNT_FIELDS = ("fired", "scored", "unverifiable")


class BaselineError(SimrunError):
    """A baseline that is missing, unreadable, or not a simrun baseline."""


@dataclass(frozen=True)
class Counts:
    fired: int              # conversations where the class fired
    scored: int             # conversations where it could be decided (fired or clean)
    unverifiable: int       # conversations where the evidence was missing

    @property
    def rate(self) -> float | None:
        return self.fired / self.scored if self.scored else None

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(self.fired + other.fired, self.scored + other.scored,
                      self.unverifiable + other.unverifiable)


ZERO = Counts(0, 0, 0)
Cell = tuple[str, str]      # (persona, goal)


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    dataset_hash: str
    scorer_version: str
    repetitions: int
    cells: Mapping[Cell, Mapping[str, Counts]]
    source: str             # where it came from, for messages: a file, or a run in a database

    def total(self, cls: str) -> Counts:
        out = ZERO
        for counts in self.cells.values():
            out = out + counts.get(cls, ZERO)
        return out

    @property
    def personas(self) -> list[str]:
        return sorted({p for p, _ in self.cells})

    @property
    def goals(self) -> list[str]:
        return sorted({g for _, g in self.cells})


# --- building ---------------------------------------------------------------------------------

def summary_from_store(store: Store, run: str | None) -> RunSummary:
    row = store.run(run)
    counts = R.cell_counts(store, row["run_id"])
    cells = {cell: {cls: Counts(*counts[cell].get(cls, (0, 0, 0))) for cls in GATE_CLASSES}
             for cell in sorted(counts)}
    return RunSummary(row["run_id"], row["dataset_hash"], row["scorer_version"], int(row["repetitions"]),
                      cells, f"run {row['run_id']} in {store.path}")


def scorecard_counts(scorecard: Scorecard) -> dict[str, Counts]:
    """One conversation's contribution to its cell, by the rules of `scoring.rates`."""
    counted = scorecard.end not in NOT_THE_RUNTIME
    out: dict[str, Counts] = {}
    for cls in ALL_CLASSES:
        check = scorecard.checks.get(cls)
        # Progress rates leave out conversations that are not the runtime's doing.
        if check is None or (not counted and kind_of(cls) == "progress"):
            out[cls] = ZERO
            continue
        status = check.status
        out[cls] = Counts(int(status == "fired"), int(status != "unverifiable"), int(status == "unverifiable"))
    if counted:
        out["runtime_error"] = Counts(int(scorecard.end == "runtime_error"), 1, 0)
        reached = scorecard.goal_reached
        out["goal_not_reached"] = Counts(int(reached is False), int(reached is not None), int(reached is None))
    else:
        out["runtime_error"] = out["goal_not_reached"] = ZERO
    return out


def summary_from_scorecards(run_id: str, dataset_hash: str, repetitions: int,
                            scored: Iterable[tuple[str, str, Scorecard]],
                            scorer_version: str = SCORER_VERSION) -> RunSummary:
    """A summary of conversations scored in process: (persona, goal, scorecard) each."""
    cells: dict[Cell, dict[str, Counts]] = {}
    for persona, goal, card in scored:
        cell = cells.setdefault((persona, goal), {cls: ZERO for cls in GATE_CLASSES})
        for cls, add in scorecard_counts(card).items():
            cell[cls] = cell[cls] + add
    return RunSummary(run_id, dataset_hash, scorer_version, repetitions,
                      {c: cells[c] for c in sorted(cells)}, f"run {run_id} (in process)")


# --- the committed file -----------------------------------------------------------------------

class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MatrixShape(_Model):
    personas: list[str] = Field(description="Persona ids of the run.")
    goals: list[str] = Field(description="Goal ids of the run.")
    repetitions: int = Field(ge=1, description="Conversations per cell the run was asked for.")
    cells: int = Field(ge=0, description="Cells with at least one conversation.")
    conversations: int = Field(ge=0, description="Conversations in the run.")


class BaselineFile(_Model):
    """A blessed baseline: per-cell counts of every class, and what makes runs comparable."""

    format: Literal["simrun-baseline"] = Field(description="Always 'simrun-baseline'.")
    format_version: Literal[1] = Field(description="Version of this file's layout.")
    run_id: str = Field(description="The blessed run.")
    dataset_hash: str = Field(description="Hash of the personas and goals the run used.")
    scorer_version: str = Field(description="Scorer version the run was scored with.")
    simrun_version: str = Field(description="simrun that blessed it.")
    blessed_at: str = Field(description="When it was blessed (UTC, ISO 8601).")
    matrix: MatrixShape
    classes: list[str] = Field(description="Classes counted in every cell.")
    count_fields: list[str] = Field(description="What each cell's triple holds, in order.")
    cells: dict[str, dict[str, tuple[NonNegativeInt, NonNegativeInt, NonNegativeInt]]] = Field(
        description="'persona/goal' -> class -> [fired, scored, unverifiable].")

    @model_validator(mode="after")
    def _consistent(self) -> "BaselineFile":
        if list(self.count_fields) != list(COUNT_FIELDS):
            raise ValueError(f"count_fields must be {list(COUNT_FIELDS)}")
        classes = set(self.classes)
        for key, counts in self.cells.items():
            if key.count("/") != 1:
                raise ValueError(f"cell {key!r}: a cell is 'persona/goal'")
            if set(counts) != classes:
                missing, extra = sorted(classes - set(counts)), sorted(set(counts) - classes)
                raise ValueError(f"cell {key!r}: classes differ from 'classes' (missing {missing}, extra {extra})")
            for cls, (fired, scored, _) in counts.items():
                if fired > scored:
                    raise ValueError(f"cell {key!r}, class {cls!r}: fired {fired} > scored {scored}")
        return self


def baseline_json(summary: RunSummary, *, simrun_version: str) -> str:
    """The file's text: metadata indented, then one line per cell (a readable git diff)."""
    head = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "run_id": summary.run_id,
        "dataset_hash": summary.dataset_hash, "scorer_version": summary.scorer_version,
        "simrun_version": simrun_version,
        "blessed_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "matrix": {"personas": summary.personas, "goals": summary.goals,
                   "repetitions": summary.repetitions, "cells": len(summary.cells),
                   "conversations": _conversations(summary)},
        "classes": list(GATE_CLASSES), "count_fields": list(COUNT_FIELDS), "cells": "@CELLS@",
    }
    rows = [f"    {json.dumps(f'{p}/{g}')}: "
            + json.dumps({cls: [c.fired, c.scored, c.unverifiable] for cls, c in counts.items()})
            for (p, g), counts in summary.cells.items()]
    cells = "{\n" + ",\n".join(rows) + "\n  }" if rows else "{}"
    return json.dumps(head, indent=2).replace('"@CELLS@"', cells) + "\n"


def _conversations(summary: RunSummary) -> int:
    # Guarantees are counted in every conversation, so any one of them counts them all.
    probe = ALL_CLASSES[-1]
    return sum(c[probe].scored + c[probe].unverifiable for c in summary.cells.values())


def write_baseline(summary: RunSummary, path: Path | str, *, simrun_version: str) -> Path:
    path = Path(path)
    if not path.parent.is_dir():
        raise BaselineError(f"{path}: the folder {path.parent} does not exist; create it first")
    path.write_text(baseline_json(summary, simrun_version=simrun_version), encoding="utf-8")
    return path


def load_baseline(path: Path | str) -> RunSummary:
    path = Path(path)
    fix = f"write it again with `simrun baseline bless RUN --out {path}`"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such baseline file; {fix}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: cannot read the baseline ({exc}); {fix}") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); {fix}") from None
    try:
        model = BaselineFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(map(str, err["loc"])) or "file"
        message = err["msg"].removeprefix("Value error, ")
        raise BaselineError(f"{path} ({where}): {message}; not a simrun baseline, or damaged: {fix}") from None
    cells = {}
    for key, counts in model.cells.items():
        persona, goal = key.split("/")
        cells[(persona, goal)] = {cls: Counts(*counts[cls]) if cls in counts else ZERO for cls in GATE_CLASSES}
    return RunSummary(model.run_id, model.dataset_hash, model.scorer_version, model.matrix.repetitions,
                      cells, str(path))


def open_baseline(ref: str, db: Path | str) -> RunSummary:
    """`--baseline FILE|RUN`: a blessed file if there is one at that path, else a stored run."""
    path = Path(ref)
    if path.is_file():
        return load_baseline(path)
    bless = "bless one with `simrun baseline bless RUN --out FILE`"
    if path.suffix == ".json" or "/" in ref or "\\" in ref:
        raise BaselineError(f"{ref}: no such baseline file; {bless}, or pass a run id")
    if not Path(db).exists():
        raise BaselineError(f"no baseline {ref!r}: no such file, and no database {db} to find a run in; "
                            f"{bless}, or pass --db")
    try:
        with Store(db, create=False) as store:
            return summary_from_store(store, ref)
    except StoreError as exc:
        raise BaselineError(f"no baseline {ref!r}: no such file, and {exc}") from None

