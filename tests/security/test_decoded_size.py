"""Size is bounded as bytes arrive, after decoding: a runtime's gzip answer is held to
runtime.max_result_bytes by the size it inflates to, not by its Content-Length on the wire."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc

from aiohttp import web

from simrun._errors import RuntimeFault
from simrun.simulator.adapters._http import HttpRuntime

INFLATED = 200 * 1024 * 1024


def _bomb() -> bytes:
    return gzip.compress(b'{"reply": "' + b"a" * INFLATED + b'"}', compresslevel=9)


def test_a_compressed_answer_is_bounded_by_its_decoded_size():
    body = _bomb()
    assert len(body) < 1024 * 1024              # small on the wire: Content-Length says so

    async def turn(request):
        return web.Response(body=body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})

    async def go():
        app = web.Application()
        app.router.add_post("/v1/sessions/{sid}/turns", turn)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        runtime = HttpRuntime(url=f"http://127.0.0.1:{port}", max_result_bytes=1 << 20, timeout_s=30)
        tracemalloc.start()
        try:
            try:
                await runtime.turn("s1", {"kind": "message", "text": "hi"})
                raise AssertionError("a 200 MB answer was read")
            except RuntimeFault as fault:
                _, peak = tracemalloc.get_traced_memory()
                return fault, peak
        finally:
            tracemalloc.stop()
            await runtime.aclose()
            await runner.cleanup()

    fault, peak = asyncio.run(go())
    assert fault.kind == "too_large", fault
    # The factor: the limit (1 MB) plus what one decoded chunk may hold, never the 200 MB.
    assert peak < 40 * 1024 * 1024, f"peak {peak / 2**20:.0f} MB while reading"


def test_a_bad_bundle_costs_memory_in_proportion_to_its_size(tmp_path):
    """Every item of a 0.4 MB bundle is wrong: the refusal names the first, and what reading it
    costs stays within a stated factor of the file's size (here 30x: the parsed JSON's objects,
    not an error object per item)."""
    import json

    from simrun._errors import BundleError
    from simrun.scoring.store._bundle import load_bundle

    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format_version": 1, "dataset_hash": "0" * 16,
                                "items": [{"id": f"i{n}"} for n in range(40_000)]}, separators=(",", ":")))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        try:
            load_bundle(path)
            raise AssertionError("a bundle of bad items was read")
        except BundleError as exc:
            assert "items" in str(exc) and len(str(exc).splitlines()) == 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 30 * size, f"{peak / size:.0f}x the file's size"


def test_a_bad_baseline_costs_memory_in_proportion_to_its_size():
    """Every cell of a 0.8 MB baseline is wrong: the refusal names the first, and reading it
    costs within the same stated factor as a bundle (30x its size), not an error per cell."""
    import json

    from simrun._errors import BaselineError
    from simrun.scoring.gate._baseline import parse_baseline
    from simrun.scoring.gate._summary import GATE_CLASSES

    cells = 2_000
    data = json.dumps({
        "format": "simrun-baseline", "format_version": 3, "run_id": "r20261202-000000-abcdef",
        "dataset_hash": "0" * 16, "scorer_version": "3", "simrun_version": "0.1.0",
        "blessed_at": "2026-12-02T00:00:00Z",
        "matrix": {"personas": [], "goals": [], "repetitions": 1, "cells": cells, "conversations": cells},
        "classes": list(GATE_CLASSES), "count_fields": ["fired", "scored", "unverifiable"],
        "cells": {f"p{i}/g{i}": {cls: [0, 1, "x"] for cls in GATE_CLASSES} for i in range(cells)},
        "repetitions": {f"p{i}/g{i}": {"fired": {"loop": [-1]}} for i in range(cells)}, "items": {},
    }, separators=(",", ":")).encode()
    tracemalloc.start()
    try:
        try:
            parse_baseline(data, "bad.json", "bless it again")
            raise AssertionError("a baseline of bad cells was read")
        except BaselineError as exc:
            assert str(exc).startswith("bad.json (cells.p0/g0.") and len(str(exc).splitlines()) == 1, exc
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 30 * len(data), f"{peak / len(data):.0f}x the file's size"


def test_a_large_goal_file_costs_memory_in_proportion_to_its_size(tmp_path, demo):
    """A goal file of 25,000 list items (under the 100,000 values a YAML file may expand to):
    reading the dataset costs within the stated factor of its size (80x: the YAML's events and
    nodes while one file is read; the file itself is at most 1 MB)."""
    import shutil

    from simrun.scoring.dataset._files import load_dataset
    from tests.conftest import ROOT

    for folder in ("personas", "goals"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    goal = tmp_path / "goals" / "cancel-trip.yaml"
    goal.write_text(goal.read_text() + "forbidden: [" + ", ".join(f"w{i}" for i in range(25_000)) + "]\n")
    size = sum(p.stat().st_size for p in tmp_path.rglob("*.yaml"))
    tracemalloc.start()
    try:
        dataset = load_dataset(tmp_path / "personas", tmp_path / "goals")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(dataset.goal("cancel-trip").forbidden) == 25_000
    assert peak < 80 * size, f"{peak / size:.0f}x the files' size"
