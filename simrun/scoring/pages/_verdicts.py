"""The gate's verdicts of runs against the run before them and against the blessed baseline,
for the dashboard, remembered.

Each pair is judged by `simrun.scoring.gate._compare.gate_verdict` itself, on summaries from
`simrun.scoring.gate._summary.summary_from_store`, exactly as `simrun gate --baseline RUN --candidate RUN`
judges it: the page and the gate cannot disagree. Only the verdict's outcome, its headline and
the classes it names are kept.

A verdict takes a few tenths of a second (the gate's permutation test), so judging 1,000 runs
on every build would take minutes. Each verdict is remembered, keyed by everything it depends
on: both runs' scores (their id, dataset, scorer version, when they were rescored, and their
counts), the gate settings and the simrun version. A run resumed, rescored, or judged under
other settings has a new key and is judged again.

It is remembered in two places. The database of both runs keeps it (table `gate_verdicts`),
written by the page a run builds when it finishes, which judges that run alone: so a database
carries its own verdicts, and a dashboard of CI artifacts read-only judges only pairs that span
two databases. Those, and the verdicts of read-only databases, go to a small JSON file beside
the page. Both are only a memory: an entry that is damaged or foreign is ignored, never trusted
for more than the verdict it holds under a key computed here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import duckdb

from simrun import _secrets as secrets
from simrun._errors import SimrunError
from simrun._settings import SequentialSection, from_store
from simrun._writing import write_file
from simrun.scoring.gate import GATE_CLASSES, RunSummary, gate_verdict, sequential_gate, summary_from_store
from simrun.scoring.store import Store

MEMORY = ".gate-verdicts.json"
FORMAT = "simrun-gate-verdicts-1"
MEMORY_BYTES = 16 << 20
MEMORY_ENTRIES = 20_000
HEADLINE_CHARS = 1_000
JUDGED = ("passed", "failed", "not compared", "inconclusive")


@dataclass(frozen=True)
class Judged:
    """One side of a pair: a run, where it is stored, and a digest of its scores."""

    run_id: str
    store: Store
    scores: str


@dataclass(frozen=True)
class Verdict:
    state: str          # passed | failed | not compared | inconclusive (a run in rounds, undecided)
    headline: str       # the gate's headline, or why the runs could not be compared
    classes: tuple[str, ...] = ()   # the classes the gate failed the run on: what its headline names

    @property
    def failed(self) -> bool:
        return self.state == "failed"


def judge(pairs: Sequence[tuple[Judged | RunSummary, Judged]], settings: Any, folder: Path) -> list[Verdict]:
    """(previous, run) pairs judged as the gate judges them, from memory where it holds them. The
    previous side may be a blessed baseline's summary rather than a stored run."""
    memory_path = folder / MEMORY
    stores = {id(side.store): side.store for pair in pairs for side in pair if isinstance(side, Judged)}
    remembered = _recall(memory_path)
    for store in stores.values():
        remembered |= _valid(store_verdicts(store))
    summaries: dict[tuple[int, str], RunSummary | SimrunError] = {}
    context = _settings_key(settings)
    used: dict[str, Verdict] = {}
    keys = []
    for previous, run in pairs:
        # A run made in rounds is judged against the baseline by the sequential gate it ran under.
        rounds = _rounds(run) if isinstance(previous, RunSummary) else None
        key = hashlib.sha256(json.dumps([_scores(previous), run.scores, context, rounds]).encode()).hexdigest()
        verdict = used.get(key) or remembered.get(key)
        if verdict is None:
            verdict = _judge(_summary(summaries, previous), _summary(summaries, run), settings, rounds)
        used[key] = verdict
        keys.append(key)
    if any(key not in remembered for key in used):
        _remember(memory_path, used, remembered)
        _keep_in_stores(pairs, keys, used, remembered)
    return [used[key] for key in keys]


def store_verdicts(store: Store) -> list[tuple[str, str, str, Any]]:
    try:
        return store.gate_verdicts()
    except (duckdb.Error, ValueError):
        return []               # a file that lacks the table, or holds a damaged row: nothing remembered


def _keep_in_stores(pairs: Sequence[tuple[Judged | RunSummary, Judged]], keys: list[str],
                    verdicts: dict[str, Verdict], remembered: dict[str, Verdict]) -> None:
    """New verdicts of pairs within one writable database, kept in it."""
    by_store: dict[int, tuple[Store, dict[str, tuple[str, str, str, list[str]]]]] = {}
    for (previous, run), key in zip(pairs, keys):
        if isinstance(previous, Judged) and previous.store is run.store and not run.store.read_only \
                and key not in remembered:
            verdict = verdicts[key]
            by_store.setdefault(id(run.store), (run.store, {}))[1][key] = (
                key, verdict.state, verdict.headline, list(verdict.classes))
    for store, rows in by_store.values():
        try:
            store.remember_gate_verdicts(list(rows.values()))
        except SimrunError:
            pass                # only a memory: judged again next time


