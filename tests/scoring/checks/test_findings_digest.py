"""The scorer's findings for fixed seeds, pinned: a change made for speed must not change a finding.

The demo matrix and LibDesk's, with every planted runtime fault and every simulator fault at a
rate that fires them all, are scored twice (as the conversation loop scores them, with its
per-turn user checks, and as a rescore does, from the transcript alone), and each scorecard is
reduced to a digest of everything it says: the end, the goal's verdict and detail, and each
class's findings (turn, detail, evidence), checked and unverifiable counts and reason. The
digests were taken from main at 14f26f1, before the scorer's shared walks (issue 28, third
pass). A change that means to change a finding bumps SCORER_VERSION and takes new digests
(`python -m tests.scoring.checks.test_findings_digest`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from simrun.examples.libdesk import LibDesk
from simrun.examples.libdesk.truth import FAULTS as LIBDESK_FAULTS
from simrun.examples.tripdesk.faults import FAULTS as TRIPDESK_FAULTS
from simrun.scoring.checks._scorer import SCORER_VERSION, score
from simrun.simulator import load_dataset
from simrun.simulator.users._scripted import SIMULATOR_FAULTS
from tests.conftest import run_demo

ROOT = Path(__file__).resolve().parents[3]
PINNED = {
    "3": {
        "demo": "57ddad3d8ea2e3040ad1ce06f3174119934effff286cc538721f8995c6c46cff",
        "library": "4aa2085158ddd75811e257f231d649a6e16aae754100db094406e6cc92ea072e",
    },
    # Issue 38, rule 1: a conversation whose runtime answered no turn decides nothing.
    "4": {
        "demo": "937b5a59d9fb7f0e2924e4f215eddfe4d0bd61d2ec75c970763e48b18fffd10d",
        "library": "45c01044fc5deacedde03ae25ba4bdfec48d6981cd4a03ae7067a26a925b5947",
    },
}


def scorecard_text(card) -> str:
    return json.dumps({
        "end": card.end, "reached": card.goal_reached, "detail": card.goal_detail, "turns": card.turns,
        "checks": {cls: [[[f.cls, f.turn, f.detail, f.evidence] for f in r.findings], r.checked_turns,
                         r.unverifiable_turns, r.reason] for cls, r in card.checks.items()},
    }, sort_keys=True, default=str)


def digests(which: str) -> tuple[str, str, int]:
    """(digest as the loop scored, digest rescored from the transcripts, findings in all)."""
    if which == "demo":
        dataset, runtime_class, faults = load_dataset(ROOT / "personas", ROOT / "goals"), None, TRIPDESK_FAULTS
    else:
        libdesk = ROOT / "simrun" / "examples" / "libdesk"
        dataset = load_dataset(libdesk / "personas", libdesk / "goals")
        runtime_class, faults = LibDesk, LIBDESK_FAULTS
    run = run_demo(dataset, faults={name: 0.15 for name in faults},
                   user_faults={name: 0.1 for name in SIMULATOR_FAULTS}, repetitions=3, seed=7, fault_seed=5,
                   **({"runtime_class": runtime_class} if runtime_class else {}))
    looped, rescored, found = hashlib.sha256(), hashlib.sha256(), 0
    for c in sorted(run.conversations, key=lambda c: c.cell.id):
        looped.update(f"{c.cell.id}\n{scorecard_text(c.scorecard)}\n".encode())
        again = score(c.transcript, c.cell.goal, c.cell.persona)
        rescored.update(f"{c.cell.id}\n{scorecard_text(again)}\n".encode())
        found += sum(len(r.findings) for r in c.scorecard.checks.values())
    return looped.hexdigest(), rescored.hexdigest(), found


def test_the_demo_matrix_with_every_fault_gives_the_pinned_findings():
    looped, rescored, found = digests("demo")
    assert found > 50, "the planted faults were found"
    assert looped == rescored == PINNED[SCORER_VERSION]["demo"]


def test_libdesk_with_every_fault_gives_the_pinned_findings():
    looped, rescored, found = digests("library")
    assert found > 20, "the planted faults were found"
    assert looped == rescored == PINNED[SCORER_VERSION]["library"]


if __name__ == "__main__":
    for which in ("demo", "library"):
        print(which, *digests(which))
