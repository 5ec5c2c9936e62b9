"""A killed simrun leaves no runtime behind: `kill -9` of simrun (no handler runs, no `finally`,
no `atexit`) must still stop every runtime server and stdio child it started, with whatever
they started in turn. The supervisor each runtime runs under sees the end of a pipe only simrun
held, and stops the process group."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.processes import leftovers, port_is_free
from tests.simulator.adapters.test_transports import ODD, PY

pytestmark = pytest.mark.usefixtures("tagged")

SIMRUN = str(Path(PY).with_name("simrun"))


def wait_for(condition, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_kill_9_of_simrun_leaves_no_runtime_process(project, transport):
    # A runtime that starts a grandchild of its own: the whole group must go, not just the child.
    command = (f"{PY} {ODD} http --port {{port}}" if transport == "http" else f"{PY} {ODD} stdio")
    proc = subprocess.Popen([SIMRUN, "--transport", transport, "--runtime-command", command,
                             "--concurrency", "1", "--repetitions", "50"],
                            cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    banner = proc.stdout.readline()
    assert wait_for(lambda: leftovers(ODD)), f"the runtime never started: {banner}"
    port = re.search(r"127\.0\.0\.1:(\d+)", banner)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert wait_for(lambda: not leftovers(ODD)), f"left behind: {leftovers(ODD)}"
    if port:
        assert wait_for(lambda: port_is_free(int(port.group(1))))


def test_a_runtime_that_starts_children_loses_them_too(tmp_path):
    """The supervisor stops the group, not one process: a shell that started a sleeper."""
    marker = f"sleep-{os.getpid()}-{time.monotonic_ns()}"
    script = tmp_path / "spawner.sh"
    script.write_text(f"#!/bin/sh\n{PY} -c 'import time; time.sleep(300)' {marker} &\nwait\n")
    script.chmod(0o755)

    def sleepers() -> list[str]:
        return [p.name for p in Path("/proc").glob("[0-9]*") if _cmdline(p).endswith(f" {marker} ")]

    # Start it from a throwaway interpreter, then kill that interpreter outright.
    code = (f"import asyncio, sys, time; sys.path.insert(0, {str(Path(__file__).parents[2])!r})\n"
            "from simrun.simulator.adapters._process import ManagedProcess\n"
            "async def main():\n"
            f"    p = ManagedProcess([{str(script)!r}])\n"
            "    await p.start()\n"
            "    print('started', flush=True)\n"
            "    await asyncio.sleep(300)\n"
            "asyncio.run(main())\n")
    holder = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "started"
    assert wait_for(lambda: sleepers())
    holder.kill()
    holder.wait(timeout=10)
    assert wait_for(lambda: not sleepers()), sleepers()


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
