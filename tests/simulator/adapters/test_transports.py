"""Any runtime, any language: the http and stdio transports, runtime faults as data, no leftovers."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from simrun._errors import RuntimeFault, RuntimeUnavailable
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.dataset._files import load_dataset
from simrun.scoring.store._database import Store
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._http import HttpRuntime
from simrun.simulator.adapters._python import PythonRuntime
from simrun.simulator.adapters._stdio import StdioRuntime
from simrun.simulator.users._scripted import ScriptedUser
from tests.conftest import ROOT
from tests.fixtures.processes import leftovers, port_is_free

PY = sys.executable
ODD = str(ROOT / "tests" / "fixtures" / "odd_runtime.py")
SERVER = [PY, "-m", "simrun.examples.tripdesk.server", "--port", "{port}"]
STDIO = [PY, "-m", "simrun.examples.tripdesk.stdio"]
MODES = ("crash", "hang", "garbage", "status", "noreply")

pytestmark = pytest.mark.usefixtures("tagged")


def stored(db: Path, dataset, runtime, repetitions=1, concurrency=1):
    with Store(db) as store:
        run_id = asyncio.run(run_matrix(dataset, runtime, ScriptedUser(), store, repetitions=repetitions,
                                        seed=3, budget=Decimal(0), concurrency=concurrency)).run_id
        turns = store.con.execute("SELECT conversation_id, turn, user_turn, result, state FROM turns "
                                  "WHERE run_id = ? ORDER BY 1, 2", [run_id]).fetchall()
        findings = store.con.execute("SELECT conversation_id, turn, class, detail FROM findings "
                                     "WHERE run_id = ? ORDER BY 1, 2, 3", [run_id]).fetchall()
        ends = dict(store.con.execute("SELECT conversation_id, end_reason FROM conversations WHERE run_id = ?",
                                      [run_id]).fetchall())
        errors = {cid: err for cid, err in store.con.execute(
            "SELECT conversation_id, error FROM conversations WHERE run_id = ?", [run_id]).fetchall()}
    return turns, findings, ends, errors


def test_python_http_and_stdio_give_identical_transcripts_and_findings_with_the_store_sent_or_asked_for(tmp_path, demo):
    faults = "loop=0.3,phantom_receipt=0.2"
    python = stored(tmp_path / "p.duckdb", demo, PythonRuntime(TripDesk(faults=faults, fault_seed=4)), 2, 4)
    http = stored(tmp_path / "h.duckdb", demo,
                  HttpRuntime(command=[*SERVER, "--faults", faults, "--fault-seed", "4"], concurrency=4), 2, 4)
    stdio = stored(tmp_path / "s.duckdb", demo, StdioRuntime([*STDIO, "--faults", faults, "--fault-seed", "4"]), 2, 4)
    # TripDesk sends the store with each turn; a server that does not is asked for it: same rows.
    asked = stored(tmp_path / "a.duckdb", demo, HttpRuntime(
        command=[*SERVER, "--no-snapshot", "--faults", faults, "--fault-seed", "4"], concurrency=4), 2, 4)
    assert python[0] and python[1], "the planted faults were found"
    assert http[:3] == python[:3]
    assert stdio[:3] == python[:3]
    assert asked[:3] == python[:3]
    assert not leftovers("simrun.examples.tripdesk.server") and not leftovers("simrun.examples.tripdesk.stdio")


def odd_dataset(tmp_path: Path, demo):
    personas, goals = tmp_path / "personas", tmp_path / "goals"
    personas.mkdir()
    goals.mkdir()
    shutil.copy(ROOT / "personas" / "plain-paula.yaml", personas)
    text = (ROOT / "goals" / "single-add-bag.yaml").read_text()
    for n, mode in enumerate(MODES):
        (goals / f"{n}-{mode}.yaml").write_text(text.replace("id: single-add-bag", f"id: odd-{mode}"))
    (goals / "9-healthy.yaml").write_text(text.replace("id: single-add-bag", "id: healthy"))
    return load_dataset(personas, goals)


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_every_runtime_fault_is_recorded_with_evidence_and_the_run_goes_on(tmp_path, demo, transport):
    dataset = odd_dataset(tmp_path, demo)
    if transport == "http":
        runtime = HttpRuntime(command=[PY, ODD, "http", "--port", "{port}"], timeout_s=1.0)
    else:
        runtime = StdioRuntime([PY, ODD, "stdio"], timeout_s=1.0)
    turns, findings, ends, errors = stored(tmp_path / "o.duckdb", dataset, runtime)
    ev = {cid.split("/")[1]: __import__("json").loads(err) for cid, err in errors.items() if err}
    assert ends.pop("plain-paula/healthy/0") == "goal_reached"      # a later, healthy conversation passes
    assert set(ends.values()) == {"runtime_error"} and len(ends) == len(MODES)
    crash = ev["odd-crash"]
    assert crash["kind"] == ("connection" if transport == "http" else "exited")
    assert "crashing on purpose" in crash["stderr"]
    # A runtime that still answers after an error is read; one that is gone is not asked.
    assert crash["read_after"] == "nothing: the runtime no longer answers"
    assert ev["odd-status"]["read_after"] == "the store, the audit stream"
    assert ev["odd-hang"]["kind"] == "timeout" and ev["odd-hang"]["elapsed_ms"] >= 1000
    # A runtime that was slow is not said to be gone: it was only not asked again.
    assert ev["odd-hang"]["read_after"] == "nothing: it did not answer in time, so it was not asked again"
    assert ev["odd-garbage"]["kind"] == "malformed" and "not json" in ev["odd-garbage"]["body"]
    assert ev["odd-status"]["kind"] == ("http_status" if transport == "http" else "error")
    assert ev["odd-status"]["status"] == 503 and "temporarily unavailable" in ev["odd-status"]["body"]
    assert ev["odd-noreply"]["kind"] == "missing_reply" and '"understood": true' in ev["odd-noreply"]["body"]
    assert all(e["turn"] == 1 for e in ev.values())
    assert runtime.restarts >= 1            # the dead process was replaced for the next conversation
    assert not leftovers(ODD)


# SIGINT: Ctrl-C; SIGTERM: a cancelled CI job
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_leaves_no_process_and_no_port(tmp_path, project, stop):
    starts = tmp_path / "starts"
    proc = subprocess.Popen(
        [str(Path(PY).with_name("simrun")), "--transport", "http", "--runtime-command",
         f"{PY} {ODD} http --port {{port}}", "--concurrency", "1"],
        cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "ODD_STARTS": str(starts)})
    banner = proc.stdout.readline()
    port = int(re.search(r"127\.0\.0\.1:(\d+)", banner).group(1))
    # Stopped at a known point, however busy the machine: one at a time, the third conversation
    # begun means two have finished.
    deadline = time.monotonic() + 60
    while not (starts.exists() and starts.read_text().count("start") >= 3) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers(ODD), "the runtime server is up while the run goes"
    proc.send_signal(stop)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err
    assert not leftovers(ODD) and port_is_free(port)
    con = duckdb.connect(str(project / "simrun.duckdb"), read_only=True)
    run_id, status, done = con.execute(
        "SELECT run_id, status, (SELECT count(*) FROM conversations) FROM runs").fetchone()
    assert status == "interrupted" and 0 < done < 350
    assert f"run {run_id} is marked interrupted" in err


def test_a_finished_run_leaves_no_process_and_no_port(tmp_path, demo):
    runtime = HttpRuntime(command=SERVER)
    port = int(runtime.url.rsplit(":", 1)[1])
    stored(tmp_path / "f.duckdb", load_dataset(ROOT / "personas", ROOT / "goals"), runtime)
    assert not leftovers("simrun.examples.tripdesk.server") and port_is_free(port)


def test_another_protocol_version_is_refused_before_the_run():
    runtime = HttpRuntime(command=[PY, ODD, "http", "--port", "{port}", "--protocol", "2"])

    async def go():
        try:
            await runtime.health()
        finally:
            await runtime.aclose()

    with pytest.raises(RuntimeUnavailable, match="speaks protocol 2.*this simrun speaks protocol 1"):
        asyncio.run(go())
    assert not leftovers(ODD)


@pytest.mark.parametrize("protocol, says", [
    ('"1"', "protocol must be the number 1, got the text '1'"),
    ("1.0", "protocol must be the number 1, got the fraction 1.0"),
    ("true", "protocol must be the number 1, got true"),
    ("null", "protocol must be the number 1, got null"),
    ("[1]", "protocol must be the number 1, got a list")])
def test_a_protocol_that_is_not_a_number_is_named_as_the_runtime_s_mistake(protocol, says):
    # Not a version mismatch: "upgrade simrun" would send the user the wrong way.
    runtime = HttpRuntime(command=[PY, ODD, "http", "--port", "{port}", "--protocol", protocol])

    async def go():
        try:
            await runtime.health()
        finally:
            await runtime.aclose()

    with pytest.raises(RuntimeUnavailable) as raised:
        asyncio.run(go())
    assert says in str(raised.value) and "Upgrade simrun" not in str(raised.value)


def test_a_command_without_port_is_named_not_the_startup_timeout(monkeypatch):
    # The runtime listens on a port of its own: alive, but never on the port simrun chose.
    monkeypatch.setattr("simrun.simulator.adapters._http.PORTLESS_WAIT_S", 0.5)
    runtime = HttpRuntime(command=[PY, ODD, "http", "--port", "0"], startup_timeout_s=30.0)
    started = time.monotonic()
    with pytest.raises(RuntimeUnavailable) as raised:
        asyncio.run(runtime.health())
    message = str(raised.value)
    assert message.startswith("the command has no {port} and nothing answered on the port simrun chose")
    assert "--port {port}" in message and "runtime.url" in message and "startup_timeout_s" not in message
    assert time.monotonic() - started < 15          # not the 30 s startup wait
    assert not leftovers(ODD)


def test_a_command_without_port_that_exits_says_both():
    runtime = HttpRuntime(command=[PY, "-c", "import sys; sys.stderr.write('bad flag\\n'); sys.exit(2)"])
    with pytest.raises(RuntimeUnavailable, match=r"(?s)exited with status 2 before answering /v1/health: "
                                                 r"runtime.command must say where.*\{port\}.*bad flag"):
        asyncio.run(runtime.health())


def test_a_runtime_that_will_not_start_says_why(tmp_path):
    runtime = HttpRuntime(command=[PY, "-c", "import sys; sys.stderr.write('no config found\\n'); sys.exit(4)"])
    with pytest.raises(RuntimeUnavailable, match="(?s)exited with status 4.*no config found"):
        asyncio.run(runtime.health())
    with pytest.raises(RuntimeUnavailable, match="cannot start"):
        asyncio.run(StdioRuntime(["/no/such/program"]).health())


def test_headers_come_from_the_environment_and_are_never_stored(project, monkeypatch):
    from typer.testing import CliRunner

    from simrun.cli._main import app

    monkeypatch.chdir(project)
    secret = "s3cr3t-token-4f9a"
    command = f"{PY} {ODD} http --port {{port}} --token {secret}"
    header = "Authorization=Bearer ${ODD_TOKEN}"
    missing = CliRunner().invoke(app, ["-n", "1", "--runtime-command", command, "--transport", "http",
                                       "--header", header])
    assert missing.exit_code == 2 and "ODD_TOKEN" in missing.output
    monkeypatch.setenv("ODD_TOKEN", secret)
    result = CliRunner().invoke(app, ["-n", "1", "--runtime-command", "X", "--transport", "http",
                                      "--header", header, "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2   # nothing listens there: refused before the run
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace('transport = "python"', 'transport = "http"').replace(
        'target = "simrun.examples.tripdesk:TripDesk"   # the bundled reference runtime',
        f'command = "{PY} {ODD} http --port {{port}}"\nheaders = {{Authorization = "Bearer ${{ODD_TOKEN}}"}}'))
    result = CliRunner().invoke(app, ["-n", "1"])
    assert result.exit_code == 0, result.output
    for path in [project / "simrun.duckdb", *Path(project / "reports").glob("*.html")]:
        assert secret.encode() not in path.read_bytes(), path
    # The stored configuration names the header, not its value.
    con = duckdb.connect(str(project / "simrun.duckdb"), read_only=True)
    assert '"headers":["Authorization"]' in con.execute("SELECT config FROM runs").fetchone()[0].replace(" ", "")


def test_a_started_command_gets_its_env_and_working_directory(tmp_path):
    (tmp_path / "version.txt").write_text("7.1")
    script = ("import json, os, sys\n"
              "for line in sys.stdin:\n"
              "    req = json.loads(line)\n"
              "    body = {'protocol': 1, 'runtime': os.environ['RT_NAME'], 'version': open('version.txt').read()}\n"
              "    print(json.dumps({'id': req['id'], 'result': body}), flush=True)\n")
    runtime = StdioRuntime([PY, "-c", script], env={"RT_NAME": "envy"}, cwd=str(tmp_path))

    async def go():
        try:
            return await runtime.health()
        finally:
            await runtime.aclose()

    assert asyncio.run(go()) == {"protocol": 1, "runtime": "envy", "version": "7.1"}


def test_a_redirect_is_a_fault_and_the_headers_never_follow_it():
    from aiohttp import web

    from simrun._errors import RuntimeFault

    seen = []

    async def elsewhere(request):
        seen.append(dict(request.headers))
        return web.json_response({"session": "stolen"})

    async def go():
        other = web.AppRunner(web.Application())
        other.app.router.add_route("*", "/{tail:.*}", elsewhere)
        await other.setup()
        await web.TCPSite(other, "127.0.0.1", 0).start()
        other_port = other.addresses[0][1]

        async def moved(request):
            if request.path == "/v1/health":
                return web.json_response({"protocol": 1, "runtime": "moved", "version": "1"})
            raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{other_port}{request.path}")

        main = web.AppRunner(web.Application())
        main.app.router.add_route("*", "/{tail:.*}", moved)
        await main.setup()
        await web.TCPSite(main, "127.0.0.1", 0).start()
        runtime = HttpRuntime(url=f"http://127.0.0.1:{main.addresses[0][1]}", headers={"X-Api-Key": "SECRET-1"})
        try:
            await runtime.health()
            with pytest.raises(RuntimeFault) as fault:
                await runtime.start({"seed": 1, "persona": "p", "goal": "g", "setup": {}})
            return fault.value
        finally:
            await runtime.aclose()
            await main.cleanup()
            await other.cleanup()

    fault = asyncio.run(go())
    assert fault.kind == "http_status" and fault.evidence["status"] == 307
    assert seen == []


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_conversations_a_dying_server_takes_down_with_it_are_marked_collateral(transport):
    """A's turn kills the started server; B, still talking to it, fails only because of A (and
    is marked collateral); C starts on a new server, where B's session no longer exists."""
    from simrun._errors import RuntimeFault

    if transport == "http":
        runtime = HttpRuntime(command=[PY, ODD, "http", "--port", "{port}"], timeout_s=5.0)
    else:
        runtime = StdioRuntime([PY, ODD, "stdio"], timeout_s=5.0)
    hello = {"message": "Add a bag to Lisbon offsite."}

    async def go():
        await runtime.health()
        try:
            b = await runtime.start({"seed": 1, "persona": "p", "goal": "healthy", "setup": {}})
            a = await runtime.start({"seed": 2, "persona": "p", "goal": "odd-crash", "setup": {}})
            assert "reply" in await runtime.turn(b, hello)
            faults = {}
            for who, session in (("a", a), ("b", b)):
                with pytest.raises(RuntimeFault) as caught:
                    await runtime.turn(session, hello)
                faults[who] = caught.value.evidence
            c = await runtime.start({"seed": 3, "persona": "p", "goal": "healthy", "setup": {}})
            with pytest.raises(RuntimeFault) as caught:
                await runtime.turn(b, hello)
            faults["b-later"] = caught.value.evidence
            assert "reply" in await runtime.turn(c, hello)
            return faults
        finally:
            await runtime.aclose()

    faults = asyncio.run(go())
    assert not faults["a"].get("collateral"), "the conversation whose turn took it down is not collateral"
    assert faults["b"]["collateral"] is True
    assert faults["b-later"]["collateral"] is True and "another conversation" in faults["b-later"]["message"]
    assert runtime.restarts == 1
    assert not leftovers(ODD)


