"""What every page shares: the templates' environment, and writing a page.

Templates live in `templates/`, a project's own folder searched first. Autoescape is on for
every template: a runtime's reply is always shown as text, never as markup. What one turn may
put on a page, whatever the runtime sent, is bounded: each text cut to TEXT_CHARS, each list
(offers, card actions, receipts) to ITEMS_SHOWN, each with what was left out counted. Every
value a template prints passes `_bounded` (the environment's `finalize`), so a text no template
clips (a goal's explanation quoting a store value, a finding's detail) is cut all the same.

A page is written into its folder as a new file that then takes the page's name: never through
a symbolic link (a crafted `reports/index.html` pointing elsewhere is replaced, its target left
alone), and never into a folder that is itself a link.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from jinja2 import Environment, FileSystemBytecodeCache, FileSystemLoader, select_autoescape
from jinja2.bccache import Bucket
from markupsafe import Markup

from simrun import _secrets as secrets
from simrun._transcript import error_evidence
from simrun._writing import write_file
from simrun.scoring.gate import pct, size
from simrun.scoring.gate import text as gate_text
from simrun.scoring.store import significant

TEMPLATES = Path(__file__).parent / "templates"
TEXT_CHARS = 2000
ITEMS_SHOWN = 20


class _QuietCache(FileSystemBytecodeCache):
    """A cache that is only ever a saving: a file it cannot write (a full disk) or read costs
    the compilation it would have spared, never the report."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except OSError:
            pass

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> FileSystemBytecodeCache | None:
    try:
        return _QuietCache()
    except (OSError, RuntimeError):     # no temporary folder of this user's own: compile each time
        return None


@functools.lru_cache(maxsize=16)
def environment(user_templates: Path | None = None) -> Environment:
    """The pages' Jinja environment, one per templates folder for the process: it keeps the
    templates it compiled (compiling the report's took a third of a second, at every report),
    and sees a template changed on disk since (Jinja checks each file's time). What it compiled
    is also kept across processes, in Jinja's bytecode cache (a folder of the user's own in the
    temporary directory, that Jinja refuses if anyone else owns it; keyed by each template's
    source): every `simrun` run writes a report, and compiling its templates was a quarter of
    the report's time."""
    folders = [str(user_templates)] if user_templates else []
    env = Environment(loader=FileSystemLoader([*folders, str(TEMPLATES)]),
                      autoescape=select_autoescape(["html"], default=True),
                      trim_blocks=True, lstrip_blocks=True, finalize=_bounded,
                      bytecode_cache=_bytecode_cache())
    env.filters["pct"] = pct
    env.filters["anchor"] = lambda s: re.sub(r"[^A-Za-z0-9_-]", "-", str(s))
    env.filters["clip"] = clip
    env.globals["ITEMS_SHOWN"] = ITEMS_SHOWN
    env.globals["error_evidence"] = error_evidence
    env.filters["sig4"] = significant
    env.filters["pts"] = size      # a difference of rates: "18.3 pts", as the CLI says
    env.globals.update(delta_text=gate_text.delta_text, method_text=gate_text.method_text,
                       subset_text=gate_text.subset_text, sharing_lines=gate_text.sharing_lines,
                       flip_summary=gate_text.flip_summary,
                       moved_lines=gate_text.moved_lines, gate_rows=gate_text.rows)
    return env


def clip(value: object, limit: int = TEXT_CHARS) -> str:
    """At most `limit` characters of a text, and how many more there were; secrets cut out of
    the whole text first."""
    text = secrets.redact("" if value is None else str(value))
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def _bounded(value: object) -> object:
    """What any `{{ ... }}` prints: a text (or anything printed as one) clipped to TEXT_CHARS;
    markup the templates build themselves (charts, filters' output) and numbers as they are."""
    if value is None or isinstance(value, (Markup, bool, int, float)):
        return value
    return clip(value)


def write_page(path: Path, html: str) -> None:
    """A page, by simrun's one writer (`simrun._writing`): whole, never through a link."""
    write_file(path, html, what="the page")
