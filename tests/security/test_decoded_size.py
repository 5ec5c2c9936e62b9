"""Size is bounded as bytes arrive, after decoding: a runtime's gzip answer is held to
runtime.max_result_bytes by the size it inflates to, not by its Content-Length on the wire."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc

from aiohttp import web

from scoring.errors import RuntimeFault
from simulator.adapters.http import HttpRuntime

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

    from scoring.errors import BundleError
    from scoring.store.bundle import load_bundle

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
