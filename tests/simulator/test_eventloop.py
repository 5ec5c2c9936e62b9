"""Every command's event loop: uvloop where it is installed (Linux and macOS), asyncio's otherwise."""

from __future__ import annotations

import asyncio
import builtins
import sys

import pytest

from simrun.simulator import _eventloop as eventloop


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_commands_run_on_uvloop_where_it_is_installed():
    pytest.importorskip("uvloop", reason="uvloop has no Windows build")
    assert eventloop.run(loop_module()).startswith("uvloop")


def test_without_uvloop_the_standard_loop_runs(monkeypatch):
    real_import = builtins.__import__

    def no_uvloop(name, *args, **kwargs):
        if name == "uvloop":
            raise ImportError("no uvloop on this platform")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "uvloop", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_uvloop)
    assert eventloop.run(loop_module()).startswith("asyncio")
