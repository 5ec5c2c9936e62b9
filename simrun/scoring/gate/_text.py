"""The gate's verdict as text: the formats, the lists of what moved, Markdown and JUnit XML.

Differences of rates are always in percentage points ("+10.0 pts"), rates in percent, here, in
the console and in the HTML report alike. Lists are capped, and say how many they left out.
"""

from __future__ import annotations

from xml.etree import ElementTree as ET

from simrun.scoring.gate._formats import cell_name, pct, pts, pval, size
from simrun.scoring.gate._sharing import cell_list
from simrun.scoring.gate._stats import CONFIDENCE, POWER
from simrun.scoring.gate._summary import GATE_CLASSES
from simrun.scoring.gate._variation import BOUND
from simrun.scoring.gate._verdict import ClassVerdict, GateResult
from simrun.scoring.gate._verdict_lines import Scope, item_scope

MOVED_SHOWN = 10
# What the "rose most" list is, wherever it is shown: a description, not a test.
MOVED_NOTE = ("descriptive only: no cell is tested on its own, and some cells rise by chance in any two runs; "
              "only the tests above (over all cells, and per goal and persona) decide")
FLIPS_SHOWN = 20


def delta_text(c: ClassVerdict) -> str:
    if c.delta is None:
        return "–"
    if c.low is None or c.high is None:
        return pts(c.delta)
    return f"{pts(c.delta)} ({100 * c.low:+.1f} to {100 * c.high:+.1f})"


def repetitions_text(result: GateResult, cls: str) -> str:
    needed = result.repetitions_needed().get(cls)
    return "–" if needed is None else str(needed)


def rows(result: GateResult) -> list[dict[str, str]]:
    """The table every output shows: one row per class."""
    out = []
    for c in result.classes:
        if c.kind == "guarantee":
            base, cand, p, reps = f"{c.baseline.fired} conv.", f"{c.candidate.fired} conv.", "zero rule", "–"
        else:
            base, cand, p, reps = pct(c.baseline_rate), pct(c.candidate_rate), pval(c.p_adjusted), \
                repetitions_text(result, c.cls)
        out.append({"class": c.cls, "kind": c.kind, "baseline": base, "candidate": cand, "delta": delta_text(c),
                    "p": p, "detectable": size(c.detectable), "repetitions": reps, "verdict": c.verdict})
    return out


def columns(result: GateResult) -> list[tuple[str, str]]:
    return [("class", "class"), ("kind", "kind"), ("baseline", "baseline"), ("candidate", "candidate"),
            ("delta", f"delta ({CONFIDENCE:.0%} interval, uncorrected)"), ("p", "p (corr.)"),
            ("detectable", "detectable"),
            ("repetitions", f"reps +{size(result.min_effect)}"), ("verdict", "verdict")]


def moved_lines(result: GateResult, limit: int = MOVED_SHOWN) -> tuple[list[str], str]:
    """The cells whose rate rose most, and a line on the rest. Descriptive: no cell is tested on
    its own, and over hundreds of (class, cell) pairs some rise by chance, so the lines say so."""
    lines = [f"{m.cls} · {cell_name(m.cell)}: {m.baseline} → {m.candidate} ({pts(m.rise)}, descriptive)"
             for m in result.moved[:limit]]
    rest = len(result.moved) - len(lines)
    more = (f"… and {rest} more (class, cell) pairs rose" if rest > 0 else "") + (
        ("; " if rest > 0 else "") + MOVED_NOTE if lines else "")
    if not result.moved:
        more = "no cell's rate rose for any class"
    return lines, more


def flip_summary(result: GateResult) -> str:
    if result.flips is None:
        return result.why_no_flips
    if not result.flips:
        return "no conversation flipped (clean in the baseline, fired in the candidate, at one cell and repetition)"
    by_class: dict[str, int] = {}
    for f in result.flips:
        by_class[f.cls] = by_class.get(f.cls, 0) + 1
    counts = ", ".join(f"{cls} {n}" for cls, n in by_class.items())
    # Listed only for paired runs (same seed, scripted user: `simrun.scoring.gate._paired`).
    return (f"{len(result.flips)} flipped (clean in the baseline, fired in the candidate, at the same cell and "
            f"repetition of runs paired by seed): {counts}")


def flip_lines(result: GateResult, limit: int = FLIPS_SHOWN) -> tuple[list[str], str]:
    flips = result.flips or ()
    lines = [f"{f.cls}: {f.conversation_id}" + (f" (baseline {f.baseline_id})" if f.baseline_id != f.conversation_id
                                                else "")
             for f in flips[:limit]]
    rest = len(flips) - len(lines)
    return lines, (f"… and {rest} more" if rest > 0 else "")


