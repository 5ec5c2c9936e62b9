"""A runtime's crash, told as it happened, with its own evidence, over every transport.

The runtime (tests/fixtures/buggy_runtime.py) has a KeyError in its turn handler for one goal.
Over HTTP the server closes the connection and stays up; over stdio the process exits; in
process the object raises. Each fault must name the exception, carry the traceback, and say
what happened to the runtime; a server that stayed up is asked for its store and audit.
`simrun show` and the report show that evidence, not only `simrun show --json`.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from simrun.scoring.dataset._files import load_dataset
from simrun.simulator.adapters._http import HttpRuntime
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.adapters._stdio import StdioRuntime
from simrun.simulator.adapters._template import ChatRuntime
from tests.conftest import ROOT
from tests.fixtures.buggy_runtime import Buggy
from tests.fixtures.processes import leftovers
from tests.simulator.adapters.test_transports import stored

BUGGY = str(ROOT / "tests" / "fixtures" / "buggy_runtime.py")

pytestmark = pytest.mark.usefixtures("tagged")


def buggy_dataset(tmp_path: Path):
    """One persona, a goal with the bug and the same goal without it."""
    personas, goals = tmp_path / "personas", tmp_path / "goals"
    personas.mkdir(parents=True)
    goals.mkdir()
    shutil.copy(ROOT / "personas" / "plain-paula.yaml", personas)
    text = (ROOT / "goals" / "single-add-bag.yaml").read_text()
    (goals / "bug.yaml").write_text(text.replace("id: single-add-bag", "id: add-bag-bug"))
    (goals / "fine.yaml").write_text(text.replace("id: single-add-bag", "id: add-bag-fine"))
    return personas, goals


@pytest.mark.parametrize("transport", ["http", "stdio", "python"])
def test_a_crash_names_its_exception_carries_its_traceback_and_says_what_happened(tmp_path, transport):
    dataset = load_dataset(*buggy_dataset(tmp_path))
    runtime = {"http": lambda: HttpRuntime(command=[sys.executable, BUGGY, "http", "--port", "{port}"]),
               "stdio": lambda: StdioRuntime([sys.executable, BUGGY, "stdio"]),
               "python": lambda: PythonRuntime(Buggy())}[transport]()
    _, _, ends, errors = stored(tmp_path / "c.duckdb", dataset, runtime)
    assert ends == {"plain-paula/add-bag-bug/0": "runtime_error", "plain-paula/add-bag-fine/0": "goal_reached"}
    error = json.loads(errors["plain-paula/add-bag-bug/0"])
    evidence = error.get("stderr") or error.get("traceback")
    assert "KeyError: 'trip'" in error["message"], error["message"]
    assert "Traceback" in evidence and 'return booking["trip"]' in evidence
    if transport == "http":
        # The server closed the connection but stayed up: not "no longer answers", and it was read.
        assert error["kind"] == "disconnected" and "still running" in error["message"]
        assert error["read_after"] == "the store, the audit stream"
    elif transport == "stdio":
        assert error["kind"] == "exited" and "exited (status 1) while answering" in error["message"]
        assert error["read_after"] == "nothing: the runtime no longer answers"
    assert not leftovers(BUGGY)


def test_a_chat_endpoint_that_fails_inside_a_request_and_stays_up_is_not_said_to_be_gone(tmp_path):
    personas, goals = buggy_dataset(tmp_path)
    (goals / "fine.yaml").unlink()
    runtime = ChatRuntime(url="http://127.0.0.1:{port}/v1", model="m",
                          command=[sys.executable, BUGGY, "chat", "--port", "{port}"])
    _, _, ends, errors = stored(tmp_path / "c.duckdb", load_dataset(personas, goals), runtime)
    assert ends == {"plain-paula/add-bag-bug/0": "runtime_error"}
    error = json.loads(errors["plain-paula/add-bag-bug/0"])
    assert error["kind"] == "disconnected" and "still running: the request failed inside it" in error["message"]
    assert "KeyError: 'trip'" in error["message"] and "Traceback" in error["stderr"]
    assert "no longer answers" not in error["read_after"]
    assert not leftovers(BUGGY)


def test_simrun_show_and_the_report_show_the_traceback(run_cli, project):
    personas, goals = buggy_dataset(project / "buggy")
    code, output = run_cli("-n", "1", "--personas", str(personas), "--goals", str(goals), "--transport", "http",
                          "--runtime-command", f"{sys.executable} {BUGGY} http --port {{port}}")
    assert code == 1 and "FAILED: release.fail_on_runtime_error" in output, output
    code, shown = run_cli("show", "latest", "plain-paula/add-bag-bug/0")
    assert code == 0
    error_line = next(line for line in shown.splitlines() if line.startswith("error: "))
    assert "closed the connection without answering, and is still running" in error_line
    assert "KeyError: 'trip'" in error_line and "no longer answers" not in shown
    assert "its stderr (last lines):" in shown and "Traceback (most recent call last)" in shown
    assert 'return booking["trip"]' in shown and "request POST /v1/sessions/" in shown
    html = (project / re.search(r"report: (\S+)", output).group(1)).read_text()
    section = html.split('id="conv-plain-paula-add-bag-bug-0"')[1].split("</section>")[0]
    assert "Traceback (most recent call last)" in section and "KeyError: &#39;trip&#39;" in section
    assert "read after it: the store, the audit stream" in section
    assert not leftovers(BUGGY)
