"""The tutorial's examples run (docs/tutorial.md): its files are written and its commands run, in
order, in an empty folder, and each command exits as the page says (`# exits 1` after a command,
else 0). The page's assistant is the runtime: a class of the reader's own, over the python
transport."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from simrun.cli._main import app
from tests.conftest import ROOT

PAGE = (ROOT / "docs" / "tutorial.md").read_text()
# Lines of the page's shell blocks that are not run here: installing simrun (this is simrun).
NOT_RUN = ("pip install",)


def steps(page: str) -> list[tuple[str, str, str]]:
    """(kind, title, text) of every fenced block, in order."""
    return [(m.group(1), m.group(2) or "", m.group(3))
            for m in re.finditer(r'^```(\w*)(?: title="([^"]+)")?\n(.*?)^```$', page, re.M | re.S)]


def test_the_tutorial_runs_from_an_empty_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    ran, seen = [], []
    for kind, title, text in steps(PAGE):
        if kind == "python" and title:
            (tmp_path / title).write_text(text)
        elif kind == "diff":
            target = tmp_path / "desk.py"
            old = [line[1:] for line in text.splitlines() if line.startswith("-")]
            new = [line[1:] for line in text.splitlines() if line.startswith("+")]
            source = target.read_text()
            for before, after in zip(old, new, strict=True):
                assert source.count(before) == 1, before      # the change names one line of the file
                source = source.replace(before, after)
            target.write_text(source)
        elif kind == "sh":
            for line in filter(None, (raw.strip() for raw in text.splitlines())):
                command, _, comment = line.partition("  #")
                words = command.split()
                if command.startswith(NOT_RUN):
                    continue
                if words[:2] == ["mkdir", "-p"]:
                    (tmp_path / words[2]).mkdir(parents=True, exist_ok=True)
                    continue
                assert words[0] == "simrun", f"the tutorial runs {command!r}, which this test cannot"
                result = CliRunner().invoke(app, words[1:])
                expected = int(m.group(1)) if (m := re.search(r"exits (\d)", comment)) else 0
                assert result.exit_code == expected, (command, result.output)
                ran.append(command.strip())
                seen.append(result.output)
    assert ran[0].startswith("simrun init") and any(c.startswith("simrun gate") for c in ran)
    # What the page says the reader sees.
    assert "notes-desk 1.0 offers clear_notes" in seen[0] and "protocol 1 kept" in seen[0]
    assert (tmp_path / "goals" / "clear-notes.yaml").is_file()
    assert "dead_end rose in goal clear-notes: 0/6 → 6/6" in seen[-1]
