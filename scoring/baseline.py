"""Run summaries: per-cell counts of every class, the only thing the gate compares.

A summary comes from a stored run, from conversations scored in process (the calibration
benchmark), or from a blessed baseline file: a small JSON file meant to be committed to git,
one line per cell, so that a diff shows which cells moved. `simrun baseline bless RUN --out
FILE` writes it; `--baseline-ref REF` reads one from git. Besides the counts, a summary keeps
per cell the repetitions where each class fired (and those where it was not scored), so that
the gate can name the conversations that flipped; files blessed before that (format 1) still
load, without them.

A baseline may come from the pull request it judges, so it is untrusted: its size, its JSON,
its text fields and its counts are checked (`validate_summary`: every count fits in the cell's
repetitions, the repetitions agree with the counts) and every error names the file and field.
A summary never holds a transcript: it is counts, the dataset hash and the scorer version,
which is all a verdict needs and all two runs must agree on to be compared.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scoring import rates as R
from scoring.run_ids import RUN_ID, checked_run_id
from scoring.scorer import ALL_CLASSES, SCORER_VERSION, kind_of
from scoring.store import Store
from scoring.transcript import NOT_THE_RUNTIME, Scorecard
from scoring.errors import SimrunError, StoreError

GATE_CLASSES = (*ALL_CLASSES, *R.OUTCOME_CLASSES)
FORMAT = "simrun-baseline"
FORMAT_VERSION = 2
COUNT_FIELDS = ("fired", "scored", "unverifiable")
MAX_BYTES = 64 * 2**20          # a baseline of a million cells is far smaller
GIT_TIMEOUT_S = 30
_ID = r"[a-z0-9][a-z0-9_.-]{0,127}"     # persona and goal ids (scoring.dataset)


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

    def __str__(self) -> str:
        return f"{self.fired}/{self.scored}"


ZERO = Counts(0, 0, 0)
Cell = tuple[str, str]      # (persona, goal)


@dataclass(frozen=True)
class CellRepetitions:
    """Which repetitions of one cell a run holds, and each class's status in them."""

    held: frozenset[int]
    fired: Mapping[str, frozenset[int]]         # class -> repetitions where it fired
    unscored: Mapping[str, frozenset[int]]      # class -> repetitions where it was not scored
    ids: Mapping[int, str] = field(default_factory=dict)   # only where not "persona/goal/repetition"

    def clean(self, cls: str) -> frozenset[int]:
        return self.held - self.fired.get(cls, frozenset()) - self.unscored.get(cls, frozenset())


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    dataset_hash: str
    scorer_version: str
    repetitions: int
    cells: Mapping[Cell, Mapping[str, Counts]]
    source: str             # where it came from, for messages: a file, or a run in a database
    # Per cell, the repetitions behind the counts; None when the source does not say (a
    # baseline file of format 1, a run whose conversations share repetition numbers).
    repetitions_held: Mapping[Cell, CellRepetitions] | None = None
    why_no_repetitions: str = ""

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

    def conversation_id(self, cell: Cell, repetition: int) -> str:
        ids = self.repetitions_held[cell].ids if self.repetitions_held and cell in self.repetitions_held else {}
        return ids.get(repetition, f"{cell[0]}/{cell[1]}/{repetition}")


def conversations_in(counts: Mapping[str, Counts]) -> int:
    """A cell's conversations: guarantees are counted in every one, so any of them counts them all."""
    probe = counts[ALL_CLASSES[-1]]
    return probe.scored + probe.unverifiable


# --- building ---------------------------------------------------------------------------------

def summary_from_store(store: Store, run: str | None) -> RunSummary:
    row = store.run(run)
    source = f"run {row['run_id']} in {store.path}"
    try:
        run_id = checked_run_id(row["run_id"], str(store.path))
    except StoreError as exc:
        raise BaselineError(str(exc)) from None
    counts = R.cell_counts(store, run_id)
    cells = {cell: {cls: Counts(*counts[cell].get(cls, (0, 0, 0))) for cls in GATE_CLASSES}
             for cell in sorted(counts)}
    held, why = _repetitions_from_rows(R.cell_repetitions(store, run_id))
    summary = RunSummary(run_id, row["dataset_hash"], row["scorer_version"], int(row["repetitions"]),
                         cells, source, held, why)
    validate_summary(summary)
    return summary


