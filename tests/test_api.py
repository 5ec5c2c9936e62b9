"""The Python API the command line stands on: `simrun.run()` gives what `simrun` gives (the same
exit code and verdict, on the demo clean and with faults), `simrun.gate()` what `simrun gate`
gives, bad input is refused before anything is spent naming the parameter (never a flag), a
runtime is given as a Python object too, the library writes nothing it was not asked for, and a
run made from Python keeps its release criteria, so that a later `simrun report` judges it the
same way."""

from __future__ import annotations

import asyncio
import json
import re
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

import simrun
from simrun.cli import app
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.store._rows import Finished

FAULTS = '[runtime.options]\nfaults = "dead_end=0.3,phantom_receipt=0.2"\nfault_seed = 7'


def with_faults(project: Path) -> None:
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace("[runtime.options]", FAULTS, 1))


def verdict_lines(output: str) -> list[str]:
    """The verdict's lines as the command line printed them, up to the spend line after them."""
    lines = output[output.index("verdict: "):].splitlines()
    return lines[:next(i for i, line in enumerate(lines) if line.startswith("spent "))]


def masked(lines: list[str]) -> list[str]:
    return [re.sub(r"\br[0-9]{8}-[0-9]{6}-[0-9a-f]+\b", "RUN", line) for line in lines]


@pytest.mark.parametrize("faulty, code", [(False, 0), (True, 1)], ids=["clean", "faults"])
def test_the_api_and_the_command_line_give_the_same_exit_code_and_verdict(project, cli, faulty, code):
    if faulty:
        with_faults(project)
    outcome = simrun.run(project / "simrun.toml", repetitions=1, seed=5, db=str(project / "api.duckdb"))
    printed = cli("-n", "1", "--seed", "5", "--db", "cli.duckdb")
    assert outcome.exit_code == printed.exit_code == code, printed.output
    assert masked(outcome.verdict.text().splitlines()) == masked(verdict_lines(printed.output))
    assert outcome.run_id in outcome.report.name and outcome.report.is_file()
    assert outcome.db == project / "api.duckdb" and outcome.conversations == outcome.planned == 70
    if faulty:
        assert any("guarantees broken: phantom_receipt" in line for line in outcome.verdict.text().splitlines())


def test_a_failing_assert_on_an_outcome_reads_as_the_verdict(project):
    with_faults(project)
    outcome = simrun.run(project / "simrun.toml", repetitions=1, db=str(project / "api.duckdb"))
    with pytest.raises(AssertionError) as failed:
        assert outcome.passed, outcome.verdict
    # pytest shows a message that is not a string by its repr, cut to 240 characters: the verdict's
    # repr is its status and reasons, first; its str is every line the command line prints.
    said = str(failed.value)
    assert said.startswith(f"<RunVerdict {outcome.run_id} FAILED (exit 1): guarantees broken: phantom_receipt"), said
    assert str(outcome.verdict).splitlines()[:2] == ["verdict: FAILED (exit 1)",
                                                     next(r for r in outcome.verdict.text().splitlines()
                                                          if r.startswith("FAILED: guarantees broken"))]


def test_bad_input_is_refused_before_anything_is_spent_naming_the_parameter_and_no_flag(project):
    with pytest.raises(simrun.ConfigError) as refused:
        simrun.run(project / "simrun.toml", repetitions=0, db=str(project / "api.duckdb"))
    assert str(refused.value) == "repetitions: must be at least 1, got 0"
    with pytest.raises(TypeError, match="unexpected keyword argument 'repetition'"):
        simrun.run(project / "simrun.toml", repetition=1)  # type: ignore[call-arg]
    refusals = {
        "replay_only: replay_only=True needs replay": dict(replay_only=True),
        "shard: there is no shard 4 of 4": dict(shard=(4, 4)),
        "budget: -1: a budget cannot be negative": dict(budget=-1),
        "budget: '5eur': only US dollars": dict(budget="5eur"),
        "ray_workers: is for the Ray executor; add executor='ray'": dict(ray_workers=2),
        "labels: a label cannot be empty": dict(labels=[""]),
        "runtime_settings.transport: ": dict(runtime_settings={"transport": "carrier-pigeon"}),
    }
    for said, arguments in refusals.items():
        with pytest.raises(simrun.ConfigError) as refused:
            simrun.prepare(project / "simrun.toml", **arguments)
        assert str(refused.value).startswith(said) and "--" not in str(refused.value), str(refused.value)
    with pytest.raises(simrun.ConfigError, match="^baseline: give one of baseline and baseline_ref, not both$"):
        simrun.gate("latest", "baselines/main.json", baseline_ref="origin/main:baselines/main.json")
    with pytest.raises(simrun.ConfigError, match="^verdict_json: the folder .* does not exist"):
        simrun.run(project / "simrun.toml", repetitions=1, db=str(project / "api.duckdb"),
                   verdict_json=project / "no-such-folder" / "verdict.json")
    assert not (project / "api.duckdb").exists()


