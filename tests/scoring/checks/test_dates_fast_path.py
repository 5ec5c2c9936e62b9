"""`dates_in` returns at once for a text with no digit (every date pattern needs one), and keeps
what it found for the last texts read: for any text, asked once or again, what it finds is what
running the patterns found (the old code, kept below as it was but for the name lookup, which now
reads a month or weekday written with a character re.I equates with a letter, 'ſep', instead of
raising KeyError; that fix has its own test below)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from simrun.scoring.checks import _answers as answers
from simrun.scoring.checks._answers import dates_in


def _old_dates_in(text, date_order=None):
    found = []
    for pattern in answers._DATE_PATTERNS:
        for m in pattern.finditer(text):
            month = m.group("month")
            month = int(month) if month.isdigit() else answers._named(answers._MONTHS, month.rstrip("."))
            found.append((answers._int(m.group("year")), month, int(m.group("day")), answers._weekday(m), m.end()))
    if date_order is not None:
        for m in answers._NUMERIC_DATE.finditer(text):
            first, second = int(m.group("first")), int(m.group("second"))
            day, month = (first, second) if date_order == "day_first" else (second, first)
            found.append((int(m.group("year")), month, day, answers._weekday(m), m.end()))
    return [d for d in found if 1 <= d[1] <= 12 and 1 <= d[2] <= 31]


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
@example("0 ſEP", None)                # a KeyError in the old lookup; read as September now
@example("on 3 ſep 2027", "day_first")
def test_dates_in_finds_what_the_patterns_found(text, date_order):
    old = _outcome(_old_dates_in, text, date_order)
    assert _outcome(dates_in, text, date_order) == old
    again = _outcome(dates_in, text, date_order)            # from what was kept
    assert again == old
    if isinstance(again, list):
        again.append("changed by a caller")                 # a copy: what is kept stays as it was
        assert _outcome(dates_in, text, date_order) == old


def test_a_long_text_is_read_and_not_kept():
    from simrun.scoring.checks._answers import KEPT_CHARS, _dates_in
    long = "Flying out 12 March 2027. " + "x" * KEPT_CHARS + " Back on 2027-03-19."
    before = _dates_in.cache_info().currsize
    assert dates_in(long) == _old_dates_in(long) == dates_in(long)
    assert _dates_in.cache_info().currsize == before


def test_a_month_or_weekday_the_patterns_match_in_any_case_is_always_read():
    """The date patterns match case-insensitively, as Python's re does: 'ſ' (long s) matches 's'
    and 'K' (the Kelvin sign) 'k'. Whatever they match, the month and weekday are looked up and
    read, never a KeyError (which made the check UNVERIFIABLE for a reply saying 'ſep')."""
    import calendar
    import re

    from simrun.scoring.checks._answers import dates_in

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