def _repetitions_from_rows(rows) -> tuple[dict[Cell, CellRepetitions] | None, str]:
    held: dict[Cell, set[int]] = {}
    statuses: dict[Cell, dict[str, dict[str, set[int]]]] = {}
    ids: dict[Cell, dict[int, str]] = {}
    for persona, goal, rep, cid, cls, status in rows:
        cell = (persona, goal)
        if cls is None:
            if rep in held.setdefault(cell, set()):
                return None, (f"its cell {persona}/{goal} holds repetition {rep} twice (imported conversations?), "
                              "so a conversation is not known by its cell and repetition")
            held[cell].add(rep)
            if cid != f"{persona}/{goal}/{rep}":
                ids.setdefault(cell, {})[rep] = cid
        elif cls in GATE_CLASSES:
            statuses.setdefault(cell, {}).setdefault(status, {}).setdefault(cls, set()).add(rep)
    return {cell: CellRepetitions(frozenset(reps),
                                  {c: frozenset(r) for c, r in statuses.get(cell, {}).get("fired", {}).items()},
                                  {c: frozenset(r) for c, r in statuses.get(cell, {}).get("unscored", {}).items()},
                                  ids.get(cell, {}))
            for cell, reps in sorted(held.items())}, ""


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
                            scored: Iterable[tuple[str, str, int, Scorecard]],
                            scorer_version: str = SCORER_VERSION) -> RunSummary:
    """A summary of conversations scored in process: (persona, goal, repetition, scorecard) each."""
    return summary_from_counts(run_id, dataset_hash, repetitions,
                               [(p, g, r, scorecard_counts(card)) for p, g, r, card in scored], scorer_version)


def summary_from_counts(run_id: str, dataset_hash: str, repetitions: int,
                        conversations: Iterable[tuple[str, str, int, Mapping[str, Counts]]],
                        scorer_version: str = SCORER_VERSION) -> RunSummary:
    """A summary of conversations given as (persona, goal, repetition, `scorecard_counts`) each."""
    cells: dict[Cell, dict[str, Counts]] = {}
    rows = []
    for persona, goal, rep, counts in conversations:
        cell = cells.setdefault((persona, goal), {cls: ZERO for cls in GATE_CLASSES})
        cid = f"{persona}/{goal}/{rep}"
        rows.append((persona, goal, rep, cid, None, "held"))
        for cls, add in counts.items():
            cell[cls] = cell[cls] + add
            if add.fired or not add.scored:
                rows.append((persona, goal, rep, cid, cls, "fired" if add.fired else "unscored"))
    held, why = _repetitions_from_rows(rows)
    return RunSummary(run_id, dataset_hash, scorer_version, repetitions, {c: cells[c] for c in sorted(cells)},
                      f"run {run_id} (in process)", held, why)


def validate_summary(summary: RunSummary) -> None:
    """Every count fits in its cell, every cell in the repetitions, and the repetitions agree
    with the counts. A summary that breaks any of these was not written by simrun."""
    where = summary.source
    for (persona, goal), counts in summary.cells.items():
        key = f"{persona}/{goal}"
        if set(counts) != set(GATE_CLASSES):
            missing, extra = sorted(set(GATE_CLASSES) - set(counts)), sorted(set(counts) - set(GATE_CLASSES))
            raise BaselineError(f"{where}: cell {key} does not count every class the scorer knows "
                                f"(missing {missing}, unknown {_shown(extra)})")
        held = conversations_in(counts)
        if held > summary.repetitions:
            raise BaselineError(f"{where}: cell {key} holds {held} conversations, more than the run's "
                                f"{summary.repetitions} repetitions")
        for cls, c in counts.items():
            if min(c.fired, c.scored, c.unverifiable) < 0:
                raise BaselineError(f"{where}: cell {key}, class {cls}: a negative count")
            if c.fired > c.scored:
                raise BaselineError(f"{where}: cell {key}, class {cls}: fired {c.fired} > scored {c.scored}")
            if c.scored + c.unverifiable > held:
                raise BaselineError(f"{where}: cell {key}, class {cls}: {c.scored} scored + {c.unverifiable} "
                                    f"UNVERIFIABLE conversations, more than the cell's {held} (of "
                                    f"{summary.repetitions} repetitions)")
    if summary.repetitions_held is None:
        return
    if set(summary.repetitions_held) != set(summary.cells):
        raise BaselineError(f"{where}: the repetitions are not given for the same cells as the counts")
    for cell, reps in summary.repetitions_held.items():
        key, counts = f"{cell[0]}/{cell[1]}", summary.cells[cell]
        if any(not 0 <= r < summary.repetitions for r in reps.held) or len(reps.held) != conversations_in(counts):
            raise BaselineError(f"{where}: cell {key}: repetitions {sorted(reps.held)[:20]} do not match its "
                                f"{conversations_in(counts)} conversations of {summary.repetitions} repetitions")
        for cls in set(reps.fired) | set(reps.unscored):
            if cls not in GATE_CLASSES:
                raise BaselineError(f"{where}: cell {key}: unknown class {_shown(cls)} in its repetitions")
        for cls, c in counts.items():
            fired, unscored = reps.fired.get(cls, frozenset()), reps.unscored.get(cls, frozenset())
            if not fired | unscored <= reps.held or fired & unscored:
                raise BaselineError(f"{where}: cell {key}, class {cls}: repetitions outside the cell's, or both "
                                    "fired and not scored")
            if len(fired) != c.fired or len(reps.held) - len(unscored) != c.scored:
                raise BaselineError(f"{where}: cell {key}, class {cls}: the repetitions ({len(fired)} fired, "
                                    f"{len(reps.held) - len(unscored)} scored) disagree with the counts "
                                    f"({c.fired} fired, {c.scored} scored)")


