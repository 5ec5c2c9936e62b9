"""The merge gate: one verdict on a candidate run against a baseline, from per-cell counts.

`gate_verdict(baseline, candidate, settings)` is the only place a verdict is made. The `simrun
gate` command and the HTML report both call it, so they can never disagree. It fails when

- any guarantee fired in any candidate conversation (one violation is a failed run), or
- a class rate rose significantly: the one-sided paired test over cells (`scoring.stats`),
  corrected for the number of classes tested (Holm or Bonferroni), gives p < alpha, *and* the
  observed rise is at least `min_effect`.

The classes tested are the progress classes, simulator_error (a runtime that confuses the
simulated user pushes conversations out of its own rates; that must not pass unseen),
runtime_error and goal_not_reached. Guarantees are decided by the zero rule, so they are left
out of the correction's family: a test there could never change the verdict, and spending
alpha on it would only blunt the others.

Two runs are compared only on the same dataset (personas and goals by content) and the same
scorer version; anything else is refused with a `GateError` that says how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol
from xml.etree import ElementTree as ET

from scoring.baseline import GATE_CLASSES, Counts, RunSummary
from scoring.scorer import GUARANTEES, kind_of
from scoring.stats import CONFIDENCE, POWER, correct, detectable_rise, paired_rise
from scoring.errors import SimrunError

TESTED = tuple(c for c in GATE_CLASSES if c not in GUARANTEES)


class GateError(SimrunError):
    """Two runs that must not be compared, or a baseline the gate cannot use."""


class GateSettings(Protocol):
    alpha: float
    min_effect: float
    correction: str


def class_kind(cls: str) -> str:
    return "outcome" if cls in ("runtime_error", "goal_not_reached") else kind_of(cls)


@dataclass(frozen=True)
class ClassVerdict:
    cls: str
    kind: str                       # progress | simulator | guarantee | outcome
    baseline: Counts                # summed over every cell of the baseline
    candidate: Counts
    cells: int                      # cells both runs scored, the test's sample size
    baseline_rate: float | None     # mean cell rate over those cells
    candidate_rate: float | None
    delta: float | None
    low: float | None               # CONFIDENCE interval of delta
    high: float | None
    p: float | None                 # one-sided, uncorrected
    p_adjusted: float | None        # corrected for the classes tested; None for guarantees
    detectable: float | None        # the rise caught with POWER at this size (sample-size advice)
    verdict: str                    # regression | violated | ok | held | untested
    reason: str

    @property
    def failed(self) -> bool:
        return self.verdict in ("regression", "violated")


@dataclass(frozen=True)
class GateResult:
    baseline: RunSummary
    candidate: RunSummary
    alpha: float
    min_effect: float
    correction: str
    tests: int                      # classes in the correction's family
    cells: int                      # cells both runs hold
    classes: tuple[ClassVerdict, ...]

    @property
    def failures(self) -> list[ClassVerdict]:
        return [c for c in self.classes if c.failed]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def headline(self) -> str:
        if self.passed:
            return "passed: no class rose significantly and every guarantee held"
        regressions = [c.cls for c in self.failures if c.verdict == "regression"]
        violated = [c.cls for c in self.failures if c.verdict == "violated"]
        parts = []
        if violated:
            parts.append("guarantees broken: " + ", ".join(violated))
        if regressions:
            parts.append("regressions: " + ", ".join(regressions))
        return "FAILED: " + "; ".join(parts)


def check_comparable(baseline: RunSummary, candidate: RunSummary) -> None:
    if baseline.dataset_hash != candidate.dataset_hash:
        raise GateError(
            f"dataset mismatch: baseline ({baseline.source}) has dataset {baseline.dataset_hash}, candidate "
            f"({candidate.source}) has {candidate.dataset_hash}; runs are compared only on the same personas "
            "and goals: run the candidate on the baseline's dataset, or bless a new baseline "
            "(`simrun baseline bless RUN --out FILE`)")
    if baseline.scorer_version != candidate.scorer_version:
        raise GateError(
            f"scorer mismatch: baseline ({baseline.source}) was scored by scorer version "
            f"{baseline.scorer_version}, candidate ({candidate.source}) by {candidate.scorer_version}; "
            "rescore the older run with `simrun rescore RUN` and bless it again")
    if not set(baseline.cells) & set(candidate.cells):
        raise GateError(f"no cell in common between baseline ({baseline.source}) and candidate "
                        f"({candidate.source}); nothing to compare")


def gate_verdict(baseline: RunSummary, candidate: RunSummary, settings: GateSettings) -> GateResult:
    """The gate's decision. Raises GateError when the two runs must not be compared."""
    check_comparable(baseline, candidate)
    shared = sorted(set(baseline.cells) & set(candidate.cells))
    rises, sizes = {}, {}
    for cls in GATE_CLASSES:
        pairs = [(baseline.cells[c][cls], candidate.cells[c][cls]) for c in shared]
        pairs = [(b, k) for b, k in pairs if b.scored and k.scored]
        rises[cls] = paired_rise([b.rate for b, _ in pairs], [k.rate for _, k in pairs])
        sizes[cls] = pairs
    pvalues = {cls: rises[cls].p for cls in TESTED if rises[cls].p is not None}
    adjusted = correct(pvalues, settings.correction)
    verdicts = []
    for cls in GATE_CLASSES:
        rise, pairs = rises[cls], sizes[cls]
        base_total, cand_total = baseline.total(cls), candidate.total(cls)
        detectable = None
        if cls not in GUARANTEES and len(pairs) >= 2:
            detectable = detectable_rise([b.rate for b, _ in pairs], [b.scored for b, _ in pairs],
                                         [k.scored for _, k in pairs], alpha=settings.alpha,
                                         tests=max(1, len(pvalues)), min_effect=settings.min_effect)
        p_adj = adjusted.get(cls)
        if cls in GUARANTEES:
            if cand_total.fired:
                verdict, reason = "violated", f"broken in {cand_total.fired} candidate conversation(s)"
            else:
                verdict, reason = "held", "no violation in the candidate"
        elif p_adj is None:
            verdict, reason = "untested", "no cell scored in both runs"
        elif p_adj < settings.alpha and rise.delta >= settings.min_effect - 1e-12:
            verdict, reason = "regression", (f"rose {pts(rise.delta)} (at least {size(settings.min_effect)}) "
                                             f"with {settings.correction} p {pval(p_adj)} < {settings.alpha}")
        elif p_adj < settings.alpha:
            verdict, reason = "ok", f"significant, but the rise {pts(rise.delta)} is below {size(settings.min_effect)}"
        else:
            verdict, reason = "ok", f"{settings.correction} p {pval(p_adj)} >= {settings.alpha}"
        verdicts.append(ClassVerdict(cls, class_kind(cls), base_total, cand_total, rise.cells,
                                     rise.baseline_rate, rise.candidate_rate, rise.delta, rise.low, rise.high,
                                     rise.p, p_adj, detectable, verdict, reason))
    return GateResult(baseline, candidate, settings.alpha, settings.min_effect, settings.correction,
                      len(pvalues), len(shared), tuple(verdicts))


