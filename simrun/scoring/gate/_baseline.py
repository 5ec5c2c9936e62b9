"""The blessed baseline: a run's summary as a small JSON file meant to be committed to git.

One line per cell, so that a diff shows which cells moved. `simrun baseline bless RUN --out
FILE` writes it; `--baseline FILE` and `--baseline-ref REF` (a blob git holds) read it back.
Format 3 keeps each persona's and goal's content hash, so that a pull request that adds or edits
goals is gated on the cells it shares with the baseline (`simrun.scoring.gate._sharing`). Older files
still load: format 2 (no content hashes) gates only a candidate of the same dataset, and format 1
(no repetitions either) cannot list the conversations that flipped. Format 5 is a baseline
blessed from several runs (`simrun baseline bless RUN RUN ...`): their repetitions side by side,
run j's after run j-1's, and `runs` naming them, so that the gate can measure how far a cell's
rate moves from run to run (`simrun.scoring.gate._variation`). Format 6 is format 4 with the
run's `seed`: a candidate of the same seed, both with a scripted user, is judged by the paired
test (`simrun.scoring.gate._paired`); a file of an older format, or of several runs, never is.

A baseline may come from the pull request it judges, so it is untrusted: its size, its JSON,
its text fields and its counts are checked, and every error names the file and field.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from simrun._errors import BaselineError, Parameter, StoreError
from simrun._input_files import printable
from simrun._storable import MAX_REPETITIONS
from simrun._writing import write_file
from simrun.scoring.checks import ALL_CLASSES
from simrun.scoring.gate._summary import (
    GATE_CLASSES,
    USER_BACKEND,
    Cell,
    CellRepetitions,
    Counts,
    RunSummary,
    conversations_in,
    summary_from_store,
    validate_summary,
)
from simrun.scoring.store import RUN_ID, Store

FORMAT = "simrun-baseline"
FORMAT_VERSION = 6             # of one run's baseline; several runs blessed together are format 5
MAX_RUNS = 100                 # runs blessed together
COUNT_FIELDS = ("fired", "scored", "unverifiable")
MAX_BYTES = 64 * 2**20          # a baseline of a million cells is far smaller
GIT_TIMEOUT_S = 30
_ID = r"[a-z0-9][a-z0-9_.-]{0,127}"     # persona and goal ids (simrun.scoring.dataset._models)


Count = Annotated[int, Field(strict=True, ge=0)]
# One cell of a baseline: class -> [fired, scored, unverifiable].
CountsOfCell = dict[str, tuple[Count, Count, Count]]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MatrixShape(_Model):
    personas: list[Annotated[str, Field(pattern=f"^{_ID}$")]] = Field(description="Persona ids of the run.")
    goals: list[Annotated[str, Field(pattern=f"^{_ID}$")]] = Field(description="Goal ids of the run.")
    repetitions: int = Field(strict=True, ge=1, le=MAX_REPETITIONS,
                             description="Conversations per cell the run was asked for.")
    cells: Count = Field(description="Cells with at least one conversation.")
    conversations: Count = Field(description="Conversations in the run.")


class RepetitionsOfCell(_Model):
    held: list[Count] | None = Field(None, description="Repetitions the cell holds, when not all of 0..repetitions-1.")
    fired: dict[str, list[Count]] = Field(default_factory=dict, description="Class -> repetitions where it fired.")
    unscored: dict[str, list[Count]] = Field(
        default_factory=dict, description="Class -> repetitions where it was not scored (UNVERIFIABLE, or left out).")


class BaselineFile(_Model):
    format: Literal["simrun-baseline"] = Field(description="Always 'simrun-baseline'.")
    format_version: Literal[1, 2, 3, 4, 5, 6] = Field(description="Version of this file's layout (1: without "
                                                      "repetitions; 2: without the persona and goal hashes; 3: "
                                                      "without the user backend; 4: without the seed; 5: blessed "
                                                      "from several runs; 6: one run, with its seed).")
    run_id: str = Field(pattern=f"^{RUN_ID.pattern}$", description="The blessed run.")
    dataset_hash: str = Field(pattern=r"^[0-9a-f]{16}$", description="Hash of the personas and goals the run used.")
    scorer_version: str = Field(pattern=r"^[0-9A-Za-z][0-9A-Za-z._+-]{0,31}$",
                                description="Scorer version the run was scored with.")
    simrun_version: str = Field(pattern=r"^[0-9A-Za-z][0-9A-Za-z._+-]{0,31}$", description="simrun that blessed it.")
    user_backend: str | None = Field(None, pattern=USER_BACKEND, description="Who played the user: scripted, or "
                                     "backend:model (format 4): a candidate measured with another is refused.")
    seed: int | None = Field(None, strict=True, ge=-(2**63), lt=2**63,
                             description="The run's seed, run.seed (format 6): a candidate of the same seed, "
                                         "both with a scripted user, is paired with it by cell and repetition.")
    blessed_at: str = Field(pattern=r"^\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)?$",
                            description="When it was blessed (UTC, ISO 8601).")
    matrix: MatrixShape
    classes: list[str] = Field(description="Classes counted in every cell: every class the scorer knows.")
    count_fields: list[str] = Field(description="What each cell's triple holds, in order.")
    cells: dict[str, CountsOfCell] = Field(
        description="'persona/goal' -> class -> [fired, scored, unverifiable].")
    repetitions: dict[str, RepetitionsOfCell] | None = Field(
        None, description="'persona/goal' -> the repetitions behind the counts (format 2).")
    runs: list[Annotated[str, Field(pattern=f"^{RUN_ID.pattern}$")]] | None = Field(
        None, min_length=2, max_length=MAX_RUNS,
        description="The runs blessed together (format 5), in order: run j holds repetitions j*R/K to "
                    "(j+1)*R/K - 1 of every cell (R matrix.repetitions, K runs).")
    items: dict[Annotated[str, Field(pattern=f"^(persona|goal):{_ID}$")],
                Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]] | None = Field(
        None, description="'persona:<id>' / 'goal:<id>' -> content hash, of the whole dataset (format 3).")

    @model_validator(mode="after")
    def _consistent(self) -> BaselineFile:
        if list(self.count_fields) != list(COUNT_FIELDS):
            raise ValueError(f"count_fields must be {list(COUNT_FIELDS)}")
        if sorted(self.classes) != sorted(GATE_CLASSES):
            missing = sorted(set(GATE_CLASSES) - set(self.classes))
            extra = sorted(set(self.classes) - set(GATE_CLASSES))
            raise ValueError(f"classes: a baseline counts every class the scorer knows, once (missing {missing}, "
                             f"unknown {printable(extra)})")
        for key in self.cells:
            if not re.fullmatch(f"{_ID}/{_ID}", key):
                raise ValueError(f"cells: {printable(key)!r} is not a cell ('persona/goal', ids as in persona "
                                 "and goal files)")
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
            raise ValueError("repetitions: formats 2 and 3 hold them, format 1 does not")
        if (self.items is None) != (self.format_version < 3):
            raise ValueError("items: formats 3 and 4 hold the persona and goal hashes, formats 1 and 2 do not")
        if self.format_version != 5 and (self.user_backend is None) != (self.format_version < 4):
            raise ValueError("user_backend: formats 4 and 6 name who played the user, formats 1 to 3 do not")
        if (self.seed is None) != (self.format_version != 6):
            raise ValueError("seed: format 6 keeps the run's seed, formats 1 to 5 do not")
        if (self.runs is None) != (self.format_version != 5):
            raise ValueError("runs: format 5 names the runs blessed together, the other formats hold one run")
        if self.runs is not None:
            if len(set(self.runs)) != len(self.runs):
                raise ValueError("runs: a run is named twice")
            if matrix.repetitions % len(self.runs):
                raise ValueError(f"runs: {len(self.runs)} runs cannot share matrix.repetitions {matrix.repetitions} "
                                 "equally (each run holds the same repetitions)")
        return self


def baseline_json(summary: RunSummary, *, simrun_version: str) -> str:
    """The file's text: metadata indented, then one line per cell (a readable git diff)."""
    if summary.repetitions_held is None:
        raise BaselineError(f"{summary.source}: cannot be blessed: {summary.why_no_repetitions}")
    if summary.runs and summary.items is None:
        raise BaselineError(f"{summary.source}: runs that do not keep their persona and goal hashes (made before "
                            "simrun kept them, or in process) cannot be blessed together; bless one, or run again")
    head = {
        # A run that does not keep its persona and goal hashes (written by hand, or in process)
        # is blessed as format 2: it gates candidates of its own dataset only.
        "format": FORMAT,
        "format_version": 5 if summary.runs else 2 if summary.items is None else
                          3 if not summary.user_backend else 4 if summary.seed is None else FORMAT_VERSION,
        "run_id": summary.run_id,
        **({"runs": list(summary.runs)} if summary.runs else {}),
        "dataset_hash": summary.dataset_hash, "scorer_version": summary.scorer_version,
        "simrun_version": simrun_version,
        **({"user_backend": summary.user_backend}
           if (summary.items is not None or summary.runs) and summary.user_backend else {}),
        # Kept for one run only: several runs have several seeds, and are never paired.
        **({"seed": summary.seed} if summary.seed is not None and summary.items is not None and summary.user_backend
           and not summary.runs else {}),
        "blessed_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        "matrix": {"personas": summary.personas, "goals": summary.goals,
                   "repetitions": summary.repetitions, "cells": len(summary.cells),
                   "conversations": sum(conversations_in(c) for c in summary.cells.values())},
        "classes": list(GATE_CLASSES), "count_fields": list(COUNT_FIELDS), "cells": "@CELLS@",
        "repetitions": "@REPETITIONS@",
        **({"items": dict(sorted(summary.items.items()))} if summary.items is not None else {}),
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
    # By simrun's one writer: whole, never through a link; a first bless makes its folder.
    return write_file(path, baseline_json(summary, simrun_version=simrun_version), what="the baseline",
                      make_folders=True)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {printable(key)!r} appears twice")
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
        _first_bad_entry(raw)
        model = BaselineFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors(include_input=False, include_url=False)[0]
        loc = ".".join(printable(part, 40) for part in err["loc"]) or "file"
        message = printable(err["msg"].removeprefix("Value error, "), 300)
        raise BaselineError(f"{where} ({loc}): {message}; not a simrun baseline, or damaged: {fix}") from None
    cells: dict[Cell, dict[str, Counts]] = {}
    for key, counts in model.cells.items():
        cells[_cell(key)] = {cls: Counts(*triple) for cls, triple in counts.items()}
    held = None
    if model.repetitions is not None:
        every = list(range(model.matrix.repetitions))
        held = {_cell(key): CellRepetitions(
            frozenset(every if r.held is None else r.held),
            {cls: frozenset(reps) for cls, reps in r.fired.items()},
            {cls: frozenset(reps) for cls, reps in r.unscored.items()})
            for key, r in model.repetitions.items()}
    why = "" if held is not None else (f"the baseline {where} was blessed before simrun kept repetitions "
                                        "(format 1); bless it again to list them")
    summary = RunSummary(model.run_id, model.dataset_hash, model.scorer_version, model.matrix.repetitions,
                         cells, where, held, why, model.items, model.user_backend, tuple(model.runs or ()),
                         model.seed)
    try:
        validate_summary(summary)
    except BaselineError as exc:
        raise BaselineError(f"{exc}; not a simrun baseline, or damaged: {fix}") from None
    return summary


