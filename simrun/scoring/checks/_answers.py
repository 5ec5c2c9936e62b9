"""Does a reply carry a value from the store? Answers in the words people and runtimes write.

`carries(reply, value)` is true when the reply states `value` in one of the forms below, and
never when it states a different value (docs/reference/personas-and-goals.md, "What counts as an answer"):

- a date (`2026-12-10`, or a `datetime.date`): ISO (2026-12-10, 2026/12/10); day month year
  (10 December 2026, 10th of Dec 2026); month day year (December 10, 2026; Dec 10th); each with
  or without a weekday, which must then be the date's own; the year may be left out, but a year
  that is given must be the value's. Numeric dates (10/12/2026, 10.12.2026) count only when the
  goal says which order it means (`date_order: day_first` or `month_first`).
- a time (`10:30`, `10:30:00`): 10:30, 10.30, 10:30 am, 10.30am, 10:30 a.m.; 14:30 also as
  2:30 pm; a whole hour also as 10 am; 12:00 also as noon or midday.
- a number (`2`, `2.5`, or numeric text): its digits as a whole number (not inside 12, 2.5, 2-3
  or v2), with thousands separated by commas or not; a whole number from 0 to 20 also as a word.
- text: the value as whole words, where case, accents and runs of whitespace do not count.
- an ISO date and time (`2026-12-10T10:30`): the date and the time, both.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import re
import unicodedata
from collections.abc import Callable
from typing import Any, Literal, TypeVar

T = TypeVar("T")
DateOrder = Literal["day_first", "month_first"]

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
                "nineteen", "twenty")
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_WEEKDAYS |= {name.lower(): i for i, name in enumerate(calendar.day_abbr)}
_WEEKDAYS |= {"tues": 1, "weds": 2, "thur": 3, "thurs": 3}

_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAY = r"(?:(?P<weekday>" + "|".join(sorted(_WEEKDAYS, key=len, reverse=True)) + r")\.?,?\s+(?:the\s+)?)?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?(?!\d)"
_YEAR = r"(?:,?\s+(?P<year>\d{4})(?!\d))?"
_DATE_PATTERNS = (
    re.compile(r"(?<![\w/.-])" + _WEEKDAY + r"(?P<year>\d{4})[-/](?P<month>\d{1,2})[-/](?P<day>\d{1,2})"
               r"(?![\d/-])", re.I),
    re.compile(r"(?<![\w/.-])" + _WEEKDAY + _DAY + r"(?:\s+of)?\s+" + _MONTH + _YEAR + r"(?!\w)", re.I),
    re.compile(r"(?<![\w/.-])" + _WEEKDAY + _MONTH + r"\s+(?:the\s+)?" + _DAY + _YEAR + r"(?!\w)", re.I),
)
_NUMERIC_DATE = re.compile(r"(?<![\w/.-])" + _WEEKDAY + r"(?P<first>\d{1,2})(?P<sep>[/.])(?P<second>\d{1,2})"
                           r"(?P=sep)(?P<year>\d{4})(?![\d/.]\d|\w)", re.I)
_TIME = re.compile(r"(?<![\w:./])(?P<hour>\d{1,2})(?:[:.](?P<minute>\d{2})(?::\d{2})?)?(?![\d:]|[./]\d)"
                   r"(?:\s*(?P<half>a\.?\s?m\b\.?|p\.?\s?m\b\.?))?", re.I)
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ISO_DATETIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)(?:Z|[+-]\d{2}:?\d{2})?$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")


def carries(reply: str, value: Any, date_order: DateOrder | None = None) -> bool:
    """Whether `reply` states `value` (a store value: JSON text, number, or a date)."""
    if value is None or reply is None:
        return False
    if isinstance(value, dt.datetime):
        return carries_date(reply, value.date(), date_order) and carries_time(reply, value.time())
    if isinstance(value, dt.date):
        return carries_date(reply, value, date_order)
    if isinstance(value, dt.time):
        return carries_time(reply, value)
    if isinstance(value, bool):
        return carries_text(reply, str(value).lower())
    if isinstance(value, (int, float)):
        return carries_number(reply, value)
    text = str(value).strip()
    if _ISO_DATE.match(text):
        try:
            return carries_date(reply, dt.date.fromisoformat(text), date_order)
        except ValueError:
            return carries_text(reply, text)
    moment = _ISO_DATETIME.match(text)
    if moment:
        try:
            day, clock = dt.date.fromisoformat(moment.group(1)), dt.time.fromisoformat(moment.group(2))
        except ValueError:
            return carries_text(reply, text)
        return carries_date(reply, day, date_order) and carries_time(reply, clock)
    hours_minutes = _CLOCK.match(text)
    if hours_minutes and int(hours_minutes.group(1)) < 24 and int(hours_minutes.group(2)) < 60:
        return carries_time(reply, dt.time(int(hours_minutes.group(1)), int(hours_minutes.group(2))))
    if _NUMBER.match(text):
        return carries_number(reply, float(text) if "." in text else int(text))
    return carries_text(reply, text)


# --- dates -------------------------------------------------------------------------------------

# Every date pattern above needs a digit (`\d`, as they read it: any decimal digit). Most texts
# asked about (a user's messages, for the simulator_error check) have none, and three patterns
# cost forty times a search for one.
_DIGIT = re.compile(r"\d")
# The longest text whose reading is kept: a runtime's reply may be a megabyte, and a thousand of
# those would be a gigabyte kept (at this length, at most 8 MB: 1,024 texts of 2,000 characters,
# four bytes each at worst).
KEPT_CHARS = 2000


def kept_for_short_texts(read: Callable[..., T]) -> Callable[..., T]:
    """`read(text, ...)`, its answers kept for the last 1,024 texts of at most KEPT_CHARS
    characters (longer ones are read each time): the scorer and the scripted user read the same
    few messages and replies again and again. What `read` returns is shared: it must not change."""
    kept = functools.lru_cache(maxsize=1024)(read)

    @functools.wraps(read)
    def reading(text: str, *args: Any) -> T:
        return kept(text, *args) if len(text) <= KEPT_CHARS else read(text, *args)

    reading.cache_info = kept.cache_info     # type: ignore[attr-defined]  # a function takes attributes at run time
    return reading


def dates_in(text: str, date_order: DateOrder | None = None) -> list[tuple[int | None, int, int, int | None, int]]:
    """Every date written in `text`: (year or None, month, day, weekday or None, end offset)."""
    if not _DIGIT.search(text):
        return []
    return list(_dates_in(text, date_order))


# 92 distinct texts with a digit among 388 in a demo run.
@kept_for_short_texts
def _dates_in(text: str, date_order: DateOrder | None) -> tuple[tuple[int | None, int, int, int | None, int], ...]:
    found = []
    for pattern in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            month = m.group("month")
            month = int(month) if month.isdigit() else _named(_MONTHS, month.rstrip("."))
            found.append((_int(m.group("year")), month, int(m.group("day")), _weekday(m), m.end()))
    if date_order is not None:
        for m in _NUMERIC_DATE.finditer(text):
            first, second = int(m.group("first")), int(m.group("second"))
            day, month = (first, second) if date_order == "day_first" else (second, first)
            found.append((int(m.group("year")), month, day, _weekday(m), m.end()))
    return tuple(d for d in found if 1 <= d[1] <= 12 and 1 <= d[2] <= 31)


def carries_date(reply: str, value: dt.date, date_order: DateOrder | None = None) -> bool:
    return any(month == value.month and day == value.day and year in (None, value.year)
               and weekday in (None, value.weekday())
               for year, month, day, weekday, _ in dates_in(reply, date_order))


def _named(table: dict[str, int], text: str) -> int:
    """A month's or weekday's number, for a name the case-insensitive patterns matched. Python's
    re.I takes 'ſ' (long s) for 's', 'K' (Kelvin) for 'k' and 'İ' for 'i', which no lower() or
    casefold() undoes: such a rare name is matched against the table's as the pattern did."""
    number = table.get(text.lower())
    if number is None:
        number = next(n for name, n in table.items() if re.fullmatch(re.escape(name), text, re.I))
    return number