def subset_text(result: GateResult) -> str:
    """One line on what the gate did not compare ("" when it compared every cell of both runs)."""
    shares = result.sharing
    if shares.complete:
        return ""
    every = result.cells + len(shares.new) + len(shares.removed)
    parts = [f"compared on {result.cells} of {every} cells: those whose persona and goal are unchanged by content"]
    if shares.new:
        parts.append(f"{len(shares.new)} new, not gated against the baseline (held to the absolute criteria)")
    if shares.removed:
        parts.append(f"{len(shares.removed)} of the baseline's not in the candidate (removed)")
    return "; ".join(parts)


def sharing_lines(result: GateResult) -> list[str]:
    """The new goals and personas with their rates, then what was removed: one line each."""
    lines = [f"new, not gated against the baseline: {s}: {s.rate_text(GATE_CLASSES)}" for s in result.new]
    return lines + [text for _, text in removed_lines(result)]


def removed_lines(result: GateResult) -> list[tuple[Scope, str]]:
    """What the baseline held and the candidate does not: each goal and persona removed, then the
    other cells it lacks; one line each, with the part of the dataset it names."""
    removed = [c for c in result.sharing.changes if c.change == "removed"]
    lines = [(item_scope(c.kind, c.id), f"removed: {c.kind} {c.id}") for c in removed]
    gone = {(c.kind, c.id) for c in removed}
    rest = tuple(c for c in result.sharing.removed if ("persona", c[0]) not in gone and ("goal", c[1]) not in gone)
    if rest:
        lines.append((item_scope("cells", cells=rest),
                      f"removed: the candidate does not hold the baseline's cells {cell_list(rest)}"))
    return lines


def variation_text(result: GateResult) -> str:
    """What the gate assumed, or measured, about how runs differ as a whole."""
    v = result.variation
    if v is None:
        return ("the baseline holds one run, so the test assumes runs do not differ as a whole (a cell's conversations "
                "exchangeable across runs; a model-played user's shift from one day to the next is not measurable "
                "from one run); bless several runs made apart, five or more, to measure how far they do "
                "(`simrun baseline bless RUN RUN RUN RUN RUN --out FILE`)")
    moved = [(cls, rho, sd) for cls, rho, sd in zip(v.classes, v.bound, v.spread) if rho > 0]
    said = ", ".join(f"{cls} {rho:.3f} (a cell ±{100 * sd:.1f} pts)" for cls, rho, sd in moved)
    shifts = [(cls, v.shift(cls)) for cls in v.classes if v.shift(cls) > 0]
    whole = (f"; a whole-run shift (every cell of a run together; sd on the logit scale, from {v.runs - 1} "
             f"degrees of freedom, held in the test with its uncertainty): "
             + (", ".join(f"{cls} {sd:.2f}" for cls, sd in shifts) if shifts else "none beyond sampling"))
    return (f"run-to-run variation, measured over the baseline's {v.runs} runs and held in the test: "
            + (f"intra-class correlation ({BOUND:.0%} upper bound) {said}" if moved
               else "none beyond sampling in any class") + whole
            + (f"; {v.runs} runs leave a whole-run shift poorly known, which costs power over all cells: bless five "
               "or more" if v.runs < 5 else ""))


def which_test(result: GateResult) -> str:
    """Which test the gate used: paired by cell and repetition, or unpaired and why."""
    return result.pairing.text


def method_text(result: GateResult) -> str:
    how = ("max-T step-down over every class and slice" if result.correction == "max-t"
           else f"{result.correction} over every class and slice")
    test = (f"a one-sided paired permutation test ({result.permutations:,} draws swapping the two conversations of "
            f"each pair at random; {which_test(result)})" if result.pairing.paired else
            f"a one-sided permutation test ({result.permutations:,} reassignments of conversations within their "
            f"cells; {which_test(result)})")
    return (f"unit: the cell (persona × goal), {result.cells} cells; each class over all cells and within each "
            f"goal and persona ({result.tests} tests), by {test}, corrected by {how} so that the chance of any "
            f"false alarm stays at alpha {result.alpha}; a regression also needs the rise's one-sided "
            f"{1 - result.alpha:.0%} upper bound to reach {size(result.min_effect)} ({size(result.min_effect_slice)} "
            f"in a goal or persona); guarantees fail on any violation; delta is the mean cell difference with its "
            f"{CONFIDENCE:.0%} interval (uncorrected: it may exclude 0 where the corrected test does not "
            f"flag); {variation_text(result)}; 'detectable' is the rise caught with {POWER:.0%} power at this "
            f"size, and "
            f"'repetitions' how many per cell catch a rise of {size(result.min_effect)} with {POWER:.0%} power")


