"""The HTML report: one self-contained file (inline CSS and a few lines of JS, no URL at all).

Aggregates come from DuckDB; only the worst transcripts are embedded, turn by turn, with their
findings pinned to the turns they belong to. Against a baseline, it shows the gate's verdict and
"What changed": the conversations that flipped, baseline and candidate side by side. Templates
live in `scoring/pages/templates`, autoescaped: a runtime's reply is always shown as text, never
as markup. The verdict at the top is rendered from its records (`simrun.scoring.gate._verdict_lines`):
each reason links to its evidence by its kind and classes, never by its words.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from jinja2 import Environment

from simrun._errors import SimrunError, StoreError
from simrun._settings import GateSection, ReleaseSection
from simrun._transcript import Transcript
from simrun.scoring.checks import GUARANTEES
from simrun.scoring.gate import GATE_CLASSES, GateResult, Kind, Line, RunSummary, RunVerdict, competence, verdict_of_run
from simrun.scoring.pages import _charts as charts
from simrun.scoring.pages._dashboard import build_dashboard
from simrun.scoring.pages._render import environment, write_page
from simrun.scoring.store import Store, checked_run_id, unverifiable_reasons
from simrun.scoring.store import rates as R

MEMBERS_SHOWN = 300
FLIPS_EMBEDDED = 20         # flipped conversations shown side by side; the rest are counted


def _embedded(store: Store, run_id: str, conversation_id: str, row: dict[str, Any] | None = None) -> dict[str, Any]:
    """A conversation as the transcript template shows it: its row, its turns, findings by turn."""
    if row is None:
        row = store.conversation_row(run_id, conversation_id)
    by_turn: dict[int | None, list[dict[str, Any]]] = {}
    for f in store.findings(run_id, conversation_id):
        by_turn.setdefault(f["turn"], []).append(f)
    row.setdefault("classes", sorted({f["class"] for fs in by_turn.values() for f in fs}))
    return {"row": row, "t": store.transcript(run_id, conversation_id), "findings": by_turn}


def first_divergence(a: Transcript, b: Transcript) -> int | None:
    """The first turn (1-based) where two transcripts differ: what the user sent, or what came back."""
    for x, y in zip(a.turns, b.turns):
        if (x.user.payload(), x.result) != (y.user.payload(), y.result):
            return x.index
    if len(a.turns) != len(b.turns):
        return min(len(a.turns), len(b.turns)) + 1
    return None


def what_changed(store: Store, run_id: str, gate: GateResult) -> dict[str, Any]:
    """The flipped conversations, baseline and candidate side by side (the first FLIPS_EMBEDDED)."""
    by_conversation: dict[tuple[str, str], list[str]] = {}
    for f in gate.flips or ():
        by_conversation.setdefault((f.conversation_id, f.baseline_id), []).append(f.cls)
    # Shown in turns, one class after another (failing classes first), so that every class that
    # flipped has examples among those embedded.
    queues: dict[str, list[tuple[str, str]]] = {}
    for key, classes in by_conversation.items():
        queues.setdefault(classes[0], []).append(key)
    order = [key for group in itertools.zip_longest(*queues.values()) for key in group if key is not None]
    try:
        here = store.run(gate.baseline.run_id)["dataset_hash"] == gate.baseline.dataset_hash
    except StoreError:      # a baseline file whose run is not in this database
        here = False
    pairs = []
    for cid, base_id in order[:FLIPS_EMBEDDED]:
        classes = by_conversation[(cid, base_id)]
        cand = _embedded(store, run_id, cid)
        base = _embedded(store, gate.baseline.run_id, base_id) if here else None
        pairs.append({"id": cid, "classes": classes, "cand": cand, "base": base,
                      "diverge": first_divergence(base["t"], cand["t"]) if base else None})
    return {"pairs": pairs, "conversations": len(by_conversation), "baseline_here": here}


EXAMPLES = 3                # transcripts linked from each class that fired, at the top of the page


GATE_KINDS = frozenset({Kind.GATE_REGRESSION, Kind.BASELINE_REFUSED, Kind.NEW_NOT_GATED})


def evidence_anchor(reason: Line, fired: list[str], gate: GateResult | None) -> str:
    """Where the page shows the evidence behind one of the verdict's reasons: the gate's table for
    the gate's reasons, else the first class it concerns that fired, else the class rates."""
    if gate is not None and reason.kind in GATE_KINDS:
        return "#gate"
    named = [cls for cls in reason.classes if cls in fired]
    return f"#fired-{named[0]}" if named else "#rates"


