"""What every page shares: the templates' environment, and writing a page.

Templates live in `templates/`, a project's own folder searched first. Autoescape is on for
every template: a runtime's reply is always shown as text, never as markup. What one turn may
put on a page, whatever the runtime sent, is bounded: each text cut to TEXT_CHARS, each list
(offers, card actions, receipts) to ITEMS_SHOWN, each with what was left out counted.
"""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

from scoring.errors import SimrunError
from scoring.gate import text as gate_text
from scoring.gate.formats import pct, size
from scoring.store.rates import significant
from scoring.transcript import error_evidence

TEMPLATES = Path(__file__).parent / "templates"
TEXT_CHARS = 2000
ITEMS_SHOWN = 20


def environment(user_templates: Path | None = None) -> Environment:
    folders = [str(user_templates)] if user_templates else []
    env = Environment(loader=FileSystemLoader([*folders, str(TEMPLATES)]),
                      autoescape=select_autoescape(["html"], default=True),
                      trim_blocks=True, lstrip_blocks=True)
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


def clip(value, limit: int = TEXT_CHARS) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def write_page(path: Path, html: str) -> None:
    try:
        path.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise SimrunError(f"cannot write the report {path}: {exc.strerror or exc}") from None