def _cell(key: str) -> Cell:
    """"persona/goal" as the cell it names (the file's keys are checked to have one slash)."""
    persona, goal = key.split("/")
    return persona, goal


# One entry of each per-cell mapping, validated on its own (see _first_bad_entry).
_ENTRY: dict[str, TypeAdapter[Any]] = {"cells": TypeAdapter(CountsOfCell),
          "repetitions": TypeAdapter(RepetitionsOfCell)}


def _first_bad_entry(raw: Any) -> None:
    """The cells and repetitions, entry by entry, stopping at the first bad one. Validated whole,
    a file whose every entry is wrong makes pydantic build an error per entry: memory and time
    far beyond the file's size (an 8 MB file took minutes). Entry by entry, reading any file costs
    what its parsed JSON costs (docs/reference/security.md). Raises the entry's
    ValidationError with its place in the file."""
    if not isinstance(raw, dict):
        return
    for field, adapter in _ENTRY.items():
        entries = raw.get(field)
        if not isinstance(entries, dict):
            continue
        for key, entry in entries.items():
            try:
                adapter.validate_python(entry)
            except ValidationError as exc:
                err = exc.errors(include_input=False, include_url=False)[0]
                raise ValidationError.from_exception_data(exc.title, [
                    {"type": PydanticCustomError("entry", "{msg}", {"msg": err["msg"]}),
                     "loc": (field, key, *err["loc"]), "input": None}]) from None


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
    """The baseline as git holds it at REF (`origin/main:baselines/main.json`): `baseline_ref`,
    `--baseline-ref` on the command line, by whose name its errors start.

    git runs with no shell, reading one blob; its output is bounded and its time limited, so a
    huge or hostile object cannot exhaust memory or hang the job.
    """
    flag = (Parameter("baseline_ref"), f" {printable(ref)}")
    fix = "name a committed file as BRANCH:PATH (e.g. origin/main:baselines/main.json), after `git fetch`"
    if not ref or ref.startswith("-") or any(not ch.isprintable() for ch in ref) or len(ref) > 1024:
        raise BaselineError((*flag, f": not a git object name; {fix}"))
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_LAZY_FETCH": "1"}
    with tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen(["git", "cat-file", "blob", ref], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=errors, cwd=cwd, env=env)
        except OSError as exc:
            raise BaselineError((*flag, f": cannot run git ({exc.strerror}): install git, or pass ",
                                 Parameter("baseline"), " FILE with the file the protected branch holds")) from None
        watchdog = threading.Timer(GIT_TIMEOUT_S, proc.kill)
        watchdog.start()
        stdout = proc.stdout
        assert stdout is not None       # stdout=PIPE
        try:
            chunks, size = [], 0
            while size <= MAX_BYTES:
                chunk = stdout.read(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > MAX_BYTES:
                proc.kill()
            stdout.close()
            code = proc.wait()
        finally:
            watchdog.cancel()
        if size > MAX_BYTES:
            raise BaselineError((*flag, f": more than {MAX_BYTES // 2**20} MB, larger than a baseline can be; {fix}"))
        if code != 0:
            errors.seek(0)
            said = next((line for line in errors.read(4096).decode("utf-8", "replace").splitlines() if line.strip()),
                        f"exit status {code}")
            timed_out = " (timed out)" if code < 0 else ""
            raise BaselineError((*flag, f": git cannot read it{timed_out}: {printable(said, 200)}; {fix}"))
    return parse_baseline(b"".join(chunks), f"{printable(ref)} (git)", fix)


def open_baseline(ref: str, db: Path | str) -> RunSummary:
    """A baseline given as a file or a run (`baseline`; `--baseline FILE|RUN`): a blessed file if
    there is one at that path, else a stored run of the database at `db`."""
    path = Path(ref)
    if path.is_file():
        return load_baseline(path)
    bless = "bless one with `simrun baseline bless RUN --out FILE`"
    if path.suffix == ".json" or "/" in ref or "\\" in ref:
        raise BaselineError(f"{printable(ref)}: no such baseline file; {bless}, or pass a run id")
    if not Path(db).exists():
        raise BaselineError((f"no baseline {printable(ref)!r}: no such file, and no database {db} to find a run in; "
                             f"{bless}, or pass ", Parameter("db")))
    try:
        with Store(db, create=False) as store:
            return summary_from_store(store, ref)
    except StoreError as exc:
        raise BaselineError(f"no baseline {printable(ref)!r}: no such file, and {exc}") from None
