"""A real model plays the user, end to end: llama.cpp's server on 127.0.0.1 with the GGUF file
SIMRUN_TEST_GGUF names (skipped without it, or without llama_cpp). It runs a small matrix
through `simrun` as a user would, and checks what must hold whatever the model's competence:
the form llama.cpp speaks is found, every call is in the ledger, and a broken user is the
user's fault, never the runtime's."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from simrun.simulator.adapters._process import free_port

GGUF = os.environ.get("SIMRUN_TEST_GGUF")
pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(not GGUF or not Path(GGUF).is_file() or importlib.util.find_spec("llama_cpp") is None,
                       reason="set SIMRUN_TEST_GGUF to a GGUF file, with llama-cpp-python[server] installed"),
]
SIMRUN = str(Path(sys.executable).with_name("simrun"))


@pytest.fixture()
def llama_server():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from real_model import wait_for

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", GGUF, "--host", "127.0.0.1",
                             "--port", str(port), "--n_ctx", "8192"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(port, proc)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_real_model_plays_a_small_matrix_end_to_end(project, llama_server):
    for path in (project / "personas").glob("*.yaml"):
        if path.stem != "plain-paula":
            path.unlink()
    for path in (project / "goals").glob("*.yaml"):
        if path.stem not in ("single-add-bag", "cancel-trip"):
            path.unlink()
    toml = project / "simrun.toml"
    toml.write_text(toml.read_text().replace("[runtime]", '[user]\nconcurrency = 1\ntimeout_s = 600\n\n[runtime]')
                    .replace('user = "scripted"', f'user = "openai:local"\nuser_base_url = "{llama_server}"'))
    (project / "budgets.toml").write_text('[prices."openai:local"]\ninput_per_mtok = 0.1\noutput_per_mtok = 0.4\n')
    done = subprocess.run([SIMRUN, "-n", "1"], cwd=project, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "OPENAI_API_KEY": "local"})
    assert done.returncode in (0, 1, 2), done.stderr
    assert "user output form: json_object (json_schema refused: " in done.stdout, done.stdout + done.stderr
    con = duckdb.connect(str(project / "simrun.duckdb"), read_only=True)
    spent, output = con.execute("SELECT spent_usd, user_output FROM runs").fetchone()
    stored = con.execute("SELECT coalesce(sum(cost_usd), 0), count(*) FROM model_calls").fetchone()
    ends = dict(con.execute("SELECT conversation_id, end_reason FROM conversations").fetchall())
    errors = [e for (e,) in con.execute("SELECT error->>'kind' FROM conversations WHERE end_reason = "
                                        "'simulator_error'").fetchall()]
    con.close()
    assert output == "json_object" and Decimal(spent) == Decimal(stored[0]) and stored[1] > 0
    assert len(ends) == 2 and "provider_error" not in ends.values()
    assert "runtime_error" not in ends.values()          # TripDesk without faults: a failure is the user's
    if done.returncode == 2:
        assert "no conversation was judged" in done.stderr and set(ends.values()) <= {"simulator_error"}
    assert all(kind for kind in errors)                 # every user failure has its kind
