"""The HTML report: one self-contained file (inline CSS and a few lines of JS, no URL at all).

Aggregates come from DuckDB; only the worst transcripts are embedded, turn by turn, with their
findings pinned to the turns they belong to. Templates live in `scoring/templates`, autoescaped:
a runtime's reply is always shown as text, never as markup.
"""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

from scoring import rates as R
from scoring.scorer import GUARANTEES
from scoring.store import Store

TEMPLATES = Path(__file__).parent / "templates"
MEMBERS_SHOWN = 300


def _env(user_templates: Path | None = None) -> Environment:
    folders = [str(user_templates)] if user_templates else []
    env = Environment(loader=FileSystemLoader([*folders, str(TEMPLATES)]),
                      autoescape=select_autoescape(["html"], default=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["pct"] = lambda v: "–" if v is None else f"{100 * v:.1f}%"
    env.filters["anchor"] = lambda s: re.sub(r"[^A-Za-z0-9_-]", "-", str(s))
    return env


def report_context(store: Store, run_id: str, worst_limit: int = 20, per_class: int = 3) -> dict:
    run = store.run(run_id)
    run_id = run["run_id"]
    class_rates = R.class_rates(store, run_id)
    outcome = R.outcome(store, run_id)
    # The worst overall, and a few of each class that fired, so that every rate can be read.
    worst = R.worst(store, run_id, worst_limit)
    embedded = {w["conversation_id"] for w in worst}
    for rate in class_rates:
        if rate.occurrences:
            for row in R.worst(store, run_id, per_class, cls=rate.cls):
                if row["conversation_id"] not in embedded:
                    embedded.add(row["conversation_id"])
                    worst.append(row)
    transcripts = []
    for row in worst:
        transcript = store.transcript(run_id, row["conversation_id"])
        findings = store.findings(run_id, row["conversation_id"])
        by_turn: dict = {}
        for f in findings:
            by_turn.setdefault(f["turn"], []).append(f)
        transcripts.append({"row": row, "t": transcript, "findings": by_turn})
    # Every rate links to its conversations; past a few hundred, the list names the first ones
    # and the count, so that a run of 100,000 conversations still gives a small report.
    members = {r.cls: R.conversations_with(store, run_id, r.cls, MEMBERS_SHOWN) for r in class_rates if r.occurrences}
    cells = R.cells(store, run_id)
    return {
        "run": run, "rates": class_rates, "outcome": outcome, "guarantees": GUARANTEES,
        "violations": R.guarantee_violations(class_rates), "worst": transcripts, "embedded": embedded,
        "members": members, "member_counts": R.fired_counts(store, run_id), "cells": cells, "severity": R.SEVERITY, "set_aside": R.set_aside(store, run_id),
        "personas": sorted({c["persona"] for c in cells}), "goals": sorted({c["goal"] for c in cells}),
        "cell_map": {(c["persona"], c["goal"]): c for c in cells},
    }


def build_report(store: Store, run_id: str | None, out_dir: Path | str = "reports",
                 user_templates: Path | None = None) -> Path:
    context = report_context(store, run_id)
    html = _env(user_templates).get_template("report.html").render(**context)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{context['run']['run_id']}.html"
    path.write_text(html, encoding="utf-8")
    return path
