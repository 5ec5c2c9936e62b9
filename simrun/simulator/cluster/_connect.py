"""Joining a Ray cluster: the one at an address, the one running on this machine, or a new one.

Ray waits forever for a cluster that does not answer, so an address is asked first, briefly; a
cluster that cannot be joined is bad input (`--ray-address`), said in one line before anything
is spent.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import tempfile
from pathlib import Path

import ray

from simrun._errors import ConfigError, Parameter

CONNECT_S = 5.0        # how long a cluster's address has to answer


def connect(address: str = "auto") -> str:
    """Join the Ray cluster at `address`; with "auto", the one running on this machine if there
    is one, else a new one on this machine's cores; with "local", always a new one of this run's
    own. Returns what was done, in words."""
    if ray.is_initialized():
        return f"Ray already running in this process ({cpus()} CPUs)"
    # Workers' own output stays in the cluster's logs; a worker's failure reaches the driver as
    # an exception. Ray's notices (token authentication, and the like) are not this run's news:
    # hence log_to_driver=False and logging_level=ERROR, below.
    found = None if address == "local" else _cluster_at(address)
    if found is not None:
        try:
            # "auto" as such: Ray then also takes up the token of a cluster found on this machine.
            ray.init(address="auto" if address == "auto" else found, log_to_driver=False, logging_level=logging.ERROR)
        except ConnectionError as exc:
            raise ConfigError(f"the Ray cluster at {found} did not let this process join ({first_line(exc)}); "
                              "a cluster with token authentication (Ray's default) needs RAY_AUTH_MODE=token, and "
                              "its token in RAY_AUTH_TOKEN or ~/.ray/auth_token", field="ray_address") from None
        return f"joined the Ray cluster at {found} ({cpus()} CPUs)"
    # Ray starts its workers at nice 15, to yield to whatever else the machine runs; here the
    # workers are the run itself, and the driver (at the caller's priority) only stores.
    os.environ.setdefault("RAY_worker_niceness", "0")
    # "local": a new cluster even where one runs (Ray would otherwise join the one `ray start` made).
    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR)
    return f"started a local Ray cluster on this machine's {cpus()} cores"


def _cluster_at(address: str) -> str | None:
    """The host:port of the cluster to join; None to start one here ("auto", and none running).
    Ray waits forever for a cluster that does not answer, so it is asked here first, briefly."""
    if address.startswith("ray://"):
        raise ConfigError(RAY_CLIENT, field="ray_address")
    automatic = address == "auto"
    if automatic:
        found = running_here()
        if found is None:
            return None                   # none started on this machine
        address = found
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=CONNECT_S).close()
    except (OSError, ValueError) as exc:
        if automatic:
            return None                   # the one last started here is gone
        raise ConfigError((f"no Ray cluster answers at {address} ({exc}); start one with `ray start --head` "
                           "and give its address (HOST:6379), or leave ", Parameter("ray_address"), " out to run on "
                           "this machine"), field="ray_address") from None
    return address


RAY_CLIENT = ("Ray Client addresses (ray://) are not supported: the driver writes the database and holds the "
              "budget, so run simrun on a node of the cluster (`ray start --address HEAD:6379` on this "
              "machine, then ", Parameter("ray_address", "auto"), ")")


def running_here() -> str | None:
    """The address `ray.init(address="auto")` would join, found the way its documentation says
    (Ray's public words, not its private functions): RAY_ADDRESS when set, else the address of
    the cluster `ray start` last started on this machine, which it writes to
    `ray_current_cluster` in Ray's temporary folder (/tmp/ray, or RAY_TMPDIR/ray, or TMPDIR/ray
    on Linux). None when there is neither, or RAY_ADDRESS says "local": a new cluster is started.

    (Ray's own search also looks through the machine's processes for a cluster that no `ray
    start` recorded, one another program's ray.init() started for itself: that one is not
    joined; it is that program's.)"""
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if env.startswith("ray://"):
        raise ConfigError(RAY_CLIENT, field="RAY_ADDRESS")
    if env == "local":
        return None
    if env and env != "auto":
        return env
    try:
        recorded = (ray_temp_dir() / "ray_current_cluster").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return recorded or None


def ray_temp_dir() -> Path:
    """Ray's temporary folder on this machine, where `ray start` records its cluster's address."""
    if "RAY_TMPDIR" in os.environ:
        return Path(os.environ["RAY_TMPDIR"]) / "ray"
    if sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        return Path(os.environ["TMPDIR"]) / "ray"
    if sys.platform.startswith(("linux", "darwin")):
        return Path("/tmp/ray")
    return Path(tempfile.gettempdir()) / "ray"


def cpus() -> int:
    return int(ray.cluster_resources().get("CPU", 0))    # type: ignore[no-untyped-call]  # ray leaves it unannotated


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
