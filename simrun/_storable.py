"""What simrun can send as JSON and keep in DuckDB, and where a value breaks that.

One rule for everything that travels as JSON and is stored: a runtime's answers (untrusted,
read by every transport) and the data of persona and goal files (sent to the runtime as a
conversation's setup, compared with its store, kept with the run). A string may not hold a NUL
character or a lone surrogate, a number must be finite, an integer at most MAX_INT_DIGITS
digits long. A goal file's `.nan` is refused where it is written, naming its line, rather than
met at the runtime's first answer and counted as the runtime's fault.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from typing import Any

MAX_INT_DIGITS = 1000                   # an integer longer than this is no value anyone means
# 2**3321 < 10**1000: an integer of no more bits has at most MAX_INT_DIGITS digits, told without
# writing it out. Past that its digits are counted (str() refuses past 4,300 digits, and four
# times as many bits is about 4,000: beyond, it is too long without counting).
_SHORT_BITS = int(MAX_INT_DIGITS * math.log2(10))

# The store's integer columns, which a number from a file or a flag must fit before it is written
# (a DuckDB conversion error mid-write is no message for a user): BIGINT for seeds, INTEGER for
# turns and repetitions.
BIGINT_MIN, BIGINT_MAX = -2**63, 2**63 - 1
INTEGER_MAX = 2**31 - 1
# Money is DECIMAL(18, 8): below ten billion dollars, to the hundred-millionth (simrun/_money.py).
MONEY_PLACES = 8
MONEY_CEILING = 10 ** (18 - MONEY_PLACES)
# The most conversations of one cell a run asks for: simrun.toml and -n, baselines and bundles.
MAX_REPETITIONS = 10_000

# A JSON document as decoded (a runtime's answer, a stored value, a config), before anything has
# read its shape: Any is the honest type until a model or an isinstance check has looked at it.
Json = Any
JsonObject = dict[str, Any]     # a decoded JSON object, its values unchecked

# What a YAML file holds that JSON does not, and simrun turns into JSON itself (ISO dates).
_DATES = (dt.date, dt.datetime)


def unstorable(value: Any) -> str | None:
    """What in a value the store cannot hold, or None."""
    found = first_unstorable(value)
    return found[1] if found else None


def first_unstorable(value: Any, *, dates: bool = False) -> tuple[tuple[Any, ...], str] | None:
    """(the path of keys and indexes to the first value the store cannot hold, what it is), or
    None. `dates`: YAML's dates and times pass (simrun writes them as ISO text); anything
    else that is not JSON's (bytes, a set) is reported too."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return path, "a NUL character in a string"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return path, f"a lone surrogate (\\u{ord(item[exc.start]):04x}) in a string"
        elif isinstance(item, dict):
            for key, inner in reversed(item.items()):   # the first key is looked at first
                stack.append(((*path, key), inner))
                stack.append(((*path, key), key))
        elif isinstance(item, list):
            stack.extend(((*path, i), inner) for i, inner in reversed(list(enumerate(item))))
        elif isinstance(item, float):
            if not math.isfinite(item):
                return path, f"the number {item}, which JSON cannot hold"
        elif isinstance(item, int) and not isinstance(item, bool):
            bits = item.bit_length()
            if bits > _SHORT_BITS and (bits > 4 * _SHORT_BITS or len(str(abs(item))) > MAX_INT_DIGITS):
                return path, f"an integer of more than {MAX_INT_DIGITS} digits"
        elif dates and not (item is None or isinstance(item, (bool, *_DATES))):
            return path, f"a {type(item).__name__}, which JSON cannot hold"
    return None


# How a JSON text writes a NUL or a surrogate: as an escape (raw, a JSON reader refuses the one
# and strict UTF-8 the other). The runtime's answers are searched for it too (adapters/base.py).
SUSPECT_ESCAPE = r"\\u(?:0000|[dD][89a-fA-F])"
# Where a JSON text can hold what `first_unstorable` finds and a plain read does not refuse: NaN
# and infinities (constants, or a literal past the float range: a three-digit exponent, or 210
# digits and more before it), an integer past the bound, a NUL or a lone surrogate (escapes). A
# text with none of these is storable once it is JSON, and is not walked.
_SUSPECT_TEXT = re.compile(r"NaN|Infinity|[eE][+-]?[0-9]{3}|[0-9]{210}|" + SUSPECT_ESCAPE)


def json_text_problem(text: str) -> str | None:
    """What a JSON text that was stored elsewhere (another job's shard) holds that the store's own
    JSON cannot, or that it is no JSON at all; None when it is storable. DuckDB keeps NaN,
    infinities and 1e999 in a JSON column without a word, and no JSON reader reads them back."""
    try:
        value = json.loads(text)
    except RecursionError:
        return "JSON nested too deep to read"
    except ValueError:
        return "text that is not JSON"
    if not _SUSPECT_TEXT.search(text):
        return None
    found = first_unstorable(value)
    return found[1] if found else None
