"""Finding the Ray cluster to join: simrun's own reading of what `ray.init(address="auto")` documents.

No cluster is started here: the address is found (RAY_ADDRESS, or the file `ray start` writes in
Ray's temporary folder) and asked briefly, on a socket of this test's own.
"""

from __future__ import annotations

import socket
import sys

import pytest

from simrun._errors import ConfigError
from simrun.simulator.cluster import _connect


@pytest.fixture
def listening():
    """A port that answers (a cluster's GCS, as far as the brief question goes)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


@pytest.fixture
def dead_port():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.close()
    return f"127.0.0.1:{port}"


@pytest.fixture
def ray_tmp(tmp_path, monkeypatch):
    """Ray's temporary folder, as RAY_TMPDIR places it; no RAY_ADDRESS unless a test sets one."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    (tmp_path / "ray").mkdir()
    return tmp_path / "ray"


def test_auto_joins_the_cluster_ray_start_recorded(ray_tmp, listening):
    (ray_tmp / "ray_current_cluster").write_text(listening + "\n")
    assert _connect._cluster_at("auto") == listening


def test_auto_starts_a_new_cluster_when_none_was_recorded(ray_tmp):
    assert _connect.running_here() is None and _connect._cluster_at("auto") is None


def test_auto_starts_a_new_cluster_when_the_recorded_one_is_gone(ray_tmp, dead_port):
    (ray_tmp / "ray_current_cluster").write_text(dead_port)
    assert _connect.running_here() == dead_port and _connect._cluster_at("auto") is None


def test_ray_address_comes_before_the_recorded_cluster(ray_tmp, listening, dead_port, monkeypatch):
    (ray_tmp / "ray_current_cluster").write_text(dead_port)
    monkeypatch.setenv("RAY_ADDRESS", listening)
    assert _connect._cluster_at("auto") == listening
    monkeypatch.setenv("RAY_ADDRESS", "auto")            # "auto" there is no address: the file is read
    assert _connect.running_here() == dead_port
    monkeypatch.setenv("RAY_ADDRESS", "local")           # a new cluster, whatever was recorded
    assert _connect._cluster_at("auto") is None


def test_a_ray_client_address_is_refused_from_the_flag_and_from_the_environment(ray_tmp, monkeypatch):
    with pytest.raises(ConfigError, match=r"ray://.*not supported") as flag:
        _connect._cluster_at("ray://head:10001")
    assert flag.value.field == "ray_address"
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    with pytest.raises(ConfigError, match=r"ray://.*not supported") as env:
        _connect._cluster_at("auto")
    assert env.value.field == "RAY_ADDRESS"


def test_an_address_given_that_does_not_answer_is_bad_input(ray_tmp, dead_port, listening):
    with pytest.raises(ConfigError, match=r"no Ray cluster answers at .*ray start --head") as bad:
        _connect._cluster_at(dead_port)
    assert bad.value.field == "ray_address"
    assert _connect._cluster_at(listening) == listening


def test_ray_temp_folder_follows_ray_tmpdir_then_tmpdir(monkeypatch, tmp_path):
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "a"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "b"))
    assert _connect.ray_temp_dir() == tmp_path / "a" / "ray"
    monkeypatch.delenv("RAY_TMPDIR")
    if sys.platform.startswith("linux"):
        assert _connect.ray_temp_dir() == tmp_path / "b" / "ray"
    monkeypatch.delenv("TMPDIR")
    assert _connect.ray_temp_dir().name == "ray"


def test_the_recorded_address_file_is_where_ray_itself_writes_it(monkeypatch, tmp_path):
    """The one place a test reads a private name of Ray (product code does not): Ray's own path
    of the file `ray start` writes, so that a Ray release that moves it fails here, by name."""
    from ray._common.utils import get_ray_address_file

    for env in ({"RAY_TMPDIR": str(tmp_path / "a")}, {"TMPDIR": str(tmp_path / "b")}, {}):
        for name in ("RAY_TMPDIR", "TMPDIR"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert str(_connect.ray_temp_dir() / "ray_current_cluster") == get_ray_address_file(None), env