# --- rendering ----------------------------------------------------------------------------------

def pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def pts(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:+.1f} pts"


def size(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f} pts"


def pval(v: float | None) -> str:
    if v is None:
        return "–"
    return "<0.0001" if v < 1e-4 else f"{v:.4f}"


def delta_text(c: ClassVerdict) -> str:
    if c.delta is None:
        return "–"
    if c.low is None:
        return pts(c.delta)
    return f"{pts(c.delta)} ({100 * c.low:+.1f} to {100 * c.high:+.1f})"


def method_text(result: GateResult) -> str:
    return (f"unit: the cell (persona × goal), {result.cells} cells; one-sided paired t-test per class at "
            f"alpha {result.alpha}, {result.correction} correction over {result.tests} classes; a regression "
            f"also needs a rise of at least {size(result.min_effect)}; guarantees fail on any violation; "
            f"delta is the mean cell difference with its {CONFIDENCE:.0%} interval; 'detectable' is the rise "
            f"caught with {POWER:.0%} power at this size")


def markdown(result: GateResult) -> str:
    """The summary for $GITHUB_STEP_SUMMARY and pull-request comments."""
    b, k = result.baseline, result.candidate
    icon = "✅" if result.passed else "❌"
    lines = [
        f"## {icon} simrun gate {result.headline()}", "",
        f"Baseline `{b.run_id}` ({b.source}) · candidate `{k.run_id}` ({k.source}) · "
        f"dataset `{b.dataset_hash}` · scorer {b.scorer_version}", "",
        "| class | kind | baseline | candidate | delta (95% interval) | p | detectable | verdict |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for c in result.classes:
        verdict = f"**{c.verdict}**" if c.failed else c.verdict
        if c.kind == "guarantee":
            base, cand, p = f"{c.baseline.fired} conv.", f"{c.candidate.fired} conv.", "zero rule"
        else:
            base, cand, p = pct(c.baseline_rate), pct(c.candidate_rate), pval(c.p_adjusted)
        lines.append(f"| `{c.cls}` | {c.kind} | {base} | {cand} | {delta_text(c)} | {p} | "
                     f"{size(c.detectable)} | {verdict} |")
    lines += ["", f"<sub>{method_text(result)}.</sub>", ""]
    return "\n".join(lines)


def junit_xml(result: GateResult) -> str:
    """One testcase per class; a regression or a violation is a failure."""
    failures = len(result.failures)
    suites = ET.Element("testsuites", name="simrun gate", tests=str(len(result.classes)), failures=str(failures))
    skipped = sum(c.verdict == "untested" for c in result.classes)
    suite = ET.SubElement(suites, "testsuite", name=f"simrun gate {result.candidate.run_id} vs {result.baseline.run_id}",
                          tests=str(len(result.classes)), failures=str(failures), errors="0", skipped=str(skipped))
    for c in result.classes:
        case = ET.SubElement(suite, "testcase", classname=f"simrun.gate.{c.kind}", name=c.cls)
        detail = (f"baseline {pct(c.baseline_rate)} ({c.baseline.fired}/{c.baseline.scored}), candidate "
                  f"{pct(c.candidate_rate)} ({c.candidate.fired}/{c.candidate.scored}), delta {delta_text(c)}, "
                  f"p {pval(c.p)}, corrected p {pval(c.p_adjusted)}, over {c.cells} cells")
        if c.failed:
            failure = ET.SubElement(case, "failure", message=f"{c.cls}: {c.verdict}: {c.reason}", type=c.verdict)
            failure.text = detail
        elif c.verdict == "untested":
            ET.SubElement(case, "skipped", message=c.reason)
        else:
            ET.SubElement(case, "system-out").text = f"{c.verdict}: {c.reason}; {detail}"
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
