"""What the adapter tests share: the model behind the foreign agent, served over HTTP."""

from __future__ import annotations

import pytest

from simulator.adapters.process import free_port
from tests.fixtures.foreign_agent import desk_model
from tests.fixtures.model_api import FakeModelAPI, serve


@pytest.fixture(scope="module")
def desk_model_url():
    """An OpenAI-compatible server whose model calls the foreign agent's tools (the fake API)."""
    port = free_port()
    server = serve(FakeModelAPI(policy=desk_model, record=False), port)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True


@pytest.fixture()
def desk_env(monkeypatch, desk_model_url, tmp_path):
    """The foreign agent's settings: its model, a wrong record planted in a fifth of its write
    turns, and the file it lists them in."""
    monkeypatch.setenv("FOREIGN_MODEL_URL", desk_model_url)
    monkeypatch.setenv("FOREIGN_WRONG_RECORD", "0.2")
    monkeypatch.setenv("FOREIGN_FAULT_SEED", "7")
    monkeypatch.setenv("FOREIGN_PLANTED_LOG", str(tmp_path / "planted.txt"))
    return tmp_path / "planted.txt"
