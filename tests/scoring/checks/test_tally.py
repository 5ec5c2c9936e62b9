"""Tally keeps its reasons in a plain dict (a Counter cost more to make than most checks cost to
run): for any sequence of verdicts, its reason is the two commonest reasons given, commonest
first, a tie in the order first given (empty reasons count, and say nothing), and its counts are
the verdicts'."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simrun.scoring.checks._progress import Tally

verdicts = st.lists(st.one_of(st.just(("ok", None)),
                              st.tuples(st.just("unknown"), st.sampled_from(["", "a", "b", "c", "d"])),
                              st.tuples(st.just("found"), st.integers(1, 5))), max_size=30)


def _two_commonest(reasons: list[str]) -> str | None:
    ranked = sorted(set(reasons), key=lambda r: (-reasons.count(r), reasons.index(r)))
    return "; ".join(ranked[:2]) or None


@settings(max_examples=500, deadline=None)
@given(verdicts)
def test_tally_result_names_the_two_commonest_reasons(seq):
    tally, said = Tally("x"), []
    for kind, arg in seq:
        if kind == "ok":
            tally.ok()
        elif kind == "unknown":
            tally.unknown(arg)
            said.append(arg)
        else:
            tally.found(arg, "detail", n=arg)
    result = tally.result()
    assert result.reason == _two_commonest(said)
    assert (result.checked_turns, result.unverifiable_turns) == (
        sum(k != "unknown" for k, _ in seq), sum(k == "unknown" for k, _ in seq))
    assert [f.turn for f in result.findings] == [a for k, a in seq if k == "found"]