# A child that takes `start_s` to start (an interpreter, its imports, a model loaded), then
# answers health at once and every other request after `request_s`.
SLOW_CHILD = """
import json, sys, time
time.sleep(float(sys.argv[1]))
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] != "health":
        time.sleep(float(sys.argv[2]))
    print(json.dumps({"id": request["id"], "result": {"protocol": 1}}), flush=True)
"""


def test_a_stdio_child_has_the_startup_timeout_for_its_first_answer_and_the_timeout_after():
    def runtime(start_s: float, startup_timeout_s: float) -> StdioRuntime:
        return StdioRuntime([PY, "-c", SLOW_CHILD, str(start_s), "2"], timeout_s=0.5,
                            startup_timeout_s=startup_timeout_s)

    async def health_then_start(rt: StdioRuntime):
        try:
            await rt.health()
            await rt.start({})
        finally:
            await rt.process.stop()

    slow_start = runtime(1.0, startup_timeout_s=10.0)     # starts slower than timeout_s: not a timeout
    with pytest.raises(RuntimeFault) as raised:
        asyncio.run(health_then_start(slow_start))
    # ...but a later request that takes longer than timeout_s is one.
    assert raised.value.evidence["kind"] == "timeout", raised.value
    assert "start: no answer within 0.5s (runtime.timeout_s)" in str(raised.value)
    too_slow = runtime(1.0, startup_timeout_s=0.5)
    with pytest.raises(RuntimeUnavailable, match=r"health: no answer within 0.5s \(runtime.startup_timeout_s"):
        asyncio.run(health_then_start(too_slow))


