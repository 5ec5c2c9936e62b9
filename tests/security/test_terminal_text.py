"""Text reaches a terminal only as text, and a runtime's identity is exact.

Whatever a runtime replied or a store holds, what a command prints carries no escape or control
sequence (clipboard, window title, clear screen), no bidi or zero-width control unescaped, and
no Rich markup read from data; the health answer's `protocol` is the integer 1 and nothing else,
and the name and version it gives are one bounded line of plain text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from simrun._errors import RuntimeUnavailable
from simrun.simulator.adapters._base import IDENTITY_CHARS, check_health
from tests.security.conftest import one_line_error

# Each is a way data can command a terminal, or hide or reorder what it shows.
ATTACKS = ["\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b]0;pwned title\x07", "\x1b[2J\x1b[H", "\x1b[8mhidden\x1b[0m",
           "\x9b31m", "\u202eevil\u202c", "\u2066iso\u2069", "zero\u200bwidth\u200d", "\ufeffbom", "\x00nul",
           "\x08\x08back", "line\u2028sep", "\x7fdel"]
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
MARKUP = ["[/]", "[bold red]x[/bold red]", "[link=file:///etc/passwd]y[/link]", "[/nope]", ":smiley: [redacted]"]


def _plant(db: Path, text: str) -> tuple[str, str]:
    """Put `text` where a runtime's reply and the store's values are kept; return (run, conv)."""
    con = duckdb.connect(str(db))
    run_id, cid = con.execute("SELECT run_id, conversation_id FROM conversations ORDER BY 2 LIMIT 1").fetchone()
    result = json.loads(con.execute("SELECT result FROM turns WHERE conversation_id = ? AND turn = 1",
                                    [cid]).fetchone()[0])
    result["reply"] = f"reply {text} end"
    con.execute("UPDATE turns SET result = ? WHERE conversation_id = ? AND turn = 1", [json.dumps(result), cid])
    con.execute("UPDATE conversations SET goal_detail = ?, goal_reached = false, session_id = ? "
                "WHERE conversation_id = ?", [f"store holds {text}", f"s{text}", cid])
    con.execute("INSERT INTO findings VALUES (?, ?, 1, 'stale_click', 'guarantee', ?, '{}')",
                [run_id, cid, f"detail {text}"])
    con.execute("UPDATE runs SET labels = ?, runtime_version = ?, git_branch = ?",
                [json.dumps([f"l{text}"]), f"v{text}", f"b{text}"])
    con.close()
    return run_id, cid


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """One demo run, made once; each test plants its text in a copy."""
    import os
    import shutil

    from typer.testing import CliRunner

    from simrun.cli._main import app
    from tests.conftest import ROOT

    folder = tmp_path_factory.mktemp("terminal")
    for name in ("personas", "goals"):
        shutil.copytree(ROOT / name, folder / name)
    for name in ("simrun.toml", "budgets.toml"):
        shutil.copy(ROOT / name, folder / name)
    here = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(app, ["--budget", "5usd", "-n", "1"])
    finally:
        os.chdir(here)
    assert result.exit_code == 0, result.output
    return folder / "simrun.duckdb"


@pytest.mark.parametrize("text", ATTACKS + MARKUP)
def test_every_command_prints_data_as_text(run_cli, project, stored, text):
    db = project / "planted.duckdb"
    db.write_bytes(stored.read_bytes())
    run_id, cid = _plant(db, text)
    for command in (["show", run_id, cid], ["show", run_id], ["show", run_id, "--class", "stale_click"],
                    ["runs"]):
        code, output = run_cli(*command, "--db", str(db))
        assert code == 0, (command, output)
        assert not FORBIDDEN.search(output), (command, repr(output[:3000]))
        if text in MARKUP and command[0] == "show":     # shown as it is, not read as markup
            assert text in output, (command, output[-2000:])
    code, output = run_cli("show", run_id, cid, "--db", str(db))
    assert "runtime: reply " in output and " end" in output      # the reply is shown, escaped, not dropped


@pytest.mark.parametrize("text", ATTACKS[:6])
def test_an_error_line_quoting_a_name_is_text_too(run_cli, project, text):
    code, output = run_cli("runs", "--db", f"missing{text}.duckdb")
    assert code == 2
    assert not FORBIDDEN.search(one_line_error(output))


@pytest.mark.parametrize("protocol", [True, 1.0, "1", [1], {"v": 1}, 2, 0, None, 10**30, -1])
def test_protocol_must_be_the_integer_one(protocol):
    with pytest.raises(RuntimeUnavailable) as raised:
        check_health({"protocol": protocol, "runtime": "x"}, "here")
    assert not FORBIDDEN.search(str(raised.value)) and len(str(raised.value)) < 400


@pytest.mark.parametrize("text", ATTACKS)
def test_the_runtime_s_name_and_version_are_one_bounded_line_of_text(text):
    health = check_health({"protocol": 1, "runtime": f"desk{text}" * 50, "version": f"1.{text}2\n3" * 50}, "here")
    for field in ("runtime", "version"):
        value = health[field]
        assert value and len(value) <= IDENTITY_CHARS and "\n" not in value
        assert not FORBIDDEN.search(value), repr(value)
    assert check_health({"protocol": 1}, "here") == {"protocol": 1, "runtime": None, "version": None}
    assert check_health({"protocol": 1, "runtime": ["x"], "version": True}, "here")["version"] is None
