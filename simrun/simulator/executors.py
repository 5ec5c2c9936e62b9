"""Which executor runs a plan's conversations: this process (the default), or a Ray cluster.

The Ray executor lives in `simrun.simulator.cluster` and needs the optional `ray` extra, so it is
imported only when a run asks for it (`executor="ray"`, `simrun --executor ray`); without Ray,
one line says what to install.
"""

from __future__ import annotations

from simrun._errors import ConfigError, Parameter
from simrun.simulator._project import Plan
from simrun.simulator._runner import ClusterExecutor

EXECUTORS = ("in-process", "ray")


def executor_for(plan: Plan, name: str | None = None, *, address: str | None = None,
                 workers: int | None = None) -> ClusterExecutor | None:
    """The executor `name` names: None for in-process (the default), or a Ray executor,
    which needs the optional extra; without it, one line says what to install."""
    if name == "ray" and plan.runtime_object is not None:
        # A class, an instance or a function of this process: a worker elsewhere cannot import it.
        raise ConfigError(("a runtime given as an object runs in this process only; give its import string "
                           "('module:Class') to run on a Ray cluster, or leave ", Parameter("executor"), " out"),
                          field="runtime")
    if name in (None, "in-process"):
        for parameter, value in (("ray_address", address), ("ray_workers", workers)):
            if value is not None:
                raise ConfigError(("is for the Ray executor; add ", Parameter("executor", "ray")), field=parameter)
        return None
    if name != "ray":
        raise ConfigError(f"unknown executor {name!r}; use {' or '.join(EXECUTORS)}", field="executor")
    if workers is not None and workers < 1:
        raise ConfigError(f"must be at least 1, got {workers}", field="ray_workers")
    try:
        from simrun.simulator.cluster import RayExecutor
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "ray":
            raise
        raise ConfigError("Ray is not installed; pip install 'simrun[ray]'", field="executor") from None
    return RayExecutor(plan, address=address or "auto", workers=workers)
