"""The one rule for what simrun can send as JSON and store (`simrun/_storable.py`): exact at the
integer bound, with the path to what breaks it."""

from __future__ import annotations

import datetime as dt
import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from simrun._storable import MAX_INT_DIGITS, first_unstorable, json_text_problem, unstorable

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


# Numbers as a file may write them: any digits, any exponent, NaN and the infinities.
number_texts = st.one_of(
    st.builds(lambda sign, whole, frac, exp: f"{sign}{whole}{frac}{exp}", st.sampled_from(["", "-"]),
              st.one_of(st.integers(0, 10 ** 20).map(str), st.integers(1, 400).map(lambda n: "1" + "0" * n),
                        st.integers(990, 1010).map(lambda n: "9" * n)),
              st.sampled_from(["", ".5", ".000001", "." + "0" * 300 + "1"]),
              st.one_of(st.just(""), st.builds(lambda e, n: f"{e}{n}", st.sampled_from(["e", "E", "e+", "e-", "E-"]),
                                               st.integers(0, 1200)))),
    st.sampled_from(["NaN", "Infinity", "-Infinity"]))
string_texts = st.builds(json.dumps, st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF,
                                                                    blacklist_categories=()), max_size=6))
escape_texts = st.sampled_from(['"\\u0000"', '"\\ud800"', '"\\uDFFF"', '"\\ud83d\\ude00"', '"\\u00e9"', '"a\\\\u0000"'])


def _object_text(values: list[str]) -> str:
    return "{" + ", ".join(f'"k{i}": {x}' for i, x in enumerate(values)) + "}"


json_texts = st.recursive(st.one_of(number_texts, string_texts, escape_texts, st.sampled_from(["true", "null"])),
                          lambda inner: st.one_of(st.lists(inner, max_size=3).map(lambda xs: f"[{', '.join(xs)}]"),
                                                  st.lists(inner, max_size=3).map(_object_text)), max_leaves=8)


def _walked(text: str) -> str | None:
    """The check without its fast path: every text read, and walked."""
    try:
        value = json.loads(text)
    except RecursionError:
        return "JSON nested too deep to read"
    except ValueError:
        return "text that is not JSON"
    found = first_unstorable(value)
    return found[1] if found else None


@settings(max_examples=1000, deadline=None)
@given(json_texts)
def test_a_stored_json_text_is_judged_as_walking_all_of_it_would(text):
    """`json_text_problem` walks only a text its pattern finds suspect: it never lets through what
    the walk would refuse (a literal past the float range, an escaped NUL, an integer too long)."""
    assert json_text_problem(text) == _walked(text)


def test_what_a_store_may_not_hold_in_a_json_text_is_named():
    assert json_text_problem("[1, NaN]") == "the number nan, which JSON cannot hold"
    assert json_text_problem('{"a": ' + "1" + "0" * 300 + "e9}") == "the number inf, which JSON cannot hold"
    assert json_text_problem('"\\u0000"') == "a NUL character in a string"
    assert json_text_problem("nan") == "text that is not JSON"         # DuckDB's JSON takes it; JSON does not
    assert json_text_problem('{"reply": "Infinity and NaN, in words"}') is None
