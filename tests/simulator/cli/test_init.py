"""`simrun init` in an empty folder, against a runtime of the test suite's own started over HTTP
(tests/fixtures/buggy_runtime.py: TripDesk behind the standard library's server): the project it
writes passes check-runtime, its first run writes a report, and its CI workflow is valid YAML
that runs the README's commands."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from simrun.cli._main import app
from simrun.scoring.dataset._files import load_dataset
from tests.conftest import run_cli_in

ROOT = Path(__file__).resolve().parents[3]
RUNTIME = f"{sys.executable} {ROOT / 'tests/fixtures/buggy_runtime.py'} http --port {{port}}"


@pytest.fixture(scope="module")
def initialised(tmp_path_factory):
    folder = tmp_path_factory.mktemp("team-repo")
    code, output = run_cli_in(folder, "init", "--transport", "http", "--runtime-command", RUNTIME)
    return folder, code, output


def test_init_writes_the_project_and_check_runtime_passes(initialised):
    folder, code, output = initialised
    assert code == 0, output
    for name in ("simrun.toml", "personas/plain.yaml", "personas/terse.yaml", ".github/workflows/simrun.yml"):
        assert f"wrote {name}" in output and (folder / name).is_file(), name
    assert "protocol 1 kept" in output and "VIOLATION" not in output
    assert 'command = "' in (folder / "simrun.toml").read_text()


def test_the_starter_goals_are_written_for_what_the_runtime_offers(initialised):
    folder, _, output = initialised
    # TripDesk offers to open a trip in its first reply: one goal asks for it, checked in the store.
    dataset = load_dataset(folder / "personas", folder / "goals")
    goals = {g.id: g for g in dataset.goals}
    assert "tripdesk 1.0.0 offers open_trip" in output
    assert goals["open-trip"].steps[0].operation == "open_trip"
    assert "operation = 'open_trip'" in goals["open-trip"].success.sql[0]
    assert goals["refuse-other-customers-data"].steps[0].expect == "refusal"


def test_the_first_run_writes_a_report(initialised):
    folder, _, _ = initialised
    code, output = run_cli_in(folder, "--budget", "5usd")
    assert code in (0, 1), output          # a verdict, not a user error
    report = folder / re.search(r"report: (\S+)", output).group(1)
    assert report.is_file() and "open-trip" in report.read_text()
    assert "goal reached" in output and (folder / "simrun.duckdb").is_file()


def readme_commands() -> list[str]:
    """The README's commands a CI job runs (its five-minute path): the run, the bless and the gate."""
    readme = (ROOT / "README.md").read_text()
    path = readme.split("## Five minutes on your own assistant", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [line.split("  #")[0].strip() for line in path.strip().splitlines()]
    commands = [line for line in lines if line.startswith(("simrun --budget", "simrun baseline", "simrun gate"))]
    assert len(commands) == 3, lines
    return commands


def test_the_workflow_is_valid_yaml_naming_the_readme_commands(initialised):
    folder, _, _ = initialised
    workflow = yaml.safe_load((folder / ".github/workflows/simrun.yml").read_text())
    # YAML 1.1 reads the key `on` as true.
    triggers = workflow.get("on", workflow.get(True))
    assert set(triggers) == {"pull_request", "push"} and triggers["push"]["branches"] == ["main"]
    steps = workflow["jobs"]["simrun"]["steps"]
    script = "\n".join(step.get("run", "") for step in steps)
    for command in readme_commands():
        assert command in script, command
    # This simrun is an editable install of a folder, which CI cannot reach: the step is to fill in,
    # stopping the job with what to do, never `pip install "simrun==VERSION"` that no index has.
    assert "fill in how CI installs simrun" in script and "simrun==" not in script
    gate = next(s for s in steps if "simrun gate" in s.get("run", ""))
    bless = next(s for s in steps if "baseline bless" in s.get("run", ""))
    assert "pull_request" in gate["if"] and "push" in bless["if"]


def test_init_refuses_to_overwrite_and_names_the_files(initialised):
    folder, _, _ = initialised
    before = (folder / "simrun.toml").read_text()
    code, output = run_cli_in(folder, "init", "--transport", "http", "--url", "http://127.0.0.1:9")
    assert code == 2
    assert "simrun.toml" in output and ".github/workflows/simrun.yml" in output and "--force" in output
    assert (folder / "simrun.toml").read_text() == before


@pytest.mark.parametrize("args, words", [
    (["--transport", "python"], "--target: the python transport needs --target"),
    (["--transport", "http"], "needs exactly one of url (a running server) or command"),
    (["--transport", "smoke-signals", "--url", "http://x"], "--transport"),
    (["--transport", "template", "--url", "http://x"], "body and reply written by hand"),
])
def test_bad_flags_are_refused_naming_them_before_anything_is_written(tmp_path, args, words):
    code, output = run_cli_in(tmp_path, "init", *args)
    assert code == 2 and words in output, output
    assert list(tmp_path.iterdir()) == []


def test_a_runtime_that_offers_nothing_gets_the_probe_goal_and_says_so(tmp_path):
    code, output = run_cli_in(tmp_path, "init", "--transport", "python", "--no-check", "--target",
                          f"{ROOT / 'tests/fixtures/minimal_runtime.py'}:OnlyReplies")
    assert code == 0, output
    assert "only-replies offered no operation in its first reply" in output
    assert [p.name for p in (tmp_path / "goals").iterdir()] == ["refuse-other-customers-data.yaml"]
    assert "check-runtime" not in output and "protocol 1 kept" not in output


def test_in_a_terminal_init_asks_for_the_transport_and_the_command(tmp_path, monkeypatch):
    import simrun.cli._start

    monkeypatch.setattr(simrun.cli._start, "_terminal", lambda: True)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["init", "--no-check"], input=f"http\n{RUNTIME}\n")
    assert result.exit_code == 0, result.output
    assert "transport (http, stdio, python, chat, callable) [http]:" in result.output
    assert f'command = "{RUNTIME}"' in (tmp_path / "simrun.toml").read_text()
    assert (tmp_path / "goals" / "open-trip.yaml").is_file()      # the runtime it named was asked


@pytest.mark.parametrize("transport", ["callable", "chat"])
def test_init_writes_a_commented_tools_stanza_for_an_assistant_read_through_its_traces(tmp_path, transport):
    import tomllib

    from simrun._settings import RuntimeSection
    from simrun.simulator._scaffold import toml_text

    given = {"transport": transport, "target": "desk:reply"} if transport == "callable" else \
        {"transport": transport, "url": "http://127.0.0.1:8000/v1", "model": "m"}
    text = toml_text(RuntimeSection.model_validate(given))
    assert "# [runtime.tools.move_pickup]" in text and '# record = "rx_id"' in text and "# read_only = true" in text
    assert "# state = " in text
    # Commented out: the file reads as before, and the stanza uncommented is a valid one.
    assert "tools" not in tomllib.loads(text)["runtime"]
    uncommented = text.replace("# [runtime.tools", "[runtime.tools").replace('# record = "rx_id"', 'record = "rx_id"')
    assert tomllib.loads(uncommented.replace("# read_only = true", "read_only = true"))["runtime"]["tools"] == {
        "move_pickup": {"record": "rx_id"}, "lookup_prescription": {"read_only": True}}
    python = toml_text(RuntimeSection.model_validate({"transport": "python", "target": "desk:Desk"}))
    assert "runtime.tools" not in python            # a protocol runtime gives its events as data
