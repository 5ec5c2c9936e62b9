"""Text from outside (a runtime, a file, a store) made safe to show: on a terminal, in a CI log,
in Markdown, and as one line of a name or a version.

A terminal reads some characters as commands: escape sequences set the clipboard (OSC 52) or
the window title, clear the screen or move the cursor; bidi controls (U+202E...) reorder what is
shown, and zero-width characters hide text inside text. None of them is ever needed to read
what a runtime said, so every such character is shown escaped (`\\x1b`, `\\u202e`), visible and
inert. `escaped` is what the CLI's console applies to every piece of text it prints
(`simrun/cli/_common.py`); `one_line` is for short identities (a runtime's name and version)
that are stored and shown as plain text, with such characters dropped.

A CI runner reads some lines as commands too (GitHub Actions' `::add-mask::`): `CommandGuard` is
what the console's one file applies to everything written to standard output, and
`without_commands` to standard error. `markdown_text` is how a verdict's line is written in the
step summary and a pull-request comment: as text, never as a heading, a tag, a link or an image.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from simrun import _secrets

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
    return _secrets.cut(text, limit) or None


# GitHub Actions reads a line of a job's output as a workflow command when it starts, after any
# blanks, with "::" (`::add-mask::`, `::error::`, `::stop-commands::`), and the older form "##[" wherever
# it stands. simrun's own lines never do; a line that would, from a reply or a file, is shown with
# the second ":" (or the "[") escaped as `escaped` shows controls: visible, and inert.
_OLD_COMMAND = re.compile(r"(?<=##)\[")


class CommandGuard:
    """One output stream's text, written in pieces (a table, a progress bar), with no line a CI
    runner would read as a workflow command: the state carries over from piece to piece, so a
    command split over two writes (":" then ":add-mask::") is caught as one."""

    def __init__(self) -> None:
        # The current line so far while it holds only blanks and colons (a command may still start
        # there), else None; and the last two characters written (for "##[" across pieces).
        self.begun: str | None = ""
        self.tail = ""

    def __call__(self, text: str) -> str:
        if not text:
            return text
        if self.begun is None and "\n" not in text and "#" not in self.tail + text:
            self.tail = (self.tail + text)[-2:]
            return text                         # the common case: the middle of a plain line
        out: list[str] = []
        for ch in text:
            if ch == "\n":
                self.begun = ""
            elif self.begun is not None:
                if ch == ":" and ":" in self.begun:
                    ch, self.begun = "\\x3a", None
                elif ch in " \t:":
                    self.begun += ch
                else:
                    self.begun = None
            out.append(ch)
        shown = "".join(out)
        joined = self.tail + shown
        if "#" in joined:
            shown = _OLD_COMMAND.sub(lambda _: "\\x5b", joined)[len(self.tail):]
        self.tail = (self.tail + text)[-2:]
        return shown


def without_commands(text: str) -> str:
    """`text`, starting a line, with no line that GitHub Actions would run as a workflow command."""
    if "::" not in text and "##[" not in text:
        return text                         # the common case
    return CommandGuard()(text)


# What a text from outside could use to draw in Markdown what simrun did not say: a line of its own
# (a heading, such as a forged verdict, or a list), an HTML tag (an image fetched from elsewhere,
# a folded section), a link or an image. Emphasis and code spans only change how the text looks,
# and simrun's own words use them (`simrun show RUN`): they are left as they are.
_MARKUP = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]"})


def markdown_text(text: str) -> str:
    """`text` as one line of Markdown that draws no heading, tag, link or image of its own: line
    breaks made spaces, HTML's & < > written as entities, and brackets escaped."""
    return " ".join(str(text).splitlines()).translate(_MARKUP)