def _shown(value: Any, limit: int = 80) -> str:
    """Untrusted text, made safe for one line of output: printable, and cut."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= limit else text[:limit] + "…"


# --- the committed file -----------------------------------------------------------------------

Count = Annotated[int, Field(strict=True, ge=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MatrixShape(_Model):
    personas: list[Annotated[str, Field(pattern=f"^{_ID}$")]] = Field(description="Persona ids of the run.")
    goals: list[Annotated[str, Field(pattern=f"^{_ID}$")]] = Field(description="Goal ids of the run.")
    repetitions: int = Field(strict=True, ge=1, le=10_000, description="Conversations per cell the run was asked for.")
    cells: Count = Field(description="Cells with at least one conversation.")
    conversations: Count = Field(description="Conversations in the run.")


class RepetitionsOfCell(_Model):
    held: list[Count] | None = Field(None, description="Repetitions the cell holds, when not all of 0..repetitions-1.")
    fired: dict[str, list[Count]] = Field(default_factory=dict, description="Class -> repetitions where it fired.")
    unscored: dict[str, list[Count]] = Field(
        default_factory=dict, description="Class -> repetitions where it was not scored (UNVERIFIABLE, or left out).")


class BaselineFile(_Model):
    format: Literal["simrun-baseline"] = Field(description="Always 'simrun-baseline'.")
    format_version: Literal[1, 2] = Field(description="Version of this file's layout (1: without repetitions).")
    run_id: str = Field(pattern=f"^{RUN_ID.pattern}$", description="The blessed run.")
    dataset_hash: str = Field(pattern=r"^[0-9a-f]{16}$", description="Hash of the personas and goals the run used.")
    scorer_version: str = Field(pattern=r"^[0-9A-Za-z][0-9A-Za-z._+-]{0,31}$",
                                description="Scorer version the run was scored with.")
    simrun_version: str = Field(pattern=r"^[0-9A-Za-z][0-9A-Za-z._+-]{0,31}$", description="simrun that blessed it.")
    blessed_at: str = Field(pattern=r"^\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)?$",
                            description="When it was blessed (UTC, ISO 8601).")
    matrix: MatrixShape
    classes: list[str] = Field(description="Classes counted in every cell: every class the scorer knows.")
    count_fields: list[str] = Field(description="What each cell's triple holds, in order.")
    cells: dict[str, dict[str, tuple[Count, Count, Count]]] = Field(
        description="'persona/goal' -> class -> [fired, scored, unverifiable].")
    repetitions: dict[str, RepetitionsOfCell] | None = Field(
        None, description="'persona/goal' -> the repetitions behind the counts (format 2).")

    @model_validator(mode="after")
    def _consistent(self) -> "BaselineFile":
        if list(self.count_fields) != list(COUNT_FIELDS):
            raise ValueError(f"count_fields must be {list(COUNT_FIELDS)}")
        if sorted(self.classes) != sorted(GATE_CLASSES):
            missing, extra = sorted(set(GATE_CLASSES) - set(self.classes)), sorted(set(self.classes) - set(GATE_CLASSES))
            raise ValueError(f"classes: a baseline counts every class the scorer knows, once (missing {missing}, "
                             f"unknown {_shown(extra)})")
        for key in self.cells:
            if not re.fullmatch(f"{_ID}/{_ID}", key):
                raise ValueError(f"cells: {_shown(key)!r} is not a cell ('persona/goal', ids as in persona and goal files)")
        matrix = self.matrix
        if matrix.cells != len(self.cells):
            raise ValueError(f"matrix.cells says {matrix.cells}, but the file holds {len(self.cells)} cells")
        probe = ALL_CLASSES[-1]
        conversations = sum(c[probe][1] + c[probe][2] for c in self.cells.values() if probe in c)
        if matrix.conversations != conversations:
            raise ValueError(f"matrix.conversations says {matrix.conversations}, but the cells hold {conversations}")
        if (sorted(set(matrix.personas)), sorted(set(matrix.goals))) != (
                sorted({k.split("/")[0] for k in self.cells}), sorted({k.split("/")[1] for k in self.cells})):
            raise ValueError("matrix.personas and matrix.goals must be the personas and goals of the cells")
        if (self.repetitions is None) != (self.format_version == 1):
            raise ValueError("repetitions: format 2 holds them, format 1 does not")
        return self


def baseline_json(summary: RunSummary, *, simrun_version: str) -> str:
    """The file's text: metadata indented, then one line per cell (a readable git diff)."""
    if summary.repetitions_held is None:
        raise BaselineError(f"{summary.source}: cannot be blessed: {summary.why_no_repetitions}")
    head = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "run_id": summary.run_id,
        "dataset_hash": summary.dataset_hash, "scorer_version": summary.scorer_version,
        "simrun_version": simrun_version,
        "blessed_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "matrix": {"personas": summary.personas, "goals": summary.goals,
                   "repetitions": summary.repetitions, "cells": len(summary.cells),
                   "conversations": sum(conversations_in(c) for c in summary.cells.values())},
        "classes": list(GATE_CLASSES), "count_fields": list(COUNT_FIELDS), "cells": "@CELLS@",
        "repetitions": "@REPETITIONS@",
    }
    counts = {f"{p}/{g}": {cls: [c.fired, c.scored, c.unverifiable] for cls, c in cell.items()}
              for (p, g), cell in summary.cells.items()}
    every = frozenset(range(summary.repetitions))
    reps = {}
    for (p, g), r in summary.repetitions_held.items():
        line: dict[str, Any] = {} if r.held == every else {"held": sorted(r.held)}
        for name, by_class in (("fired", r.fired), ("unscored", r.unscored)):
            listed = {cls: sorted(by_class[cls]) for cls in GATE_CLASSES if by_class.get(cls)}
            if listed:
                line[name] = listed
        reps[f"{p}/{g}"] = line
    text = json.dumps(head, indent=2)
    for marker, rows in (("@CELLS@", counts), ("@REPETITIONS@", reps)):
        lines = [f"    {json.dumps(key)}: {json.dumps(value)}" for key, value in rows.items()]
        text = text.replace(f'"{marker}"', "{\n" + ",\n".join(lines) + "\n  }" if lines else "{}")
    return text + "\n"


