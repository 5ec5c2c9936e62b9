"""Each run's own verdict on the dashboard (its guarantees and release criteria), remembered.

The runs table marks a run whose own verdict failed beside the gate's answer, which alone may
read "no regression". A verdict costs tens of milliseconds a run (a thousand-run page would
take most of a minute), so each is remembered beside the page in `.run-verdicts.json`, keyed
by what it depends on: the run's scores and status, the criteria asked for, simrun's version.
The file is a memory, read as untrusted (bounded, every entry typed; anything else is judged
again), and only the words of a verdict are kept: the page shows them as text.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from simrun import _secrets as secrets
from simrun._errors import SimrunError
from simrun._writing import write_file
from simrun.scoring.gate import RunVerdict, verdict_of_run
from simrun.scoring.store import Store

MEMORY = ".run-verdicts.json"
FORMAT = "simrun-run-verdicts-1"
MEMORY_BYTES = 16 << 20
MEMORY_ENTRIES = 20_000
TEXT_CHARS = 1_000


@dataclass(frozen=True)
class OwnVerdict:
    """What the table shows of a run's own verdict."""

    passed: bool
    status: str
    word: str
    reasons: tuple[str, ...]

    @classmethod
    def of(cls, verdict: RunVerdict) -> OwnVerdict:
        status = str(getattr(verdict.status, "value", verdict.status))
        return cls(verdict.passed, status, verdict.word, tuple(r.text for r in verdict.reasons))


def own_verdicts(runs: list[tuple[str, str, str, Store]], known: dict[str, RunVerdict], release: Any,
                 fallback: Any, folder: Path) -> dict[str, OwnVerdict]:
    """(run id, scores, status, store) -> each run's own verdict: `known` first, then the memory,
    then judged (and remembered)."""
    context = json.dumps([repr(release), repr(fallback), _version()])
    path = folder / MEMORY
    remembered = _recall(path)
    used: dict[str, OwnVerdict] = {}
    out: dict[str, OwnVerdict] = {}
    for run_id, scores, status, store in runs:
        key = hashlib.sha256(json.dumps([scores, status, context]).encode()).hexdigest()
        if run_id in known:
            # Made already (the very verdict the page's top line gives): shown, not remembered,
            # since it may hold the gate against a baseline, which this key does not name.
            out[run_id] = OwnVerdict.of(known[run_id])
            continue
        verdict = used.get(key) or remembered.get(key) or OwnVerdict.of(
            verdict_of_run(store, run_id, release, fallback=fallback))
        used[key] = out[run_id] = verdict
    if any(key not in remembered for key in used):
        kept = dict(used)
        for key, verdict in remembered.items():
            if len(kept) >= MEMORY_ENTRIES:
                break
            kept.setdefault(key, verdict)
        text = json.dumps({"format": FORMAT, "verdicts": {k: [v.passed, v.status, v.word, list(v.reasons)]
                                                          for k, v in kept.items()}})
        try:
            write_file(path, text, what="the dashboard's memory of run verdicts")
        except SimrunError:
            pass                # only a memory: judged again next time
    return out


def _version() -> str:
    try:
        return metadata.version("simrun")
    except metadata.PackageNotFoundError:
        return "unknown"


def _recall(path: Path) -> dict[str, OwnVerdict]:
    try:
        if path.stat().st_size > MEMORY_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    entries = data.get("verdicts") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not isinstance(entries, dict):
        return {}
    kept = {}
    for key, value in entries.items():
        if not (isinstance(key, str) and isinstance(value, list) and len(value) == 4):
            continue
        passed, status, word, reasons = value
        if isinstance(passed, bool) and isinstance(status, str) and isinstance(word, str) \
                and isinstance(reasons, list) and all(isinstance(r, str) for r in reasons):
            kept[key] = OwnVerdict(passed, secrets.cut(status, 40), secrets.cut(word, 40),
                                   tuple(secrets.cut(r, TEXT_CHARS) for r in reasons[:50]))
    return kept
