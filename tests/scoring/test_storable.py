"""The one rule for what simrun can send as JSON and store (`scoring/storable.py`): exact at the
integer bound, with the path to what breaks it."""

from __future__ import annotations

import datetime as dt
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.storable import MAX_INT_DIGITS, first_unstorable, unstorable

# Integers around every power of ten and of two near the bound, of either sign.
near_the_bound = st.builds(lambda base, shift, sign: sign * (base + shift),
                           st.sampled_from([10 ** d for d in range(995, 1005)] + [2 ** b for b in range(3300, 3340)]),
                           st.integers(-3, 3), st.sampled_from([1, -1]))


@settings(max_examples=500, deadline=None)
@given(near_the_bound)
def test_an_integer_is_refused_exactly_when_it_has_more_digits_than_the_bound(n):
    too_long = len(str(abs(n))) > MAX_INT_DIGITS
    assert (unstorable({"a": [n]}) is not None) == too_long
    assert first_unstorable({"a": [1, n]}) == ((("a", 1), f"an integer of more than {MAX_INT_DIGITS} digits")
                                                if too_long else None)


def test_far_past_the_bound_is_told_without_writing_the_number_out():
    assert unstorable(2 ** 100_000) == f"an integer of more than {MAX_INT_DIGITS} digits"   # str() would raise


def test_the_first_problem_in_document_order_is_named_with_its_path():
    value = {"ok": [1, "two", 3.5, None, True], "setup": {"records": {"r1": {"n": math.nan, "s": "a\x00"}}},
             "later": "\x00"}
    assert first_unstorable(value) == (("setup", "records", "r1", "n"), "the number nan, which JSON cannot hold")
    assert first_unstorable({"k\x00": 1}) == (("k\x00",), "a NUL character in a string")
    assert first_unstorable(["\ud800"])[1] == "a lone surrogate (\\ud800) in a string"


def test_yaml_s_own_values_pass_as_dates_and_fail_as_anything_else_json_lacks():
    assert first_unstorable({"today": dt.date(2026, 12, 1), "at": dt.datetime(2026, 12, 1, 10)}, dates=True) is None
    assert first_unstorable({"b": b"x"}, dates=True) == (("b",), "a bytes, which JSON cannot hold")
    assert first_unstorable({"s": {1, 2}}, dates=True) == (("s",), "a set, which JSON cannot hold")
    # A runtime's parsed answer holds only JSON's types: there, only the store's limits are checked.
    assert first_unstorable({"b": b"x"}) is None