def markdown(result: GateResult) -> str:
    """The summary for $GITHUB_STEP_SUMMARY and pull-request comments."""
    b, k = result.baseline, result.candidate
    icon = "✅" if result.passed else "❌"
    cols = columns(result)
    lines = [
        f"## {icon} simrun gate {result.headline()}", "",
        f"Baseline `{b.run_id}` ({b.source}) · candidate `{k.run_id}` ({k.source}) · "
        f"dataset `{b.dataset_hash}` · scorer {b.scorer_version}", "",
    ]
    if result.regressions():
        lines += [f"- **{line}**" for line in result.regressions()] + [""]
    lines += [("" if result.variation is not None else "ℹ️ ") + variation_text(result)[:1].upper()
              + variation_text(result)[1:] + ".", ""]
    lines += ["Test: " + which_test(result) + ".", ""]
    if result.left_out:
        lines += [f"⚠️ {subset_text(result)}", ""] + [f"- {line}" for line in sharing_lines(result)] + [""]
    lines += ["| " + " | ".join(title for _, title in cols) + " |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for row, c in zip(rows(result), result.classes):
        cells = [f"`{row['class']}`" if key == "class" else row[key] for key, _ in cols]
        if c.failed:
            cells[-1] = f"**{cells[-1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    moved, more = moved_lines(result)
    lines += ["", "### Cells whose rate rose most (descriptive, not tested)", ""]
    lines += [f"- {line}" for line in moved] + ([more] if more else [])
    lines += ["", "### Flipped conversations", "", flip_summary(result), ""]
    flips = result.flips or ()
    shown = flips[:FLIPS_SHOWN]
    lines += [f"- `{f.conversation_id}` {f.cls}" for f in shown]
    if len(flips) > len(shown):
        lines.append(f"… and {len(flips) - len(shown)} more")
    lines += ["", f"<sub>{method_text(result)}.</sub>", ""]
    return "\n".join(lines)


def junit_xml(result: GateResult) -> str:
    """The gate's suite (`gate_suite`) as a JUnit XML document of its own."""
    failures = len(result.failures)
    suites = ET.Element("testsuites", name="simrun gate", tests=str(len(result.classes)), failures=str(failures))
    suites.append(gate_suite(result))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def gate_suite(result: GateResult) -> ET.Element:
    """One testcase per class; a regression (overall or in a slice) or a violation is a failure.
    The suite's output lists the cells that rose most and the flipped conversations."""
    failures = len(result.failures)
    skipped = sum(c.verdict == "untested" for c in result.classes)
    suite = ET.Element("testsuite", name=f"simrun gate {result.candidate.run_id} vs {result.baseline.run_id}",
                       tests=str(len(result.classes)), failures=str(failures), errors="0", skipped=str(skipped))
    flips_of: dict[str, list[str]] = {}
    for f in result.flips or ():
        flips_of.setdefault(f.cls, []).append(f.conversation_id)
    for c in result.classes:
        case = ET.SubElement(suite, "testcase", classname=f"simrun.gate.{c.kind}", name=c.cls)
        detail = (f"baseline {pct(c.baseline_rate)} ({c.baseline.fired}/{c.baseline.scored}), candidate "
                  f"{pct(c.candidate_rate)} ({c.candidate.fired}/{c.candidate.scored}), delta {delta_text(c)}, "
                  f"p {pval(c.p)}, corrected p {pval(c.p_adjusted)}, over {c.cells} cells")
        flipped = flips_of.get(c.cls, [])
        if flipped:
            shown = ", ".join(flipped[:FLIPS_SHOWN])
            detail += f"\nflipped conversations ({len(flipped)}): {shown}" + (
                " …" if len(flipped) > FLIPS_SHOWN else "")
        if c.failed:
            message = "; ".join(([f"over all cells: {c.reason}"] if c.regressed_overall or c.kind == "guarantee"
                                 else []) + [s.statement() for s in c.slice_failures])
            failure = ET.SubElement(case, "failure", message=f"{c.cls}: {c.verdict}: {message}", type=c.verdict)
            failure.text = detail
        elif c.verdict == "untested":
            ET.SubElement(case, "skipped", message=c.reason)
        else:
            ET.SubElement(case, "system-out").text = f"{c.verdict}: {c.reason}; {detail}"
    moved, more = moved_lines(result)
    flips, rest = flip_lines(result)
    parts = [result.headline(), *result.regressions(), subset_text(result), *sharing_lines(result),
             "cells whose rate rose most (descriptive, not tested):", *moved,
             more, flip_summary(result), *flips, rest, method_text(result)]
    ET.SubElement(suite, "system-out").text = "\n".join(p for p in parts if p)
    return suite
