"""One door for outside text (issue 39, rule 1): a text from outside simrun (a reply, a span's name,
status and attributes, a model's answer, a file's value, an exception) is clipped only through
`simrun.scoring.secrets.cut` (and its `tail`), which cuts every secret out of the whole text first.
A clip taken any other way keeps the part of a secret that straddles it, and a part no longer
matches the secret it came from: the same flaw, on a new path, three rounds in a row.

The rule is held by a check over simrun's code: a slice that keeps the start of a text (`x[:n]`,
of `str(...)`, an f-string, a decoded or stripped text, or a name that says it is text) fails it,
unless listed below with the reason it is no clip of outside text. And the paths the last round
found are tested end to end."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from simrun import _secrets as secrets
from tests.conftest import ROOT
from tests.fixtures.sources import product_sources
from tests.security.test_redact_then_cut import SECRET, leaks, registered  # noqa: F401 (a fixture)

# Names that say a value is text.
TEXTY = re.compile(r"(text|name|message|reply|reason|said|body|stderr|line|description|title|value|detail|error|"
                   r"seen|words|answer|label|excerpt|msg|content|output|sql|query|why|note|traceback)$", re.I)
TEXT_METHODS = {"decode", "strip", "rstrip", "lstrip", "replace", "join", "lower", "format", "getvalue", "read_text",
                "splitlines", "split", "rsplit", "partition"}
# Slices that are no clip of outside text, each with why.
ALLOWED = {
    ("simrun/_secrets.py", "text[:limit]"): "the door itself: the text has no secret to cut",
    ("simrun/_secrets.py", "''.join(parts)[:limit]"): "the door itself: every secret cut out already",
    ("simrun/scoring/pages/_render.py", "text[:limit]"): "the pages' clip: redacts the whole text first, then counts "
                                                  "what it leaves out",
    ("simrun/scoring/gate/_competence.py", "str(self.checked_at)[:16]"): "a timestamp simrun wrote",
    ("simrun/simulator/_plan.py", "str(check['checked_at'])[:16]"): "a timestamp simrun wrote",
    ("simrun/simulator/adapters/_base.py", "text[:40]"): "a JSON number's own text: digits, sign and exponent",
    ("simrun/simulator/adapters/_process.py", "line[:keep]"): "a bound on memory that keeps the longest secret past "
                                                       "the cut, which secrets.cut then takes",
}


def _texty(node: ast.expr) -> bool:
    if isinstance(node, ast.Call):
        f = node.func
        return (isinstance(f, ast.Name) and f.id in ("str", "repr", "format")) or (
            isinstance(f, ast.Attribute) and f.attr in TEXT_METHODS)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
        return _texty(node.value)                       # text.splitlines()[0]
    ident = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return bool(ident and TEXTY.search(ident))


def _short(upper: ast.expr) -> bool:
    """A bound that keeps too little to be any part of a secret (a first letter), or that drops a
    suffix (a negative bound)."""
    if isinstance(upper, ast.UnaryOp) and isinstance(upper.op, ast.USub):
        return True
    return isinstance(upper, ast.Constant) and isinstance(upper.value, int) and upper.value < secrets.MIN_CHARS


def clips_around_the_door(source: str, where: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)):
            continue
        s = node.slice
        if s.lower is not None or s.upper is None or s.step is not None or _short(s.upper):
            continue
        if _texty(node.value) and (where, ast.unparse(node)) not in ALLOWED:
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def _sources() -> list[Path]:
    return product_sources()


def test_no_module_clips_a_text_but_through_the_door():
    sources = _sources()
    assert len(sources) > 100
    found = [hit for path in sources
             for hit in clips_around_the_door(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]
    assert found == [], "clip through simrun.scoring.secrets.cut (redact, then cut):\n" + "\n".join(found)


def test_every_allowed_slice_is_still_there():
    """An entry whose slice is gone is a hole waiting for another one: the list stays exact."""
    present = {(str(p.relative_to(ROOT)), ast.unparse(n)) for p in _sources()
               for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
               if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice)}
    assert set(ALLOWED) <= present, set(ALLOWED) - present


@pytest.mark.parametrize("code", ["name[:100]", "str(x)[:600]", "f'{a}: {b}'[:300]", "raw.decode()[:50]",
                                  "span.status.message[:2000]", "text.splitlines()[0][:300]", "reason[:limit]"])
def test_the_check_sees_each_shape_of_a_clip(code):
    assert clips_around_the_door(f"{code}\n", "planted.py")


@pytest.mark.parametrize("code", ["items[:20]", "calls[:5]", "label[:1]", "name[:-5]", "secrets.cut(name, 100)"])
def test_the_check_lets_lists_letters_and_the_door_be(code):
    assert clips_around_the_door(f"{code}\n", "planted.py") == []


def test_a_secret_echoed_in_a_tool_span_is_cut_out_whole_wherever_it_straddles_the_clip(registered):  # noqa: F811
    """The last round's probe: a registered secret in a tool span's status message, its
    error.type and its tool name, placed across the 2,000-character clip."""
    from simrun.simulator.adapters._spans import MAX_TEXT, STATUS_ERROR, Span, Tool, TraceBook

    for back in (1, 10, 20, len(SECRET) - 1):
        hostile = "x" * (MAX_TEXT - back) + SECRET + " tail"
        name = "move_" + hostile
        book = TraceBook({name: Tool(record="rx_id")})
        trace = book.begin("s-1", 1).split("-")[1]
        book.add(Span(trace, "0" * 15 + "1", "", f"execute_tool {name}",
                      {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "error.type": hostile,
                       "gen_ai.tool.call.id": "c-1", "gen_ai.tool.call.arguments": json.dumps({"rx_id": "RX-1"})},
                      status_code=STATUS_ERROR, status_message=hostile, start_ns=1))
        events = book.events("s-1")
        assert events, back
        assert not leaks(json.dumps(events)), (back, events[0]["reason"][-60:], events[0]["operation"][-60:])


def test_a_tool_call_name_in_a_chat_answer_is_cut_out_whole(registered):  # noqa: F811
    """A chat answer whose tool-call name echoes the secret 80 characters in: the name is clipped
    at 100 after the secret is cut out, not before."""
    from simrun.simulator.adapters._template import _tool_calls

    for back in range(1, len(SECRET)):
        answer = {"choices": [{"message": {"tool_calls": [{"function": {"name": "y" * (100 - back) + SECRET}}]}}]}
        assert not leaks(_tool_calls(answer)), back