def test_conversations_that_find_the_server_dead_together_start_it_once_and_all_go_on():
    """Eight conversations in flight see the server die at once: one starts it again, and the
    others use that server, rather than each stopping the one the others had started (which left
    messages such as "exited with status None" and "exited (still running)")."""
    runtime = HttpRuntime(command=[PY, ODD, "http", "--port", "{port}"], timeout_s=5.0, concurrency=8)
    hello = {"message": "Add a bag to Lisbon offsite."}

    async def go():
        await runtime.health()
        try:
            a = await runtime.start({"seed": 2, "persona": "p", "goal": "odd-crash", "setup": {}})
            with pytest.raises(RuntimeFault) as caught:
                await runtime.turn(a, hello)
            sessions = await asyncio.gather(*(runtime.start({"seed": s, "persona": "p", "goal": "healthy",
                                                              "setup": {}}) for s in range(8)))
            replies = await asyncio.gather(*(runtime.turn(s, hello) for s in sessions))
            return caught.value.evidence, replies
        finally:
            await runtime.aclose()

    crash, replies = asyncio.run(go())
    assert crash["kind"] == "connection" and "exited (status" in crash["message"]
    assert runtime.restarts == 1 and all("reply" in r for r in replies)
    assert not leftovers(ODD)


def test_once_a_close_answer_has_carried_the_audit_the_audit_is_read_by_closing_and_asked_again_if_it_stops():
    """The audit with the close (docs/protocol.md): the first conversation reads the audit and
    closes, and learns the close answer carries it; later ones close to read it, one request less;
    a close answer without it gives that conversation no audit (UNVERIFIABLE, never a pass) and
    the next one asks again. A close that failed is tried again by the loop's own close."""
    desk = TripDesk()
    sid = desk.start({"seed": 1, "setup": {}})["session"]
    desk.turn(sid, {"message": "hello"})
    events = desk.audit(sid)

    class Answered(HttpRuntime):
        def __init__(self, closes):
            super().__init__(url="http://127.0.0.1:1")
            self.closes, self.ops = iter(closes), []

        async def _request(self, op, method, path, body=None, optional=False, session=None, check=None):
            self.ops.append(op)
            reply = events if op == "audit" else next(self.closes)
            if isinstance(reply, Exception):
                raise reply
            return check(reply) if check else reply

    async def conversation(runtime, session):
        audit = await runtime.audit(session)
        await runtime.close(session)
        return audit

    async def go():
        runtime = Answered([{"audit": events}, {"audit": events}, {}, {"audit": events},
                            RuntimeFault("timeout", "no answer"), {"audit": events}])
        audits = [await conversation(runtime, f"s-{n}") for n in range(4)]
        with pytest.raises(RuntimeFault):
            await runtime.audit("s-4")        # learned again by s-3's close; this close times out
        await runtime.close("s-4")            # so the loop's close sends it again
        return audits, runtime.ops

    audits, ops = asyncio.run(go())
    expected = events["turns"]
    assert audits == [expected, expected, None, expected]
    assert ops == ["audit", "close", "close", "close", "audit", "close", "close", "close"]
