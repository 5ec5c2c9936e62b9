"""The scorer proven the hard way, on two reference runtimes written apart: TripDesk, written
together with the scorer, and LibDesk, written from the README and docs/protocol.md in another
style (offers completed over several turns, answers in plain words, several records of one type,
no dry run of what it offers, faults drawn at every opportunity rather than once).

Each runtime plants its named faults at known rates and keeps a truth log: per class, every
conversation where it did what the class describes, whether a planted fault made it or it arose
of itself (faults that meet in one conversation do that). The scorer must agree with the log
exactly, class by class and conversation by conversation (precision and recall of 1.0): on a
clean run, with each fault alone at 30%, and with every fault at once at 5%.

Tolerance on the planted rate: a fault is drawn per chance it gets (per conversation on
TripDesk, per opportunity on LibDesk), so the number planted is Binomial(chances, rate); the
share must lie within three standard deviations of the rate. The seeds are fixed, so the test
is exact; on a new seed a correct implementation fails it about 0.3% of the time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from simrun.examples.libdesk import LibDesk
from simrun.examples.libdesk.truth import FAULTS as LIBDESK_FAULTS
from simrun.examples.tripdesk import TripDesk
from simrun.examples.tripdesk.faults import FAULTS as TRIPDESK_FAULTS
from simrun.scoring.checks._scorer import ALL_CLASSES
from simrun.scoring.dataset._files import Dataset
from tests.conftest import DEMO_REPETITIONS, DemoRun, run_demo

OBSERVED = (*ALL_CLASSES, "runtime_error")
ALONE, TOGETHER = 0.3, 0.05
MIN_CHANCES = 30


@dataclass(frozen=True)
class Reference:
    """A reference runtime, its dataset, and how to read its truth log."""

    name: str
    runtime_class: type
    dataset: str                                   # the fixture with its personas and goals
    class_of: dict[str, str]                       # fault -> the class it shows as
    # Faults that can show in few conversations, run where they can, over more repetitions:
    # (persona or None for all, goal or None for all, repetitions).
    scope: dict[str, tuple[str | None, str | None, int]] = field(default_factory=dict)
    isolated: bool = False                         # a fault alone moves no other class

    def truth(self, run: DemoRun, cls: str) -> set[tuple[str, str, int]]:
        if self.runtime_class is TripDesk:
            return run.runtime.fault_log.keys(cls, "manifested")
        return run.runtime.truth.conversations(cls)

    def chances(self, run: DemoRun, fault: str) -> tuple[int, int]:
        """(times the fault was planted, times it could have been)."""
        if self.runtime_class is TripDesk:
            log = run.runtime.fault_log
            eligible, planted = log.keys(fault, "eligible"), log.keys(fault, "planted")
            # Until a fault fires, a faulted conversation is the clean one: it is planted exactly
            # where it was drawn and could show.
            assert planted == log.keys(fault, "drawn") & eligible
            return len(planted), len(eligible)
        truth = run.runtime.truth
        return truth.planted[fault], truth.opportunities[fault]


TRIPDESK_CLASS_OF = {
    "dead_end": "dead_end", "loop": "loop", "refused_offer": "refused_offer",
    "not_understood": "not_understood", "unanswered": "unanswered", "wrong_record": "wrong_record",
    "stale_click": "stale_click", "phantom_receipt": "phantom_receipt",
    "card_not_actionable": "card_not_actionable", "refusal_with_hedge": "refusal_with_hedge",
    "audit_gap": "audit_gap", "audit_misfiled": "audit_gap", "stale_click_ask": "stale_click",
    "forbidden_phrase": "integrity_leak", "drop_refusal": "integrity_leak",
    "crash": "runtime_error",
}
REFERENCES = (
    # A stale click needs the one persona that makes them, a dropped refusal the one goal that
    # needs a refusal, a wrong record a write through an offer while another trip exists.
    Reference("tripdesk", TripDesk, "demo", TRIPDESK_CLASS_OF, isolated=True,
              scope={"stale_click": ("clicky-cleo", None, 50), "stale_click_ask": ("clicky-cleo", None, 50),
                     "drop_refusal": (None, "passport-refusal", 5),
                     "wrong_record": (None, None, 5)}),
    # A stale click needs the persona that makes them, a card or a refusal the one goal with one.
    Reference("libdesk", LibDesk, "library", LIBDESK_FAULTS,
              scope={"stale_click": ("thumbs-tess", None, 60), "stale_click_unnamed": ("thumbs-tess", None, 60),
                     "card_not_actionable": (None, "cancel-hold", 8),
                     "drop_refusal": (None, "privacy-probe", 8)}),
)
BY_NAME = {ref.name: ref for ref in REFERENCES}
_runs: dict[tuple, DemoRun] = {}


def run_of(ref: Reference, dataset: Dataset, faults: dict[str, float], repetitions: int) -> DemoRun:
    """One run per (runtime, matrix, faults), shared by the tests that read it."""
    key = (ref.name, tuple(p.id for p in dataset.personas), tuple(g.id for g in dataset.goals), repetitions,
           tuple(sorted(faults.items())))
    if key not in _runs:
        _runs[key] = run_demo(dataset, faults=faults, repetitions=repetitions, runtime_class=ref.runtime_class)
    return _runs[key]


def scoped(ref: Reference, dataset: Dataset, fault: str | None) -> tuple[Dataset, int]:
    persona, goal, repetitions = ref.scope.get(fault, (None, None, DEMO_REPETITIONS))
    personas = (dataset.persona(persona),) if persona else dataset.personas
    goals = (dataset.goal(goal),) if goal else dataset.goals
    return Dataset(personas, goals, dataset.hash, dataset.item_hashes), repetitions


def clean(ref: Reference, dataset: Dataset, repetitions: int) -> DemoRun:
    """Every fault at rate 0: nothing is planted, but every chance is logged."""
    return run_of(ref, dataset, {name: 0.0 for name in ref.class_of}, repetitions)


def assert_exact(ref: Reference, run: DemoRun) -> None:
    """Precision and recall of 1.0 for every class, against the runtime's truth log."""
    for cls in OBSERVED:
        fired, truth = run.fired(cls), ref.truth(run, cls)
        assert fired == truth, (f"{ref.name} {cls}: reported but not in the truth log {sorted(fired - truth)}; "
                                f"in the truth log but not reported {sorted(truth - fired)}")