def write_baseline(summary: RunSummary, path: Path | str, *, simrun_version: str) -> Path:
    path = Path(path)
    if not path.parent.is_dir():
        raise BaselineError(f"{path}: the folder {path.parent} does not exist; create it first")
    path.write_text(baseline_json(summary, simrun_version=simrun_version), encoding="utf-8")
    return path


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {_shown(key)!r} appears twice")
        seen[key] = value
    return seen


def _not_a_number(value: str) -> None:
    raise ValueError(f"{value} is not a count")


def parse_baseline(data: bytes, where: str, fix: str) -> RunSummary:
    """A baseline from the bytes of a file; every error names `where` and says `fix`."""
    if len(data) > MAX_BYTES:
        raise BaselineError(f"{where}: {len(data) / 2**20:.0f} MB is larger than a baseline can be "
                            f"({MAX_BYTES // 2**20} MB); {fix}")
    try:
        raw = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_not_a_number)
    except UnicodeDecodeError:
        raise BaselineError(f"{where}: not UTF-8 text; {fix}") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{where}:{exc.lineno}: not valid JSON ({exc.msg}); {fix}") from None
    except RecursionError:
        raise BaselineError(f"{where}: nested too deep to be a baseline; {fix}") from None
    except ValueError as exc:
        raise BaselineError(f"{where}: {exc}; {fix}") from None
    try:
        model = BaselineFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(_shown(part, 40) for part in err["loc"]) or "file"
        message = _shown(err["msg"].removeprefix("Value error, "), 300)
        raise BaselineError(f"{where} ({loc}): {message}; not a simrun baseline, or damaged: {fix}") from None
    cells: dict[Cell, dict[str, Counts]] = {}
    for key, counts in model.cells.items():
        persona, goal = key.split("/")
        cells[(persona, goal)] = {cls: Counts(*triple) for cls, triple in counts.items()}
    held = None
    if model.repetitions is not None:
        every = list(range(model.matrix.repetitions))
        held = {tuple(key.split("/")): CellRepetitions(
            frozenset(every if r.held is None else r.held),
            {cls: frozenset(reps) for cls, reps in r.fired.items()},
            {cls: frozenset(reps) for cls, reps in r.unscored.items()})
            for key, r in model.repetitions.items()}
    why = "" if held is not None else (f"the baseline {where} was blessed before simrun kept repetitions "
                                        "(format 1); bless it again to list them")
    summary = RunSummary(model.run_id, model.dataset_hash, model.scorer_version, model.matrix.repetitions,
                         cells, where, held, why)
    try:
        validate_summary(summary)
    except BaselineError as exc:
        raise BaselineError(f"{exc}; not a simrun baseline, or damaged: {fix}") from None
    return summary


