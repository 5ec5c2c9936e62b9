"""Promise what holds (issue 39, rule 6): a sync callable stuck in a regular expression that
holds the GIL.

In a thread of simrun's process (the default) nothing can stop it: the GIL is held, so the
turn's timeout fires only when the expression returns and everything else in simrun waits as
long; the docs say so (docs/any-assistant.md), and the first test measures it. With
`runtime.isolation = "process"` the function runs in a worker process, killed at the timeout:
the conversation ends as runtime_error at its timeout, and simrun's process exits within the
timeout and the grace period, while the expression would run for hours.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from tests.conftest import ROOT
from tests.fixtures.processes import cli_command

ASSISTANT = '''
import re, time

def answer(messages, session):
    # Backtracks 2**n times, holding the GIL all along (re never lets it go).
    started = time.monotonic()
    re.match(r"(a+)+$", "a" * N + "b")
    with open(__file__ + ".took", "w") as took:
        took.write(str(time.monotonic() - started))
    return "done"
'''

SCRIPT = textwrap.dedent('''
    import asyncio, sys, time
    from simrun._errors import RuntimeFault
    from simrun.simulator.adapters import CallableRuntime

    async def main():
        runtime = CallableRuntime("stuck.py:answer", timeout_s=TIMEOUT, isolation=sys.argv[1], folder=sys.argv[2])
        await runtime.health()
        session = await runtime.start({})
        started = time.monotonic()
        try:
            await runtime.turn(session, {"message": "hello"})
            print("answered", round(time.monotonic() - started, 2), flush=True)
        except RuntimeFault as fault:
            print(fault.kind, round(time.monotonic() - started, 2), flush=True)
        closing = time.monotonic()
        await runtime.aclose()
        print("closed", round(time.monotonic() - closing, 2), flush=True)

    asyncio.run(main())
    time.sleep(0.5)      # a thread that is still running writes how long its expression took
''')


def run(tmp_path, isolation: str, n: int, timeout_s: float, limit_s: float):
    (tmp_path / "stuck.py").write_text(ASSISTANT.replace("N", str(n)))
    script = tmp_path / "drive.py"
    script.write_text(SCRIPT.replace("TIMEOUT", str(timeout_s)))
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script), isolation, str(tmp_path)], capture_output=True, text=True,
                          timeout=limit_s, cwd=ROOT)
    return done, time.monotonic() - started


def test_in_a_thread_a_gil_holding_function_holds_the_timeout_until_it_returns(tmp_path):
    # What the docs say a stuck sync function costs without isolation: a 0.3 s timeout cannot fire
    # while the expression (about a second) holds the GIL; the turn ends only once it has returned,
    # as a timeout or with its answer (which of the two the loop sees first, once the GIL is free,
    # is its own affair), however long the expression takes.
    done, _ = run(tmp_path, "thread", 23, 0.3, 120)
    kind, waited = done.stdout.split()[:2]
    regex_s = float((tmp_path / "stuck.py.took").read_text())
    assert kind in ("timeout", "answered"), done.stdout + done.stderr
    assert regex_s > 0.3 and float(waited) + 0.01 >= regex_s, (
        f"the turn ended after {waited}s ({kind}), the expression took {regex_s:.2f}s")


def test_in_a_worker_process_the_turn_ends_at_its_timeout_and_the_process_exits_within_timeout_and_grace(tmp_path):
    from simrun.simulator.adapters._callable_worker import GRACE_S

    # 2**60 steps: it would run for centuries. Startup (spawning the worker, importing) is not the turn's.
    done, took = run(tmp_path, "process", 60, 1.0, 60)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    kind, waited = lines[0].split()
    assert kind == "timeout" and 1.0 <= float(waited) < 1.0 + GRACE_S
    assert lines[1].startswith("closed") and float(lines[1].split()[1]) < GRACE_S + 0.5
    assert took < 30, f"the whole process took {took:.1f}s"


def test_simrun_itself_ends_each_stuck_conversation_as_runtime_error_and_exits(tmp_path):
    import os
    import shutil

    from tests.conftest import ROOT

    for kind, keep in (("personas", "plain-paula.yaml"), ("goals", "single-add-bag.yaml")):
        (tmp_path / kind).mkdir()
        shutil.copy(ROOT / kind / keep, tmp_path / kind / keep)
    shutil.copy(ROOT / "budgets.toml", tmp_path / "budgets.toml")
    (tmp_path / "stuck.py").write_text(ASSISTANT.replace("N", "60"))
    (tmp_path / "simrun.toml").write_text('[run]\nrepetitions = 2\n\n[runtime]\ntransport = "callable"\n'
                                          'target = "stuck.py:answer"\ntimeout_s = 1\nisolation = "process"\n')
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    started = time.monotonic()
    done = subprocess.run(cli_command(), cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=120)
    took = time.monotonic() - started
    output = done.stdout + done.stderr
    assert "ends: runtime_error 2" in output and done.returncode == 1, output
    assert took < 40, f"simrun took {took:.1f}s"       # two turns of 1 s, startup and the grace, on a loaded machine