def test_the_command_line_spells_each_parameter_as_its_flag(cli):
    """The same refusals, from the command line: the parameter is shown as the flag that gives it."""
    assert cli("-n", "0").stderr.strip() == "error: --repetitions: must be at least 1, got 0"
    assert cli("--replay-only").stderr.strip() == "error: --replay-only: --replay-only needs --replay"
    assert cli("--shard", "4/4").stderr.strip().startswith("error: --shard: there is no shard 4 of 4")
    assert cli("--ray-workers", "2").stderr.strip() == ("error: --ray-workers: is for the Ray executor; add "
                                                        "--executor ray")
    both = cli("gate", "--candidate", "latest", "--baseline", "x.json", "--baseline-ref", "main:x.json")
    assert both.stderr.strip() == "error: --baseline: give one of --baseline and --baseline-ref, not both"


class Heard(simrun.RunEvents):
    def __init__(self) -> None:
        self.said: list[str] = []
        self.finished: list[Finished] = []

    def started(self, start: simrun.RunStart) -> None:
        self.said.append(f"started {start.conversations}")

    def conversation(self, finished: Finished) -> None:
        self.finished.append(finished)

    def judged(self, store, verdict: simrun.RunVerdict) -> None:
        self.said.append(f"judged {verdict.status} {store.run(verdict.run_id)['status']}")

    def ended(self) -> None:
        self.said.append("ended")


def test_run_async_tells_its_events_every_conversation_in_order(project):
    heard = Heard()
    outcome = asyncio.run(simrun.run_async(project / "simrun.toml", repetitions=1, events=heard,
                                           db=str(project / "api.duckdb")))
    assert heard.said == ["started 70", "judged passed finished", "ended"]
    assert len(heard.finished) == outcome.conversations == 70


def test_a_run_made_from_python_keeps_its_release_criteria_for_a_later_report(project, cli):
    with_faults(project)
    budgets = project / "budgets.toml"
    default = budgets.read_text()
    budgets.write_text(default + "\n[release.max_rate]\ndead_end = 0.01\n")
    outcome = simrun.run(project / "simrun.toml", repetitions=1)
    assert outcome.exit_code == 1
    ceiling = [line for line in outcome.verdict.text().splitlines() if "release.max_rate.dead_end" in line]
    assert ceiling and ceiling[0].startswith("FAILED: release.max_rate.dead_end: dead_end "), ceiling
    kept = duckdb.connect(str(outcome.db), read_only=True).execute(
        "SELECT config->>'$.release.max_rate.dead_end' FROM runs WHERE run_id = ?", [outcome.run_id]).fetchone()
    assert kept == ("0.01",)
    budgets.write_text(default)     # the report judges the run by the criteria it kept, not today's file
    again = cli("report", outcome.run_id)
    assert again.exit_code == 0 and ceiling[0].removeprefix("FAILED: ") in again.output, again.output


def test_the_gate_from_python_gives_what_simrun_gate_gives(project, cli):
    base = simrun.run(project / "simrun.toml", repetitions=2, seed=1)
    (project / "baselines").mkdir()
    assert cli("baseline", "bless", base.run_id, "--out", "baselines/main.json").exit_code == 0
    with_faults(project)
    candidate = simrun.run(project / "simrun.toml", repetitions=2, seed=2)
    judged = simrun.gate(candidate.run_id, "baselines/main.json", db=str(candidate.db),
                         budgets=project / "budgets.toml")
    printed = cli("gate", "--baseline", "baselines/main.json", "--candidate", candidate.run_id)
    assert judged.exit_code == printed.exit_code == 1, printed.output
    assert judged.gate.baseline.run_id == base.run_id and not judged.gate.passed
    assert masked(judged.verdict.text().splitlines()) == masked(printed.output[printed.output.index("verdict: "):]
                                                                .splitlines())


