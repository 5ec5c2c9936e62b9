"""Text from outside (a runtime, a file, a store) made safe to show: on a terminal, and as one
line of a name or a version.

A terminal reads some characters as commands: escape sequences set the clipboard (OSC 52) or
the window title, clear the screen or move the cursor; bidi controls (U+202E...) reorder what is
shown, and zero-width characters hide text inside text. None of them is ever needed to read
what a runtime said, so every such character is shown escaped (`\\x1b`, `\\u202e`), visible and
inert. `escaped` is what the CLI's console applies to every piece of text it prints
(`simrun/cli/_common.py`); `one_line` is for short identities (a runtime's name and version)
that are stored and shown as plain text, with such characters dropped.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# Controls (C0, C1, DEL), format characters (bidi marks and isolates, zero-width space and
# joiners, the BOM, soft hyphen), lone surrogates, and the Unicode line and paragraph separators.
_UNSAFE = re.compile("[\\x00-\\x1f\\x7f-\\x9f\\u00ad\\u061c\\u180e\\u200b-\\u200f\\u2028-\\u202e"
                     "\\u2060-\\u206f\\ufeff\\ufff9-\\ufffb\\ud800-\\udfff]")


def _unsafe(ch: str) -> bool:
    return bool(_UNSAFE.match(ch)) or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escaped(text: str, keep: str = "\n") -> str:
    """`text` with every control, format (bidi, zero-width) and separator character written as
    its escape, except those in `keep` (a newline, in text that is printed line by line)."""
    if not isinstance(text, str):
        return text
    if text.isprintable() and not _UNSAFE.search(text):
        return text                         # the common case, at C speed
    return "".join(ch if ch in keep or not _unsafe(ch) else _escape(ch) for ch in text)


def one_line(value: Any, limit: int) -> str | None:
    """A short identity (a name, a version) as one line of at most `limit` characters, with
    control, format and separator characters dropped and runs of whitespace made one space;
    None when nothing is left, or when `value` is not text or a number."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = " ".join("".join(" " if ch.isspace() else ch for ch in str(value) if not _unsafe(ch) or ch.isspace())
                    .split())
    return text[:limit] or None