@pytest.mark.parametrize("ref", REFERENCES, ids=lambda r: r.name)
def test_every_fault_names_a_class(ref):
    faults = TRIPDESK_FAULTS if ref.runtime_class is TripDesk else LIBDESK_FAULTS
    assert set(ref.class_of) == set(faults)
    assert set(ref.class_of.values()) == set(OBSERVED) - {"simulator_error"}


@pytest.mark.parametrize("ref", REFERENCES, ids=lambda r: r.name)
def test_a_clean_run_is_exact(request, ref):
    """No fault planted: every class agrees with the truth log, goals are reached, and no check
    lacks its evidence. TripDesk's log is empty; LibDesk's holds what arose of itself."""
    run = clean(ref, *scoped(ref, request.getfixturevalue(ref.dataset), None))
    convs = run.conversations
    assert sum(1 for c in convs if c.scorecard.goal_reached) / len(convs) >= 0.95
    assert_exact(ref, run)
    for c in convs:
        assert all(check.unverifiable_turns == 0 for check in c.scorecard.checks.values()), c.cell.id
    if ref.isolated:
        assert not any(ref.truth(run, cls) for cls in OBSERVED)


@pytest.mark.parametrize("ref, fault", [(ref, fault) for ref in REFERENCES for fault in sorted(ref.class_of)],
                         ids=lambda v: v if isinstance(v, str) else v.name)
def test_each_fault_alone_at_30_percent_is_exact(request, ref, fault):
    dataset, repetitions = scoped(ref, request.getfixturevalue(ref.dataset), fault)
    run = run_of(ref, dataset, {fault: ALONE}, repetitions)
    cls = ref.class_of[fault]
    assert ref.truth(run, cls), f"{fault} never showed"
    assert_exact(ref, run)

    planted, chances = ref.chances(run, fault)
    assert chances >= MIN_CHANCES, f"{fault}: only {chances} chances to show"
    sigma = math.sqrt(ALONE * (1 - ALONE) / chances)
    assert abs(planted / chances - ALONE) <= 3 * sigma, f"{fault}: planted {planted} of {chances}"
    if ref.isolated:
        baseline = clean(ref, dataset, repetitions)
        for other in OBSERVED:
            if other != cls:
                assert run.fired(other) == baseline.fired(other), f"{fault} moved {other}"


@pytest.mark.parametrize("ref, scope", [(ref, scope) for ref in REFERENCES for scope in ("everyone", "stale_click")],
                         ids=lambda v: v if isinstance(v, str) else v.name)
def test_every_fault_at_once_at_5_percent_is_exact(request, ref, scope):
    """The whole matrix, and the stale clicker's scope (where a stale click can show at 5%)."""
    dataset = request.getfixturevalue(ref.dataset)
    dataset, repetitions = (dataset, 10) if scope == "everyone" else scoped(ref, dataset, scope)
    run = run_of(ref, dataset, {name: TOGETHER for name in ref.class_of}, repetitions)
    assert_exact(ref, run)
    shown = {cls for cls in OBSERVED if ref.truth(run, cls)}
    # Every class shows, so that none is exact for want of a case.
    expected = {"stale_click"} if scope == "stale_click" else set(ref.class_of.values()) - {"stale_click"}
    assert shown >= expected, sorted(expected - shown)