def test_the_package_exports_what_its_docs_teach():
    for name in simrun.__all__:
        assert getattr(simrun, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        simrun.nope  # noqa: B018


def test_with_no_project_a_run_is_refused_saying_where_it_looked_and_how_to_run_the_demo(tmp_path, monkeypatch):
    """A team's test started from the wrong folder is never green on the bundled demo: with no
    project, `simrun.run()` raises, unless the demo is asked for (`demo_if_no_project`, which the
    command line asks for, and says so first), and options for its runtime (faults) then reach it."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(simrun.ConfigError) as refused:
        simrun.run(repetitions=1)
    said = str(refused.value)
    assert said.startswith(f"no project in {tmp_path}: no simrun.toml, and no personas/ or goals/ folder")
    assert "give config" in said and "simrun.demo()" in said and "--" not in said
    assert not any(tmp_path.iterdir())
    faulty = simrun.run(repetitions=1, demo_if_no_project=True,
                        runtime_settings={"options": {"faults": "phantom_receipt=0.5", "fault_seed": 7}})
    assert faulty.exit_code == 1 and faulty.verdict.reasons[0].kind == simrun.Kind.GUARANTEES_BROKEN
    with pytest.raises(simrun.ConfigError, match="runtime_settings.nonsense"):
        simrun.prepare(runtime_settings={"nonsense": 1}, demo_if_no_project=True)


def test_the_command_line_keeps_its_demo_where_there_is_no_project_and_says_so_first(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    printed = CliRunner().invoke(app, ["-n", "1"])
    assert printed.exit_code == 0, printed.output
    assert printed.output.splitlines()[0].startswith("no simrun.toml here, and no personas/ or goals/: running "
                                                     "the bundled demo")


class Desk:
    """A runtime class of a team's own test module, given as the object: TripDesk under its name."""

    def __new__(cls, **options: object) -> TripDesk:
        return TripDesk(**options)


def test_a_runtime_is_given_as_a_class_an_instance_a_function_or_an_import_string(project):
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace('target = "simrun.examples.tripdesk:TripDesk"',
                                             'target = "no_such_module:Nothing"'))
    by_class = simrun.run(project / "simrun.toml", budget=5.0, runtime=TripDesk, repetitions=1)
    assert by_class.passed and by_class.conversations == 70 and by_class.budget_usd == Decimal("5")
    stored = duckdb.connect(str(by_class.db), read_only=True).execute(
        "SELECT config->>'$.runtime.target', runtime FROM runs WHERE run_id = ?", [by_class.run_id]).fetchone()
    assert stored == ("simrun.examples.tripdesk.runtime:TripDesk", "python:simrun.examples.tripdesk.runtime.TripDesk")
    by_string = simrun.run(project / "simrun.toml", runtime="simrun.examples.tripdesk:TripDesk", repetitions=1)
    assert masked(by_string.verdict.text().splitlines()) == masked(by_class.verdict.text().splitlines())
    instance = TripDesk(faults={"phantom_receipt": 0.5}, fault_seed=7)
    by_instance = simrun.prepare(project / "simrun.toml", runtime=instance, repetitions=1, budget=Decimal("0.5"))
    assert by_instance.plan.runtime_object is instance and by_instance.plan.budget == Decimal("0.5")
    assert by_instance.run().exit_code == 1
    own = simrun.prepare(project / "simrun.toml", runtime=Desk)
    assert own.plan.runtime.target == f"{__name__}:Desk"

    def reply(messages: list[dict[str, str]], session: dict[str, object]) -> str:
        return "I can help with trips."

    by_function = simrun.prepare(project / "simrun.toml", runtime=reply, repetitions=1)
    assert (by_function.plan.runtime.transport, by_function.plan.runtime_object) == ("callable", reply)
    assert by_function.run().conversations == 70
    with pytest.raises(simrun.ConfigError, match="^runtime: a int is not a runtime"):
        simrun.prepare(project / "simrun.toml", runtime=7)
    with pytest.raises(simrun.ConfigError, match="^runtime: a runtime given as an object runs in this process only"):
        simrun.prepare(project / "simrun.toml", runtime=TripDesk, executor="ray")
    with pytest.raises(simrun.RuntimeUnavailable, match="cannot import no_such_module"):
        simrun.prepare(project / "simrun.toml", runtime="no_such_module:Nothing")


def test_the_library_leaves_the_step_summary_alone_and_the_command_line_writes_it(project, cli, monkeypatch):
    summary = project / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    ran = simrun.run(project / "simrun.toml", repetitions=1)
    judged = simrun.gate(ran.run_id, ran.run_id)
    assert judged.passed and not summary.exists()
    printed = cli("-n", "1")
    written = summary.read_text()
    assert printed.exit_code == 0 and written.startswith("## ✅ simrun PASSED: run `r")
    gated = cli("gate", "--baseline", ran.run_id, "--candidate", ran.run_id)
    assert gated.exit_code == 0 and summary.read_text() == written + simrun.verdict_markdown(judged.verdict) + "\n"
    assert simrun.write_step_summary(judged.verdict) == summary


def test_one_label_is_one_label_and_a_sync_run_in_a_running_loop_says_what_to_do(project):
    assert simrun.prepare(project / "simrun.toml", labels="release-1").plan.labels == ("release-1",)

    async def inside() -> None:
        simrun.run(project / "simrun.toml", repetitions=1)

    with pytest.raises(simrun.SimrunError, match="await simrun.run_async"):
        asyncio.run(inside())


def test_the_demo_and_the_gate_from_python_write_what_the_commands_write(project, cli, monkeypatch):
    monkeypatch.chdir(project)
    shown = simrun.demo(repetitions=1)
    assert shown.exit_code == 1 and shown.db.name == "simrun-demo.duckdb"
    base = simrun.run(project / "simrun.toml", repetitions=1)
    judged = simrun.gate(base.run_id, base.run_id, db="simrun.duckdb", verdict_json=project / "gate.json")
    printed = cli("gate", "--baseline", base.run_id, "--candidate", base.run_id, "--verdict-json", "gate-cli.json")
    assert judged.exit_code == printed.exit_code == 0, printed.output
    assert (project / "gate.json").read_text() == (project / "gate-cli.json").read_text()
    assert json.loads((project / "gate.json").read_text())["status"] == "passed"


def test_dir_and_help_list_the_api_before_first_use():
    import subprocess
    import sys

    listed = subprocess.run([sys.executable, "-c", "import simrun; print(' '.join(dir(simrun)))"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert set(simrun.__all__) <= set(listed)