def load_baseline(path: Path | str) -> RunSummary:
    path = Path(path)
    fix = f"write it again with `simrun baseline bless RUN --out {path}`"
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise BaselineError(f"{path}: {size / 2**20:.0f} MB is larger than a baseline can be "
                                f"({MAX_BYTES // 2**20} MB); {fix}")
        data = path.read_bytes()
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such baseline file; {fix}") from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read the baseline ({exc.strerror or exc}); {fix}") from None
    return parse_baseline(data, str(path), fix)


def baseline_from_git(ref: str, cwd: Path | str | None = None) -> RunSummary:
    """`--baseline-ref REF`: the baseline as git holds it at REF (`origin/main:baselines/main.json`).

    git runs with no shell, reading one blob; its output is bounded and its time limited, so a
    huge or hostile object cannot exhaust memory or hang the job.
    """
    flag = f"--baseline-ref {_shown(ref)}"
    fix = "name a committed file as BRANCH:PATH (e.g. origin/main:baselines/main.json), after `git fetch`"
    if not ref or ref.startswith("-") or any(not ch.isprintable() for ch in ref) or len(ref) > 1024:
        raise BaselineError(f"{flag}: not a git object name; {fix}")
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_LAZY_FETCH": "1"}
    with tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen(["git", "cat-file", "blob", ref], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=errors, cwd=cwd, env=env)
        except OSError as exc:
            raise BaselineError(f"{flag}: cannot run git ({exc.strerror}): install git, or pass --baseline FILE "
                                "with the file the protected branch holds") from None
        watchdog = threading.Timer(GIT_TIMEOUT_S, proc.kill)
        watchdog.start()
        try:
            chunks, size = [], 0
            while size <= MAX_BYTES:
                chunk = proc.stdout.read(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > MAX_BYTES:
                proc.kill()
            proc.stdout.close()
            code = proc.wait()
        finally:
            watchdog.cancel()
        if size > MAX_BYTES:
            raise BaselineError(f"{flag}: more than {MAX_BYTES // 2**20} MB, larger than a baseline can be; {fix}")
        if code != 0:
            errors.seek(0)
            said = next((line for line in errors.read(4096).decode("utf-8", "replace").splitlines() if line.strip()),
                        f"exit status {code}")
            timed_out = " (timed out)" if code < 0 else ""
            raise BaselineError(f"{flag}: git cannot read it{timed_out}: {_shown(said, 200)}; {fix}")
    return parse_baseline(b"".join(chunks), f"{_shown(ref)} (git)", fix)


def open_baseline(ref: str, db: Path | str) -> RunSummary:
    """`--baseline FILE|RUN`: a blessed file if there is one at that path, else a stored run."""
    path = Path(ref)
    if path.is_file():
        return load_baseline(path)
    bless = "bless one with `simrun baseline bless RUN --out FILE`"
    if path.suffix == ".json" or "/" in ref or "\\" in ref:
        raise BaselineError(f"{_shown(ref)}: no such baseline file; {bless}, or pass a run id")
    if not Path(db).exists():
        raise BaselineError(f"no baseline {_shown(ref)!r}: no such file, and no database {db} to find a run in; "
                            f"{bless}, or pass --db")
    try:
        with Store(db, create=False) as store:
            return summary_from_store(store, ref)
    except StoreError as exc:
        raise BaselineError(f"no baseline {_shown(ref)!r}: no such file, and {exc}") from None
