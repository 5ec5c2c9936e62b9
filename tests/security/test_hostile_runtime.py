"""A hostile runtime costs one conversation per attack, never the run, the machine's memory, or
a secret.

`tests/fixtures/hostile_runtime.py` is TripDesk, except that in one conversation each it answers
JSON nested 100,000 deep, a 50 MB reply, 100,000 offers, bytes that are not UTF-8, an answer that
never ends, and an echo of the secret it was given everywhere it can. `simrun` runs the whole
demo matrix against it, over HTTP and over stdio, as a subprocess: every other conversation
must finish and be scored, the run must end normally, simrun's peak memory must stay under
PEAK_RSS_MB, and the secret must appear in no byte simrun wrote or printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from tests.conftest import ROOT

SIMRUN = str(Path(sys.executable).with_name("simrun"))
FIXTURE = ROOT / "tests" / "fixtures" / "hostile_runtime.py"
SECRET = "sk-hostile-4f9a7c2e81d6b350"
ATTACKS = {"terse-tom/cancel-trip": "nested", "wordy-wendy/rename-trip": "huge",
           "plain-paula/new-trip-full": "offers", "typo-theo/remove-bag": "utf8",
           "terse-tom/rename-trip": "longline", "wordy-wendy/cancel-trip": "echo"}
EXPECTED = {"nested": ("malformed", "nested too deep"), "huge": ("too_large", "bytes or more"),
            "utf8": ("malformed", "not UTF-8"), "longline": ("too_large", "bytes or more"),
            "echo": ("http_status", "answered HTTP 500")}
STDIO_EXPECTED = {**EXPECTED, "echo": ("error", "turn failed: refused")}
PEAK_RSS_MB = 600       # simrun itself; the demo alone peaks near 150 MB
REPORT_BOUND = 1_500_000    # bytes; the demo's own report is about 0.5 MB
MAX_RESULT_BYTES = 8 * 1024 * 1024   # room for 100,000 offers (5.8 MB); the 50 MB answers are cut


def config(project: Path, transport: str) -> None:
    command = [sys.executable, str(FIXTURE), transport] + (["--port", "{port}"] if transport == "http" else [])
    lines = ["[run]", "repetitions = 1", "concurrency = 8", "", "[runtime]", f'transport = "{transport}"',
             f"command = {json.dumps(command)}", f"max_result_bytes = {MAX_RESULT_BYTES}", "timeout_s = 20",
             'env = { TOKEN = "${HOSTILE_TOKEN}" }']
    if transport == "http":
        lines.append('headers = { Authorization = "Bearer ${HOSTILE_TOKEN}" }')
    (project / "simrun.toml").write_text("\n".join(lines) + "\n")


def peak_rss_mb(pid: int, stop: threading.Event, seen: list[float]) -> None:
    while not stop.is_set():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                seen.append(int(line.split()[1]) / 1024)
        time.sleep(0.05)


def every_byte(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def table_text(db: Path) -> str:
    """Every table of the database as text: DuckDB compresses its file, so a grep of the raw
    bytes alone could miss what is there."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return "\n".join(str(con.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables)
    finally:
        con.close()


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_each_attack_costs_one_conversation_and_leaks_nothing(project, transport):
    config(project, transport)
    env = {**os.environ, "HOSTILE": ",".join(f"{k}={v}" for k, v in ATTACKS.items()),
           "HOSTILE_TOKEN": SECRET, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([SIMRUN, "--budget", "5usd"], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stop, rss = threading.Event(), []
    watcher = threading.Thread(target=peak_rss_mb, args=(proc.pid, stop, rss))
    watcher.start()
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        stop.set()
        watcher.join()
    assert proc.returncode in (0, 1), err.decode(errors="replace")[-3000:]
    assert rss and max(rss) < PEAK_RSS_MB, f"simrun peaked at {max(rss):.0f} MB"

    db = project / "simrun.duckdb"
    con = duckdb.connect(str(db), read_only=True)
    try:
        (status,) = con.execute("SELECT status FROM runs").fetchone()
        rows = con.execute("SELECT persona || '/' || goal, end_reason, goal_reached, error FROM conversations"
                           ).fetchall()
    finally:
        con.close()
    assert status == "finished"
    assert len(rows) == 70
    ends = {cid: (end, reached, json.loads(error) if error else None) for cid, end, reached, error in rows}
    for cid, mode in ATTACKS.items():
        if mode == "offers":
            assert ends[cid][0] != "runtime_error", ends[cid]     # a big reply, but a valid one: scored
            continue
        end, _, error = ends[cid]
        kind, says = (EXPECTED if transport == "http" else STDIO_EXPECTED)[mode]
        assert end == "runtime_error" and error["kind"] == kind and says in error["message"], (cid, ends[cid])
    others = {cid: v for cid, v in ends.items() if cid not in ATTACKS}
    assert all(end == "goal_reached" and reached for end, reached, _ in others.values()), others

    # The report stays small, whatever the runtime sent (100,000 offers, a 50 MB reply).
    sizes = {p.name: p.stat().st_size for p in (project / "reports").glob("r*.html")}
    assert sizes and max(sizes.values()) < REPORT_BOUND, sizes

    # The secret is nowhere: not in the database (its bytes and its tables), the reports, the output.
    outputs = {"stdout": out, "stderr": err, "database file": db.read_bytes(),
               "database tables": table_text(db).encode(), "reports": every_byte(project / "reports")}
    if (project / "simrun.duckdb.wal").exists():
        outputs["wal"] = (project / "simrun.duckdb.wal").read_bytes()
    show = subprocess.run([SIMRUN, "show", "latest",
                           "wordy-wendy/cancel-trip/0", "--json"], cwd=project, env=env, capture_output=True)
    assert show.returncode == 0, show.stderr
    outputs["show --json"] = show.stdout + show.stderr
    leaked = [where for where, data in outputs.items() if SECRET.encode() in data]
    assert leaked == []
    assert b"[redacted]" in outputs["show --json"]       # the echo was there, and was cut out