def _scores(side: Judged | RunSummary) -> str:
    """What a verdict depends on, of one side: a baseline file by its whole content."""
    if isinstance(side, Judged):
        return side.scores
    cells = sorted((f"{p}/{g}", cls, c.fired, c.scored, c.unverifiable)
                   for (p, g), counts in side.cells.items() for cls, c in counts.items())
    return hashlib.sha256(json.dumps(["baseline", side.run_id, side.dataset_hash, side.scorer_version,
                                      side.repetitions, sorted((side.items or {}).items()), cells,
                                      side.repetitions_held is not None]).encode()).hexdigest()


def _summary(summaries: dict[tuple[int, str], RunSummary | SimrunError],
             side: Judged | RunSummary) -> RunSummary | SimrunError:
    if isinstance(side, RunSummary):
        return side
    key = (id(side.store), side.run_id)
    if key not in summaries:
        try:
            summaries[key] = summary_from_store(side.store, side.run_id)
        except SimrunError as exc:      # a run the gate cannot read is not compared, and says why
            summaries[key] = exc
    return summaries[key]


def _rounds(run: Judged) -> dict[str, Any] | None:
    try:
        rounds = (run.store.run(run.run_id).get("config") or {}).get("sequential")
    except SimrunError:
        return None
    return rounds if isinstance(rounds, dict) else None


def _judge(previous: RunSummary | SimrunError, run: RunSummary | SimrunError, settings: Any,
           rounds: dict[str, Any] | None = None) -> Verdict:
    if isinstance(previous, SimrunError):
        return Verdict("not compared", secrets.cut(str(previous), HEADLINE_CHARS))
    if isinstance(run, SimrunError):
        return Verdict("not compared", secrets.cut(str(run), HEADLINE_CHARS))
    try:
        if rounds is not None:
            seq = from_store(SequentialSection, rounds, f"{getattr(run, 'source', 'the run')}: runs.config.sequential")
            done = sequential_gate(previous, run, settings, seq, finished=True)
            if done.decision != "failed":
                return Verdict("passed" if done.decision == "passed" else "inconclusive",
                               secrets.cut(done.line(), HEADLINE_CHARS))
            result = done.gate
        else:
            result = gate_verdict(previous, run, settings)
    except (SimrunError, TypeError) as exc:     # GateError: another scorer version, no cell in common...
        return Verdict("not compared", secrets.cut(str(exc), HEADLINE_CHARS))
    return Verdict("passed" if result.passed else "failed", secrets.cut(result.headline(), HEADLINE_CHARS),
                   tuple(c.cls for c in result.failures))


def _settings_key(settings: Any) -> list[Any]:
    if hasattr(settings, "model_dump"):
        fields = settings.model_dump()
    elif dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        fields = dataclasses.asdict(settings)
    else:
        fields = dict(vars(settings))
    try:
        version = metadata.version("simrun")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return [json.loads(json.dumps(fields, sort_keys=True, default=str)), version]


def _recall(path: Path) -> dict[str, Verdict]:
    try:
        if path.stat().st_size > MEMORY_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = data.get("verdicts") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not isinstance(entries, dict):
        return {}
    return _valid((key, v.get("state"), v.get("headline"), v.get("classes"))
                  for key, v in entries.items() if isinstance(v, dict))


def _valid(entries: Iterable[tuple[Any, Any, Any, Any]]) -> dict[str, Verdict]:
    """(key, state, headline, classes) entries from a memory, those that can be verdicts."""
    return {key: Verdict(state, secrets.cut(headline, HEADLINE_CHARS), tuple(classes))
            for key, state, headline, classes in entries
            if isinstance(key, str) and state in JUDGED and isinstance(headline, str)
            and isinstance(classes, list) and all(c in GATE_CLASSES for c in classes)}


def _remember(path: Path, used: dict[str, Verdict], remembered: dict[str, Verdict]) -> None:
    """This build's verdicts first, then as many earlier ones as the file keeps (another page in the
    same folder may be built from other databases)."""
    kept = dict(used)
    for key, verdict in remembered.items():
        if len(kept) >= MEMORY_ENTRIES:
            break
        kept.setdefault(key, verdict)
    text = json.dumps({"format": FORMAT, "verdicts": {k: dataclasses.asdict(v) for k, v in kept.items()}})
    try:
        write_file(path, text, what="the dashboard's memory of verdicts")
    except SimrunError:
        pass                        # only a memory: the page is written; its verdicts are judged again next time
