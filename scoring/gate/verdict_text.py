"""A run's verdict (`simrun.scoring.gate.run_verdict`) as Markdown and JUnit XML: the step summary, the
pull-request comment and the CI test report say what the exit status says, reason by reason.

The gate's own tables (`simrun.scoring.gate.text`) follow the verdict when a baseline was compared.
"""

from __future__ import annotations

from xml.etree import ElementTree as ET

from simrun.scoring.gate import text as T
from simrun.scoring.gate.run_verdict import RunVerdict
from simrun.scoring.gate.sequential import Look, Sequential, SequentialSettings


def markdown(verdict: RunVerdict) -> str:
    icon = {"passed": "✅", "failed": "❌"}.get(verdict.status, "⚠️")
    lines = [f"## {icon} simrun {verdict.word}: run `{verdict.run_id}` (exit {verdict.exit_code})", ""]
    lines += [f"- **{r}**" for r in verdict.reasons]
    lines += [f"- held: {h}" for h in verdict.held]
    lines += [f"- not checked: {n}" for n in verdict.not_checked]
    lines.append("")
    if verdict.sequential is not None:
        lines += rounds_markdown(verdict.sequential)
    if verdict.gate is not None:
        # The gate's details, one heading level down: they explain the verdict's gate line.
        lines.append("#" + T.markdown(verdict.gate))
    return "\n".join(lines)


def _pts(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f}"


def round_line(look: Look, settings: SequentialSettings) -> str:
    """One look of the sequential gate, as the command line prints it."""
    widest = sorted((b for b in look.bounds if b.high is not None), key=lambda b: -b.high)[:3]
    return (f"{look.round:g}/{settings.max_rounds}: {look.conversations} candidate conversations; tested at "
            f"{look.alpha:.2g} ({look.alpha_spent:.3g} of alpha spent); {look.decision}; highest upper bounds: "
            + ", ".join(f"{b.cls} {_pts(b.high)} pts" for b in widest))


def rounds_markdown(rounds: Sequential) -> list[str]:
    """The rounds, the decision's spend and every class's running bounds at the last look."""
    s = rounds.settings
    lines = [f"### Sequential gate: {rounds.decision} after {rounds.looks[-1].round:g} of {s.max_rounds} rounds",
             "", f"{rounds.line()}", "",
             f"Rounds of {s.per_round} repetition(s) per cell; alpha spent as alpha x (round / {s.max_rounds})^"
             f"{s.spending:g}, each look tested by the max-T permutation gate at the level that spends it "
             f"({'from the looks’ joint law' if s.exact else 'the union bound: its increment'}); a class passes once its upper "
             f"bound (beta {s.beta:g} spent as beta x (round / {s.max_rounds})^{s.beta_spending:g}) is below the minimum "
             "effect (see docs/sequential-gate.md).",
             "", "| round | candidate conversations | level of the look | alpha spent | decision |",
             "| ---: | ---: | ---: | ---: | --- |"]
    lines += [f"| {k.round:g} | {k.conversations} | {k.alpha:.2g} | {k.alpha_spent:.3g} | {k.decision} |"
              for k in rounds.looks]
    lines += ["", "| class | rise (pts) | bounds: fail side's lower, pass side's upper (pts) |", "| --- | ---: | --- |"]
    lines += [f"| {b.cls} | {_pts(b.delta)} | {_pts(b.low)} to {_pts(b.high)} |" for b in rounds.looks[-1].bounds]
    return lines + [""]


def junit_xml(verdict: RunVerdict) -> str:
    """A suite for the run (its guarantees, each release criterion, and each goal or persona new
    since the baseline), then the gate's suite, one testcase per class, when a baseline was compared."""
    suites = ET.Element("testsuites", name=f"simrun {verdict.run_id}")
    cases: list[tuple[str, str, str | None]] = []      # (classname, name, failure message or None)
    broken = [r for r in verdict.reasons if r.startswith("guarantees broken")]
    cases.append(("simrun.run", "guarantees", broken[0] if broken else None))
    for c in verdict.release.criteria:
        cases.append(("simrun.release", c.name, None if c.passed else c.line()))
    cases += [("simrun.new", r.split(": ", 2)[1], r) for r in verdict.reasons if r.startswith("new, not gated: ")]
    # Every other reason (no conversation judged, a baseline that cannot judge the run, rounds
    # undecided, a goal file's problem) is a failure too, so that the XML fails exactly when the
    # exit status is not 0; a failed gate's reason is failed by the gate's own suite, class by class.
    named = {message for _, _, message in cases}
    gated = verdict.gate is not None and not verdict.gate.passed
    cases += [("simrun.run", r.split(":", 1)[0][:80], r) for r in verdict.reasons
              if r not in named and not (gated and r.startswith("gate against the baseline"))]
    failures = sum(message is not None for _, _, message in cases)
    suite = ET.SubElement(suites, "testsuite", name=f"simrun run {verdict.run_id}", tests=str(len(cases)),
                          failures=str(failures), errors="0", skipped="0")
    for classname, name, message in cases:
        case = ET.SubElement(suite, "testcase", classname=classname, name=name)
        if message is not None:
            ET.SubElement(case, "failure", message=message, type="failed")
    ET.SubElement(suite, "system-out").text = "\n".join(line for _, line in verdict.lines())
    if verdict.gate is not None:
        suites.extend(ET.fromstring(T.junit_xml(verdict.gate).split("?>", 1)[1]).findall("testsuite"))
    suites.set("tests", str(sum(int(s.get("tests")) for s in suites)))
    suites.set("failures", str(sum(int(s.get("failures")) for s in suites)))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
