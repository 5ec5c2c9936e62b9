"""Reading input files that may be hostile (goals, personas, simrun.toml, budgets.toml): UTF-8
only and bounded in size; YAML also bounded in nesting and alias expansion, with plain scalars
typed as YAML 1.2 types them.

PyYAML's safe loader builds no arbitrary objects, but it keeps two traps:
- YAML 1.1's implicit types: `time: 10:30` is the integer 630 (base 60), `answer: no` is false,
  `zip: 0755` is 493 (octal). Here only true/false are booleans, integers are decimal (or 0x),
  and anything else (10:30, no, 0755) stays text. Unquoted dates stay dates: goals rely on them.
- aliases: a 'billion laughs' file is a few lines that expand to 10^9 nodes once something walks
  them (validation, the dataset hash). The expanded size is counted from the event stream, before
  anything is built, and refused past MAX_NODES; so is nesting past MAX_DEPTH, which would
  otherwise end in a RecursionError inside the composer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml

from simrun import _secrets

MAX_FILE_BYTES = 1_000_000
MAX_DEPTH = 64
MAX_NODES = 100_000          # scalars and collections, with every alias expanded


class InputRefused(ValueError):
    """The file cannot be read as bounded YAML; `line` is 1-based where known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


if TYPE_CHECKING:     # the type checker sees one base; libyaml's, when PyYAML has it, is as safe
    _SafeLoader = yaml.SafeLoader
else:
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Loader(_SafeLoader):
    """SafeLoader with YAML 1.2's booleans and numbers (the rest of its resolvers kept), on
    libyaml's parser where PyYAML has it: a goal file may be hostile, and a megabyte of YAML takes
    seconds to parse in pure Python, about a seventh of that in libyaml."""


_DROPPED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _DROPPED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                             list("tTfF"))
# Leading zeros stay text (an id, a zip code), and so does anything with a colon: no base 60.
Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+)$"),
                             list("-+0123456789"))
Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|(?:0|[1-9][0-9]*)\.[0-9]*(?:[eE][-+]?[0-9]+)?|(?:0|[1-9][0-9]*)[eE][-+]?[0-9]+)"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))


def read_text(path: Path, what: str = "file", limit: int = MAX_FILE_BYTES) -> str:
    """The file as text: refused if it is larger than MAX_FILE_BYTES or not UTF-8."""
    size = path.stat().st_size
    if size > limit:
        raise InputRefused(f"the {what} is {size:,} bytes; at most {limit:,} are read")
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputRefused(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save the "
                          f"{what} as UTF-8", line) from None


def _check_shape(text: str) -> None:
    """Count nesting and expanded size from the event stream (the parser does not recurse)."""
    sizes: dict[str | None, int] = {}           # anchor -> nodes it stands for
    open_: list[list[Any]] = []                 # per open collection: [anchor, nodes so far]
    total = 0
    for event in yaml.parse(text, Loader=Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_) >= MAX_DEPTH:
                raise InputRefused(f"nested more than {MAX_DEPTH} levels deep", _line(event.start_mark))
            open_.append([event.anchor, 1])
            total += 1
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, nodes = open_.pop()
            if anchor is not None:
                sizes[anchor] = nodes
        elif isinstance(event, yaml.ScalarEvent):
            nodes = 1
            total += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            nodes = sizes.get(event.anchor, 1)
            total += nodes
        else:
            continue
        if open_:
            open_[-1][1] += nodes
        if total > MAX_NODES:
            raise InputRefused(f"expands to more than {MAX_NODES:,} values (aliases counted each time they "
                              "are used)", _line(event.start_mark))


class _Mark(Protocol):
    """Where the parser was: PyYAML's mark, or libyaml's."""

    line: int       # 0-based


def _line(mark: _Mark | None) -> int | None:
    """The 1-based line of a parser mark (every event has one)."""
    return mark.line + 1 if mark is not None else None


def load_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    """(the document's data, its node tree for line numbers); InputRefused on anything wrong."""
    try:
        _check_shape(text)
        loader = Loader(text)
        try:
            node = loader.get_single_node()
            return (loader.construct_document(node) if node is not None else None), node
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        if "maximum nesting depth" in problem:      # libyaml's own bound, met before ours is counted
            raise InputRefused(f"nested more than {MAX_DEPTH} levels deep", mark.line + 1 if mark else None) from None
        raise InputRefused(f"not valid YAML: {problem}", mark.line + 1 if mark else None) from None
    except (ValueError, OverflowError) as exc:   # a date like 2027-02-30, a number too long to read
        if isinstance(exc, InputRefused):
            raise
        raise InputRefused(f"a value cannot be read: {exc}", _unreadable_line(text)) from None


def _unreadable_line(text: str) -> int | None:
    """The line of the first scalar whose typed value cannot be built (found again, one by one)."""
    loader = Loader(text)
    try:
        stack = [loader.get_single_node()]
        while stack:
            node = stack.pop()
            if isinstance(node, yaml.ScalarNode):
                try:
                    loader.construct_object(node, deep=True)
                except (ValueError, OverflowError, yaml.YAMLError):
                    return node.start_mark.line + 1
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(reversed(node.value))
            elif isinstance(node, yaml.MappingNode):
                stack.extend(n for pair in reversed(node.value) for n in reversed(pair))
        return None
    finally:
        loader.dispose()


def printable(value: Any, limit: int = 80) -> str:
    """Untrusted text, made safe for one line of output: printable, and cut."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    shown = _secrets.cut(text, limit)
    return shown if shown == text else shown + "…"
