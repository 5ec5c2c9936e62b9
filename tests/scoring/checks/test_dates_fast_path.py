"""`dates_in` returns at once for a text with no digit (every date pattern needs one), and keeps
what it found for the last texts read: for any text, asked once or again, what it finds is what
the date patterns find when run on it (`_dates_in.__wrapped__`, the reading itself, neither
shortcut nor kept). A month or weekday written with a character re.I equates with a letter
('ſep') is read, never a KeyError; that has its own test below."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from simrun.scoring.checks._answers import _dates_in, dates_in

# The patterns run on the text: no digit shortcut, nothing kept.
read_by_the_patterns = _dates_in.__wrapped__


def _patterns(text, date_order=None):
    return list(read_by_the_patterns(text, date_order))


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:        # the same failure, too
        return type(exc).__name__


pieces = st.sampled_from(["12", "3", "2027", "١٢", "٢٠٢٧", "March", "mar.", "ſep", "Sept", "Tue", "Friday,",
                          "the", "of", "th", "/", "-", ".", " ", ",", "2027-03-12", "12/03/2027", "a", "\n"])
texts = st.one_of(st.text(max_size=40), st.lists(pieces, max_size=12).map("".join),
                  st.lists(pieces.filter(lambda p: not any(c.isdigit() for c in p)), max_size=12).map(" ".join))


@settings(max_examples=1500, deadline=None)
@given(texts, st.sampled_from([None, "day_first", "month_first"]))
@example("0 ſEP", None)                # once a KeyError; read as September (day 0: no date)
@example("on 3 ſep 2027", "day_first")
def test_dates_in_finds_what_the_patterns_find(text, date_order):
    old = _outcome(_patterns, text, date_order)
    assert _outcome(dates_in, text, date_order) == old
    again = _outcome(dates_in, text, date_order)            # from what was kept
    assert again == old
    if isinstance(again, list):
        again.append("changed by a caller")                 # a copy: what is kept stays as it was
        assert _outcome(dates_in, text, date_order) == old


def test_a_long_text_is_read_and_not_kept():
    from simrun.scoring.checks._answers import KEPT_CHARS
    long = "Flying out 12 March 2027. " + "x" * KEPT_CHARS + " Back on 2027-03-19."
    before = _dates_in.cache_info().currsize
    assert dates_in(long) == _patterns(long) == dates_in(long)
    assert sorted(dates_in(long)) == [(2027, 3, 12, None, 24), (2027, 3, 19, None, len(long) - 1)]
    assert _dates_in.cache_info().currsize == before


def test_a_month_or_weekday_the_patterns_match_in_any_case_is_always_read():
    """The date patterns match case-insensitively, as Python's re does: 'ſ' (long s) matches 's'
    and 'K' (the Kelvin sign) 'k'. Whatever they match, the month and weekday are looked up and
    read, never a KeyError (which made the check UNVERIFIABLE for a reply saying 'ſep')."""
    import calendar
    import re

    twins = {letter: [chr(c) for c in range(0x80, 0x3000) if re.fullmatch(letter, chr(c), re.I)]
             for letter in "abcdefghijklmnopqrstuvwxyz"}
    assert "ſ" in twins["s"] and "\u212a" in twins["k"]
    for number, name in enumerate(calendar.month_abbr):
        for i, letter in enumerate(name.lower()):
            for twin in twins.get(letter, []):
                text = f"on 10 {name[:i]}{twin}{name[i + 1:]} 2026"
                assert [d[:3] for d in dates_in(text, "day_first")] == [(2026, number, 10)], text
    for number, name in enumerate(calendar.day_name):
        for i, letter in enumerate(name.lower()):
            for twin in twins.get(letter, []):
                text = f"{name[:i]}{twin}{name[i + 1:]}, 2026-09-13"
                assert [d[3] for d in dates_in(text, "day_first")] == [number], text
