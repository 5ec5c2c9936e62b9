"""A goal's fact templates: `{trip}` or `{date:%d %B}` in its steps, filled with its facts.

A goal file may be hostile: a template is checked when the file is read (plain fact names
only, bounded format specs), and must fill with the goal's own values then, so that a run
never fails midway on a template.
"""

from __future__ import annotations

import datetime as dt
import re
import string
from typing import Any


def template_fields(template: Any) -> list[str]:
    if not isinstance(template, str):
        return []
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


_FACT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_SPEC_CHARS = 40
MAX_SPEC_NUMBER = 200


def check_template(template: str, where: str) -> None:
    """A template fills facts in plainly: `{trip}` or `{date:%d %B}`. Attribute and index access
    (`{trip.__class__}`) would read Python objects, and a width like `{trip:>1500000000}` would
    build a string of gigabytes: a goal file may be hostile, so both are refused."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"{where}: not a valid template ({exc}); write a literal brace as {{{{ or }}}}") from None
    for _, name, spec, _ in parsed:
        if name is None:
            continue
        if not _FACT_NAME.fullmatch(name):
            raise ValueError(f"{where}: '{{{name}}}' must name a fact plainly, like {{trip}}; attribute, index "
                             "and positional fields are not allowed")
        if spec and ("{" in spec or len(spec) > MAX_SPEC_CHARS):
            raise ValueError(f"{where}: the format spec {spec[:MAX_SPEC_CHARS]!r} is nested or longer than "
                             f"{MAX_SPEC_CHARS} characters")
        widths = [int(n) for n in re.findall(r"\d+", spec or "")]
        if widths and max(widths) > MAX_SPEC_NUMBER:
            raise ValueError(f"{where}: the format spec {spec!r} asks for {max(widths)} characters; at most "
                             f"{MAX_SPEC_NUMBER}")


def check_fields(template: Any, known: set[str], where: str) -> None:
    if isinstance(template, str):
        check_template(template, where)
    for name in template_fields(template):
        if name.split(".")[0].split("[")[0] not in known:
            raise ValueError(f"{where}: '{{{name}}}' names a fact the goal does not define; "
                             f"known: {', '.join(sorted(known)) or 'none'}")


def check_fills(template: str, values: dict[str, Any], where: str) -> None:
    """A template must fill with the goal's own values, or the run would fail midway."""
    try:
        template.format(**values)
    except (ValueError, KeyError, IndexError, AttributeError, TypeError) as exc:
        hint = ""
        for _, name, spec, _ in string.Formatter().parse(template):
            if name and spec and "%" in spec and not isinstance(values.get(name), (dt.date, dt.datetime)):
                hint = (f"; '{name}' is text, not a date: write dates unquoted in YAML "
                        f"(2027-02-20, not '2027-02-20')")
        raise ValueError(f"{where}: cannot fill {template!r}: {exc}{hint}") from None


def resolve(value: Any, names: dict[str, Any]) -> Any:
    """'{fact}' alone keeps the fact's type (a date stays a date); other templates format."""
    if not isinstance(value, str):
        return value
    fields = list(string.Formatter().parse(value))
    if len(fields) == 1 and fields[0][0] == "" and fields[0][1] and not fields[0][2]:
        return names[fields[0][1]]
    return value.format(**names) if any(f[1] for f in fields) else value
