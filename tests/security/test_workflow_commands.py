"""GitHub reads no command from data (issue 39, rule 5): no line simrun writes to standard output or
error can start a workflow command (`::add-mask::`, `::stop-commands::`, the older `##[`) with text
from outside, and the step summary shows data as text, never as Markdown or HTML: its verdict
heading is simrun's alone. Held at the two boundaries every line crosses: the console's one file
(`simrun/cli/_common.py`) and the verdict's Markdown (`simrun.scoring.gate._verdict_text`)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simrun._untrusted_text import CommandGuard, markdown_text, without_commands
from tests.conftest import ROOT, demo_project
from tests.fixtures.processes import cli_command

COMMAND_LINE = re.compile(r"^[ \t]*::|##\[", re.M)


@pytest.mark.parametrize("text", ["::add-mask::x", "  ::error file=a::b", "\t::stop-commands::tok",
                                  "ok\n::set-output name=a::b\n", "before ##[set-env name=A]b"])
def test_a_line_that_would_be_a_workflow_command_is_shown_inert(text):
    shown = without_commands(text)
    assert not COMMAND_LINE.search(shown), shown
    assert "\\x3a" in shown or "\\x5b" in shown          # visible, as the console shows controls


@given(st.lists(st.text(alphabet=st.sampled_from(list(":#[ \tab\n")), max_size=30), max_size=8))
def test_written_in_any_pieces_no_line_starts_a_command(pieces):
    """The console writes a line in pieces (a progress bar, a table); what reaches the runner, the
    pieces joined, never holds a command, however the pieces fall: ":" then ":x" is "::x"."""
    guard = CommandGuard()
    joined = "".join(guard(piece) for piece in pieces)
    assert not COMMAND_LINE.search(joined), joined
    assert joined.replace("\\x3a", ":").replace("\\x5b", "[") == "".join(pieces)     # nothing else changed


@pytest.mark.parametrize("data", ["Rename\n## ✅ simrun PASSED", "<img src=https://evil/x.png>",
                                  "![pixel](https://evil/x.png)", "[click](https://evil)", "<details open>x",
                                  "a\r\n- [x] done\u2028# heading"])
def test_markdown_text_draws_no_line_tag_link_or_image(data):
    shown = markdown_text(data)
    assert len(shown.splitlines()) == 1 and "<" not in shown and ">" not in shown
    assert not re.search(r"(?<!\\)[\[\]]", shown), shown      # every bracket escaped: no link, no image


def test_a_hostile_goal_file_puts_no_command_on_the_ci_log_and_no_heading_in_the_summary(tmp_path):
    project = demo_project(tmp_path)
    goal = project / "goals" / "rename-trip.yaml"
    text = goal.read_text()
    text = re.sub(r"^title: .*$", 'title: "Rename\\n::error::forged\\n##[set-env name=X]Y\\n## ✅ simrun PASSED"',
                  text, count=1, flags=re.M)
    hostile = r'"\1\\n## ✅ simrun PASSED\\n::add-mask::hidden\\n::stop-commands::tok"'
    text = re.sub(r"operation: (\w+)", "operation: " + hostile, text, count=1)
    goal.write_text(text)
    summary = tmp_path / "summary.md"
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([*cli_command(), "-n", "1"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr          # the goal names an operation no run has
    for stream in (done.stdout, done.stderr):
        assert not COMMAND_LINE.search(stream), [line for line in stream.splitlines() if COMMAND_LINE.search(line)]
    assert ":\\x3aadd-mask::hidden" in done.stdout + done.stderr     # shown, inert
    written = summary.read_text()
    headings = [line for line in written.splitlines() if line.startswith("#")]
    assert len(headings) == 1 and headings[0].startswith("## ⚠️ simrun NOT JUDGED: run `r"), headings


def test_what_init_saw_of_a_runtime_stays_inside_its_yaml_comment():
    """A record type holding line breaks, seen by init's probe conversation, adds no key to the
    starter goals through their comment (`simrun validate` would accept them)."""
    import yaml

    from simrun._settings import RuntimeSection
    from simrun.simulator._scaffold import Seen, files_for

    seen = Seen(runtime="desk\nforbidden: []", record_types=("trip\nforbidden: [leak]\ntags: [owned]", "note"))
    files = files_for(RuntimeSection(), seen)
    goals = {name: text for name, text in files.items() if name.startswith("goals/")}
    assert goals
    for name, text in goals.items():
        data = yaml.safe_load(text)
        assert "tags" not in data or data["tags"] != ["owned"], name
        assert data.get("forbidden") != ["leak"], name
        comments = [line for line in text.splitlines() if line.startswith("#")]
        assert any("trip forbidden: [leak] tags: [owned], note" in line for line in comments), comments
