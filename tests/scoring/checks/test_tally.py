"""Tally keeps its reasons in a plain dict (a Counter cost more to make than most checks cost to
run): its result is the one the Counter version gave, for any sequence of verdicts."""

from __future__ import annotations

import collections

from hypothesis import given, settings
from hypothesis import strategies as st

from simrun.scoring.checks._progress import Tally

verdicts = st.lists(st.one_of(st.just(("ok", None)),
                              st.tuples(st.just("unknown"), st.sampled_from(["", "a", "b", "c", "d"])),
                              st.tuples(st.just("found"), st.integers(1, 5))), max_size=30)


def _old_reason(reasons: list[str]) -> str | None:
    counted = collections.Counter(reasons)
    return "; ".join(r for r, _ in counted.most_common(2)) or None if counted else None


@settings(max_examples=500, deadline=None)
@given(verdicts)
def test_tally_result_as_with_a_counter(seq):
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
    assert result.reason == _old_reason(said)
    assert (result.checked_turns, result.unverifiable_turns) == (
        sum(k != "unknown" for k, _ in seq), sum(k == "unknown" for k, _ in seq))
    assert [f.turn for f in result.findings] == [a for k, a in seq if k == "found"]