def report_context(store: Store, run_id: str | None, worst_limit: int = 20, per_class: int = 3,
                   baseline: RunSummary | None = None, gate_settings: GateSection | None = None,
                   release: ReleaseSection | None = None, verdict: RunVerdict | None = None) -> dict[str, Any]:
    run = store.run(run_id)
    run_id = run["run_id"]
    if verdict is None:
        # The very verdict the command line prints and exits with: the two cannot disagree.
        verdict = verdict_of_run(store, run_id, release, baseline=baseline, gate_settings=gate_settings)
    gate = verdict.gate
    changed = what_changed(store, run_id, gate) if gate is not None else None
    class_rates, outcome = list(verdict.rates), verdict.outcome
    # The worst overall, and a few of each class that fired, so that every rate can be read.
    worst = R.worst(store, run_id, worst_limit)
    embedded = {w["conversation_id"] for w in worst}
    for rate in class_rates:
        if rate.occurrences:
            for row in R.worst(store, run_id, per_class, cls=rate.cls):
                if row["conversation_id"] not in embedded:
                    embedded.add(row["conversation_id"])
                    worst.append(row)
    transcripts = [_embedded(store, run_id, row["conversation_id"], row) for row in worst]
    # Every rate links to its conversations; past a few hundred, the list names the first ones
    # and the count, so that a run of 100,000 conversations still gives a small report.
    members = {r.cls: R.conversations_with(store, run_id, r.cls, MEMBERS_SHOWN) for r in class_rates if r.occurrences}
    cells = R.cells(store, run_id)
    personas, goals = sorted({c["persona"] for c in cells}), sorted({c["goal"] for c in cells})
    shares = R.cell_shares(store, run_id)
    heatmaps = {"goal_reached": charts.heatmap(personas, goals, shares.get("goal_reached", {}), "good",
                                               "goal reached")}
    for rate in class_rates:
        if rate.occurrences:
            heatmaps[rate.cls] = charts.heatmap(personas, goals, shares.get(rate.cls, {}), "bad", rate.cls)
    dist = R.distributions(store, run_id)
    # The filters offer every class a shown transcript carries: those that fired, and those flipped.
    flipped = {cls for pair in (changed or {}).get("pairs", []) for cls in pair["classes"]}
    filter_classes = list(dict.fromkeys([r.cls for r in class_rates if r.occurrences]
                                        + [cls for cls in GATE_CLASSES if cls in flipped]))
    user = run["user_backend"]
    fired = [r for r in class_rates if r.occurrences]
    examples = {r.cls: [cid for cid in members[r.cls] if cid in embedded][:EXAMPLES] for r in fired}
    return {
        "fired": fired, "examples": examples,
        "reason_links": [evidence_anchor(r, [f.cls for f in fired], gate) for r in verdict.reasons],
        "costs": R.costs(store, run_id) if user != "scripted" else None,
        "competence": competence(store, user) if user != "scripted" else None,
        "gate": gate, "changed": changed, "filter_classes": filter_classes, "verdict": verdict,
        "pass_k": R.pass_k(store, run_id), "heatmaps": heatmaps,
        "histograms": [charts.histogram(dist["turns"], "turns to the goal (conversations that reached it)"),
                       charts.histogram(dist["cost"], "cost per conversation", " USD"),
                       charts.histogram(dist["duration"], "wall time per conversation", " ms")],
        "run": run, "rates": class_rates, "outcome": outcome, "guarantees": GUARANTEES,
        "reasons": unverifiable_reasons(store, run_id),
        "violations": R.guarantee_violations(class_rates),
        "undecided_guarantees": [r.cls for r in class_rates if r.kind == "guarantee" and not r.scored],
        "partly_guarantees": [r.cls for r in class_rates if r.kind == "guarantee" and r.scored and r.unverifiable],
        # The headline's goal rate as its bounds when the undecided share is large (issue 38, rule 2).
        "goal_bounds": (outcome.goal_bounds if outcome is not None
                        and R.bounds_shown(outcome.goal_scored, outcome.goal_unverifiable) else None),
        "worst": transcripts, "embedded": embedded,
        "members": members, "member_counts": R.fired_counts(store, run_id), "cells": cells, "severity": R.SEVERITY,
        "set_aside": R.set_aside(store, run_id),
        "personas": personas, "goals": goals,
        "cell_map": {(c["persona"], c["goal"]): c for c in cells},
    }


def build_report(store: Store, run_id: str | None, out_dir: Path | str = "reports",
                 user_templates: Path | None = None, baseline: RunSummary | None = None,
                 gate_settings: GateSection | None = None, release: ReleaseSection | None = None,
                 verdict: RunVerdict | None = None) -> Path:
    """Write the run's report, its verdict first (`verdict`, or made here from the release
    criteria and the baseline), and the dashboard of every run in the store beside it (each run
    judged by the gate against the baseline and the one before it, when `gate_settings` are given)."""
    context = report_context(store, run_id, baseline=baseline, gate_settings=gate_settings,
                             release=release, verdict=verdict)
    env = environment(user_templates)
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SimrunError(f"cannot create the reports folder {out_dir}: {exc.strerror or exc}") from None
    # The id comes from the database, which may have been crafted: it names a file only once
    # it is known to be one simrun made, so that it cannot lead out of the reports folder.
    path = out_dir / f"{checked_run_id(context['run']['run_id'], store.path)}.html"
    write_page(path, env.get_template("report.html").render(**context))
    build_index(store, out_dir, env, gate_settings, baseline, release, context["verdict"])
    return path


def build_index(store: Store, out_dir: Path, env: Environment | None = None, gate_settings: GateSection | None = None,
                baseline: RunSummary | None = None, release: ReleaseSection | None = None,
                verdict: RunVerdict | None = None) -> Path:
    """reports/index.html: the dashboard of every run in the store (`simrun.scoring.pages._dashboard`), the
    newest run of each dataset judged against the same baseline as the report, under the criteria
    it ran with (`release` for one that kept none)."""
    return build_dashboard([store], Path(out_dir) / "index.html", baseline=baseline, gate_settings=gate_settings,
                           env=env, fallback=release, known=[verdict] if verdict is not None else ())
