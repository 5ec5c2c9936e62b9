"""The scorer proven the hard way: each named fault planted at a known rate in the reference
runtime is reported by exactly its class, in exactly the conversations where it was planted,
and no other class moves from its no-fault value.

Tolerance on the rate: the fault is drawn per conversation (Bernoulli at the planted rate) and
shows at the first turn where it can, so among the E conversations where it could show, the
number planted is Binomial(E, rate). We require the planted share to lie within three standard
deviations of the rate, sqrt(rate * (1 - rate) / E) each: a correct implementation fails this
about 0.3% of the time on a new seed, and the seeds here are fixed, so the test is exact.
"""

from __future__ import annotations

import math

import pytest

from scoring.scorer import ALL_CLASSES
from scoring.dataset import Dataset
from tests.conftest import DEMO_REPETITIONS, run_demo
from tripdesk.faults import FAULTS

RATE = 0.3
CLASS_OF = {
    "dead_end": "dead_end", "loop": "loop", "refused_offer": "refused_offer",
    "not_understood": "not_understood", "unanswered": "unanswered", "wrong_record": "wrong_record",
    "stale_click": "stale_click", "phantom_receipt": "phantom_receipt",
    "card_not_actionable": "card_not_actionable", "refusal_with_hedge": "refusal_with_hedge",
    "audit_gap": "audit_gap", "forbidden_phrase": "integrity_leak", "drop_refusal": "integrity_leak",
    "crash": "runtime_error",
}
OBSERVED = (*ALL_CLASSES, "runtime_error")
# Some faults can show in few demo conversations: a stale click needs the one persona that makes
# them, a dropped refusal the one goal that needs a refusal, a wrong record a write through an
# offer while another trip exists. They are measured over more repetitions.
SCOPE = {"stale_click": ("clicky-cleo", 50), "drop_refusal": (None, 5), "wrong_record": (None, 5)}
MIN_ELIGIBLE = 30


def scoped(demo: Dataset, fault: str) -> tuple[Dataset, int]:
    if fault not in SCOPE:
        return demo, DEMO_REPETITIONS
    persona, repetitions = SCOPE[fault]
    if persona is None:
        return demo, repetitions
    return Dataset((demo.persona(persona),), demo.goals, demo.hash, demo.item_hashes), repetitions


_probes: dict = {}


def _probe(dataset: Dataset, repetitions: int):
    """The scope run with every fault at rate 0: unchanged, but eligibility is logged."""
    key = (tuple(p.id for p in dataset.personas), repetitions)
    if key not in _probes:
        _probes[key] = run_demo(dataset, faults={name: 0.0 for name in FAULTS}, repetitions=repetitions)
    return _probes[key]


def test_every_fault_names_a_class():
    assert set(CLASS_OF) == set(FAULTS)
    assert set(CLASS_OF.values()) >= set(ALL_CLASSES) - {"simulator_error"}


def test_no_fault_baseline(clean_run):
    """With no faults: every guarantee and class is zero and goals are reached in >= 90%."""
    convs = clean_run.conversations
    reached = sum(1 for c in convs if c.scorecard.goal_reached)
    assert reached / len(convs) >= 0.90
    for cls in OBSERVED:
        assert clean_run.fired(cls) == set(), cls
    for c in convs:
        assert all(check.unverifiable_turns == 0 for check in c.scorecard.checks.values())


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_is_reported_by_its_class_alone(demo, fault):
    dataset, repetitions = scoped(demo, fault)
    clean_run = _probe(dataset, repetitions)
    eligible = clean_run.runtime.fault_log.keys(fault, "eligible")
    assert len(eligible) >= MIN_ELIGIBLE, f"{fault}: only {len(eligible)} conversations can show it"

    run = run_demo(dataset, faults={fault: RATE}, repetitions=repetitions)
    log = run.runtime.fault_log
    planted = log.keys(fault, "planted")
    # Until a fault fires, a faulted conversation is the clean one: it is planted exactly
    # where it was drawn and could show.
    assert planted == log.keys(fault, "drawn") & eligible

    cls = CLASS_OF[fault]
    assert run.fired(cls) == planted, f"{cls} should fire exactly where {fault} was planted"
    for other in OBSERVED:
        if other != cls:
            assert run.fired(other) == clean_run.fired(other), f"{fault} moved {other}"

    share = len(planted) / len(eligible)
    sigma = math.sqrt(RATE * (1 - RATE) / len(eligible))
    assert abs(share - RATE) <= 3 * sigma, f"{fault}: planted in {share:.2%} of {len(eligible)}"
    # The class rate over the whole run is exactly the planted share of all conversations.
    assert len(run.fired(cls)) / len(run.conversations) == len(planted) / len(run.conversations)