def _weekday(m: re.Match[str]) -> int | None:
    name = m.group("weekday")
    return _named(_WEEKDAYS, name) if name else None


def _int(text: str | None) -> int | None:
    return int(text) if text else None


# --- times -------------------------------------------------------------------------------------

def carries_time(reply: str, value: dt.time) -> bool:
    wanted = (value.hour, value.minute)
    if wanted == (12, 0) and re.search(r"\b(?:noon|midday)\b", reply, re.I):
        return True
    for m in _TIME.finditer(reply):
        hour, minute, half = int(m.group("hour")), m.group("minute"), m.group("half")
        if minute is None and half is None:
            continue          # a bare number is not a time
        minute = int(minute or 0)
        if half:
            if not 1 <= hour <= 12:
                continue
            hour = hour % 12 + (12 if half.lower().startswith("p") else 0)
        if (hour, minute) == wanted:
            return True
    return False


# --- numbers -------------------------------------------------------------------------------------

def carries_number(reply: str, value: int | float) -> bool:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    forms = [str(value)]
    if isinstance(value, int):
        if abs(value) >= 1000:
            forms.append(f"{value:,}")
        if 0 <= value < len(NUMBER_WORDS):
            words = rf"(?<![\w-]){NUMBER_WORDS[value]}(?![\w-])"
            if re.search(words, reply, re.I):
                return True
    digits = "|".join(re.escape(f) for f in forms)
    return re.search(rf"(?<![\w.,-])(?:{digits})(?![\w-]|[.,]\d)", reply) is not None


# --- text ------------------------------------------------------------------------------------------

def plain(text: str) -> str:
    """Text with case, accents and runs of whitespace taken out of the comparison."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return re.sub(r"\s+", " ", bare.casefold()).strip()


def carries_text(reply: str, value: str) -> bool:
    wanted = plain(value)
    if not wanted:
        return False
    return re.search(rf"(?<!\w){re.escape(wanted)}(?!\w)", plain(reply)) is not None
