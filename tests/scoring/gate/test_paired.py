"""The paired test: taken only when both runs say the same seed and a scripted user (never from a
flag), quiet on a reproduced A/A, exact under within-pair exchangeable noise, and it catches a
rise the unpaired test cannot; flipped conversations are listed for paired runs only."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from simrun._settings import GateSection
from simrun.scoring.gate._baseline import baseline_json, parse_baseline
from simrun.scoring.gate._compare import gate_verdict
from simrun.scoring.gate._paired import Pairs, compare_paired
from simrun.scoring.gate._summary import (
    GATE_CLASSES,
    TESTED,
    CellRepetitions,
    Counts,
    RunSummary,
    first_repetitions,
    merge_runs,
)
from simrun.scoring.gate._text import flip_summary, markdown, method_text
from simrun.scoring.gate._verdict_text import gate_document

SETTINGS = GateSection(permutations=2_000)
BASE_ID, CAND_ID = "r20261204-000000-aaaaaa", "r20261204-000001-bbbbbb"


def run(fired: dict[str, np.ndarray], *, run_id: str = BASE_ID, seed: int | None = 7, user: str | None = "scripted",
        held: np.ndarray | None = None) -> RunSummary:
    """A run from cells x repetitions arrays of which conversation fired each class (the other
    classes clean), 7 personas a goal; `held` masks the conversations the run holds."""
    first = next(iter(fired.values()))
    cells_n, reps = first.shape
    held = np.ones_like(first, bool) if held is None else held
    cells, by_rep = {}, {}
    for i in range(cells_n):
        cell = (f"p{i % 7}", f"g{i // 7}")
        mine = frozenset(int(r) for r in np.flatnonzero(held[i]))
        fired_of = {cls: frozenset(int(r) for r in np.flatnonzero(f[i] & held[i])) for cls, f in fired.items()}
        cells[cell] = {cls: Counts(len(fired_of.get(cls, ())), len(mine), 0) for cls in GATE_CLASSES}
        by_rep[cell] = CellRepetitions(mine, {c: r for c, r in fired_of.items() if r}, {})
    return RunSummary(run_id, "0123456789abcdef", "1", reps, cells, f"test {run_id}", by_rep, user_backend=user,
                      seed=seed)


def draws(rng, rate: float, cells: int = 70, reps: int = 5) -> np.ndarray:
    return rng.random((cells, reps)) < rate


def base_and_rise(seed: int = 3, rise: float = 0.08):
    """dead_end at 30% in every cell; the candidate replays the baseline, and some of its clean
    conversations fire (a share `rise` of all): a rise of about `rise` in every cell."""
    rng = np.random.default_rng(seed)
    dead = draws(rng, 0.30)
    loop = draws(rng, 0.10)
    risen = dead | (~dead & (rng.random(dead.shape) < rise / 0.7))
    return {"dead_end": dead, "loop": loop}, {"dead_end": risen, "loop": loop}


def test_the_paired_path_is_taken_only_when_both_runs_say_the_same_seed_and_a_scripted_user():
    before, after = base_and_rise()
    base = run(before)
    paired = gate_verdict(base, run(after, run_id=CAND_ID), SETTINGS)
    assert paired.pairing.paired and paired.pairing.pairs == 350 and paired.pairing.seed == 7
    assert paired.pairing.text == ("paired on 350 pairs of conversations by cell and repetition "
                                   "(same seed 7, scripted user)")
    assert paired.flips and "paired permutation test" in method_text(paired)
    unpaired = {
        "seeds differ (baseline 7, candidate 8)": (base, run(after, run_id=CAND_ID, seed=8)),
        "the baseline's user is openai:gpt-4o, not the scripted user": (
            run(before, user="openai:gpt-4o"), run(after, run_id=CAND_ID, user="openai:gpt-4o")),
        "does not say its seed": (base, run(after, run_id=CAND_ID, seed=None)),
        "a look of the sequential gate": (base, first_repetitions(run(after, run_id=CAND_ID), 5)),
        "the baseline ran 5 repetitions a cell and the candidate 4": (
            base, run({k: v[:, :4] for k, v in after.items()}, run_id=CAND_ID)),
    }
    for says, (b, c) in unpaired.items():
        result = gate_verdict(b, c, SETTINGS)
        assert not result.pairing.paired and says in result.pairing.text, (says, result.pairing.text)
        assert result.pairing.text.startswith("unpaired: ") and result.pairing.text in method_text(result)
        # No flips between unpaired runs: they would be chance matches.
        assert result.flips is None and "flipped conversations are not listed: the runs are not paired" in \
            flip_summary(result)
        doc = gate_document(result)
        assert doc["test"]["paired"] is False and doc["flips"] is None
    # A baseline of several runs (format 5) is never paired, whatever its runs' seeds.
    several = merge_runs([run(before, run_id=f"r20261204-00000{i}-cccccc") for i in range(2, 5)])
    result = gate_verdict(several, run(after, run_id=CAND_ID), SETTINGS)
    assert not result.pairing.paired and "3 runs blessed together" in result.pairing.text


def test_an_older_baseline_file_is_not_paired_and_a_format_6_one_keeps_the_seed():
    before, after = base_and_rise()
    # A file needs its hashes to make the dataset hash; bless through the writer and read back.
    items = {f"persona:p{i}": f"{i:016x}" for i in range(7)} | {f"goal:g{i}": f"{i + 10:016x}" for i in range(10)}
    from simrun.scoring.gate._summary import _items_hash

    base = dataclasses.replace(run(before), items=items, dataset_hash=_items_hash(items))
    data = json.loads(baseline_json(base, simrun_version="0.test"))
    assert data["format_version"] == 6 and data["seed"] == 7 and data["user_backend"] == "scripted"
    fix = "bless it again"
    loaded = parse_baseline(json.dumps(data).encode(), "baselines/main.json", fix)
    assert loaded.seed == 7
    cand = dataclasses.replace(run(after, run_id=CAND_ID), items=items, dataset_hash=base.dataset_hash)
    assert gate_verdict(loaded, cand, SETTINGS).pairing.paired
    older = {k: v for k, v in data.items() if k != "seed"} | {"format_version": 4}
    old = parse_baseline(json.dumps(older).encode(), "baselines/old.json", fix)
    result = gate_verdict(old, cand, SETTINGS)
    assert not result.pairing.paired and "baselines/old.json" in result.pairing.text
    assert "format 5 or older: bless it again to pair" in result.pairing.text and result.flips is None
    # A seed where the format has none, or none where it must, is refused with the field named.
    for bad in ({**data, "format_version": 4}, {k: v for k, v in data.items() if k != "seed"},
                {**data, "seed": "7"}, {**data, "seed": True}):
        with pytest.raises(Exception, match=r"baselines/bad.json \((seed|format_version|file)\)"):
            parse_baseline(json.dumps(bad).encode(), "baselines/bad.json", fix)


def test_a_paired_a_a_of_a_reproduced_run_stays_quiet_and_lists_no_flip():
    before, _ = base_and_rise()
    result = gate_verdict(run(before), run(before, run_id=CAND_ID), SETTINGS)
    assert result.pairing.paired and result.passed and result.flips == ()
    # Nothing differs in any pair: no hypothesis can vary, so none is tested.
    assert result.tests == 0 and all(c.p_adjusted is None for c in result.classes)
    assert "no conversation flipped" in flip_summary(result)
    assert "Test: paired on 350 pairs of conversations" in markdown(result)


def test_a_planted_rise_is_caught_by_the_paired_test_where_the_unpaired_one_on_the_same_runs_misses_it():
    before, after = base_and_rise(rise=0.08)
    base, cand = run(before), run(after, run_id=CAND_ID)
    paired = gate_verdict(base, cand, SETTINGS)
    assert [c.cls for c in paired.failures] == ["dead_end"], paired.regressions()
    dead = next(c for c in paired.classes if c.cls == "dead_end")
    assert dead.regressed_overall and 0.06 < dead.delta < 0.10
    flips = [f for f in paired.flips if f.cls == "dead_end"]
    assert len(flips) == int((after["dead_end"] & ~before["dead_end"]).sum())
    doc = gate_document(paired)
    assert doc["test"]["paired"] is True and len(doc["flips"]) == len(paired.flips)
    assert {"class", "persona", "goal", "repetition", "conversation_id", "baseline_id"} == set(doc["flips"][0])
    # The same conversations, said to be of different seeds: unpaired, and the rise is within its noise.
    unpaired = gate_verdict(base, dataclasses.replace(cand, seed=8), SETTINGS)
    assert not unpaired.pairing.paired and unpaired.passed


def test_a_missing_repetition_is_left_out_of_the_pairs_and_said():
    before, after = base_and_rise()
    held = np.ones((70, 5), bool)
    held[:10, 4] = False            # a budget cut: the candidate's last repetition of ten cells
    result = gate_verdict(run(before), run(after, run_id=CAND_ID, held=held), SETTINGS)
    assert result.pairing.paired and result.pairing.pairs == 340 and result.pairing.left_out == 10
    assert "10 conversations held by one run only (a repetition the other lacks) left out of the test" in \
        result.pairing.text


@pytest.mark.parametrize("noise", [0.3, 1.0])
def test_the_paired_test_holds_alpha_under_within_pair_exchangeable_noise(noise):
    """A seeded A/A where each conversation is replayed, except that with probability `noise` each
    side of a pair is drawn afresh at the cell's rate (a runtime whose own randomness is not
    seeded): within a pair the two are exchangeable, so the sign-flip test is exact. Over 600
    such A/A pairs, the corrected family's false alarms (3 classes over all 20 cells and 2 goals)
    and one class's uncorrected ones stay near alpha."""
    rng = np.random.default_rng(11)
    cells, reps, alpha = 20, 5, 0.05
    slices = np.array([np.ones(cells, bool), np.arange(cells) < 10, np.arange(cells) >= 10])
    rates = rng.uniform(0.05, 0.4, size=(cells, 1, 3))
    family = raw = 0
    trials = 600
    for _ in range(trials):
        shared = rng.random((cells, reps, 3)) < rates
        sides = []
        for _side in range(2):
            fresh = rng.random((cells, reps, 3)) < rates
            redraw = rng.random((cells, reps, 1)) < noise
            sides.append(np.where(redraw, fresh, shared))
        pairs = Pairs(np.repeat(np.arange(cells), reps), np.tile(np.arange(reps), cells),
                      sides[0].reshape(-1, 3), sides[1].reshape(-1, 3), np.ones((cells * reps, 3), bool))
        tested = compare_paired(pairs, cells, slices, alpha=alpha, permutations=400)
        family += bool(np.nanmin(tested.p_adjusted, initial=1.0) < alpha)
        raw += bool(tested.p[0, 0] < alpha)
    # 600 trials: a binomial at 5% stays within 2.5%-8% with 99.9% probability. One class's own
    # test, on the few pairs that differ at low noise, is discrete: at most alpha, and below it.
    assert 0.025 <= family / trials <= 0.08, family
    assert (0.025 if noise == 1.0 else 0.01) <= raw / trials <= 0.08, raw


def test_a_paired_statistic_counts_each_pair_that_differs_once_per_cell_pair():
    """The statistic by hand: one cell of four pairs, two that rose and none that fell, is
    +2/4 in the cell's rate, with spread sqrt(2 (1/4)^2) and so t = sqrt(2)."""
    fired_b = np.zeros((4, len(TESTED)), bool)
    fired_a = fired_b.copy()
    fired_a[:2, 0] = True
    pairs = Pairs(np.zeros(4, int), np.arange(4), fired_b, fired_a, np.ones_like(fired_b))
    tested = compare_paired(pairs, 1, np.ones((1, 1), bool), alpha=0.05, permutations=2_000, seed=1)
    assert tested.delta[0, 0] == pytest.approx(0.5) and tested.t[0, 0] == pytest.approx(np.sqrt(2))
    # Exactly: of the 4 sign patterns of the two differing pairs, one reaches +2.
    assert tested.p[0, 0] == pytest.approx(0.25, abs=0.03) and tested.tests == 1
