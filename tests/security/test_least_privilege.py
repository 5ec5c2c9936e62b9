"""Least privilege for the runtime: a runtime simrun starts gets the environment it needs, not
simrun's credentials (the user model's API keys, CI tokens), unless runtime.env passes them;
and whatever it starts is ended with it, even a descendant that left its process group
(`setsid` after a double fork), whichever way the runtime or simrun ended."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simrun.simulator.adapters._process import ManagedProcess

CREDENTIALS = {"OPENAI_API_KEY": "sk-openai-e0f9d8c7b6a5", "ANTHROPIC_API_KEY": "sk-ant-a1b2c3d4e5f6",
               "GROQ_API_KEY": "gsk-0011223344", "GITHUB_TOKEN": "ghs_abcdefgh12345", "DB_PASSWORD": "hunter2hunter2",
               "OPENAI_ORG_ID": "org-123456789", "AWS_SECRET_ACCESS_KEY": "aws/secret/0123456789"}
PLAIN = {"SIMRUN_PLAIN_SETTING": "visible-value", "LANG_HINT": "en"}

ENV_DUMP = "import json, os, sys; open(sys.argv[1], 'w').write(json.dumps(dict(os.environ)))"

# A runtime that starts a daemon: fork, setsid, fork again, the middle one exits (the grandchild
# is orphaned, out of the runtime's group and session), and the grandchild writes its pid.
DAEMONIZING = """
import os, sys, time
pidfile, mode = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        signal_proof = __import__("signal")
        signal_proof.signal(signal_proof.SIGTERM, signal_proof.SIG_IGN)   # a stubborn daemon
        while True:
            time.sleep(1)
    os._exit(0)
while not os.path.exists(pidfile):
    time.sleep(0.01)
if mode == "exit":
    sys.exit(3)
while True:
    time.sleep(1)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_the_runtime_gets_no_credential_it_was_not_given(tmp_path, monkeypatch):
    for name, value in {**CREDENTIALS, **PLAIN}.items():
        monkeypatch.setenv(name, value)
    dump = tmp_path / "env.json"

    async def go():
        process = ManagedProcess([sys.executable, "-c", ENV_DUMP, str(dump)],
                                 env={"ANTHROPIC_API_KEY": CREDENTIALS["ANTHROPIC_API_KEY"]})   # passed on by name
        await process.start()
        await process.exited(20)
        await process.stop()

    asyncio.run(go())
    seen = json.loads(dump.read_text())
    for name, value in CREDENTIALS.items():
        if name == "ANTHROPIC_API_KEY":
            assert seen[name] == value
        else:
            assert name not in seen and value not in seen.values(), name
    for name, value in PLAIN.items():
        assert seen[name] == value
    assert "PATH" in seen


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's")
@pytest.mark.parametrize("mode", ["stopped", "exit"])
def test_a_descendant_that_left_the_group_ends_with_the_runtime(tmp_path, mode):
    pidfile = tmp_path / "daemon.pid"
    script = tmp_path / "daemonizing.py"
    script.write_text(DAEMONIZING)

    async def go():
        process = ManagedProcess([sys.executable, str(script), str(pidfile), "exit" if mode == "exit" else "stay"])
        await process.start()
        while not pidfile.exists():
            await asyncio.sleep(0.02)
        if mode == "exit":
            await process.exited(30)
        await process.stop(grace_s=5)

    asyncio.run(go())
    daemon = int(pidfile.read_text())
    assert gone_within(daemon, 15), f"the daemon {daemon} outlived its runtime"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's")
def test_a_descendant_that_left_the_group_ends_when_simrun_is_killed(tmp_path):
    pidfile = tmp_path / "daemon.pid"
    script = tmp_path / "daemonizing.py"
    script.write_text(DAEMONIZING)
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import asyncio, sys, time\n"
        "from simrun.simulator.adapters._process import ManagedProcess\n"
        "async def go():\n"
        f"    p = ManagedProcess([sys.executable, {str(script)!r}, {str(pidfile)!r}, 'stay'])\n"
        "    await p.start()\n"
        "    print('started', flush=True)\n"
        "    await asyncio.sleep(600)\n"
        "asyncio.run(go())\n")
    simrun = subprocess.Popen([sys.executable, str(driver)], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2])
    try:
        assert simrun.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 20
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        daemon = int(pidfile.read_text())
        assert alive(daemon)
        simrun.send_signal(signal.SIGKILL)            # kill -9: no cleanup of simrun's runs
        simrun.wait(10)
        assert gone_within(daemon, 15), f"the daemon {daemon} outlived a killed simrun"
    finally:
        simrun.kill()
        simrun.wait(10)
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except OSError:
                pass
