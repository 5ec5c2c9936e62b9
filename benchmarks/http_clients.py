"""The HTTP clients side by side: this process's CPU per request, for the runtime's request pattern.

What simrun asks of a client for runtimes: a POST of a JSON body it has already serialised (a
turn), then a GET (the state), on keep-alive connections, 64 conversations in flight, each answer
read whole but bounded. The server is a process of its own (a few lines of asyncio answering
fixed JSON of the sizes the reference runtime sends), so the CPU read here, of this process, is
the client's and its event loop's only. Each client gets the same requests, in rounds taken in
turn (a loaded machine slows every client alike), on simrun's own event loop (uvloop):

- http1: simrun's lean client (simulator/_http1.py: asyncio's transports and httptools' parser);
- aiohttp: one shared `ClientSession` and `TCPConnector` sized to the calls in flight, its C
  parser, each answer read to the bound through `response.content` (what the product would do);
- httpx: one shared `AsyncClient` on httpcore, its answer read whole;
- chat: simrun's chat transport itself (`ChatRuntime`, two turns a pair, each a POST of the
  conversation so far), with whatever client the simrun on the path gives it: run with
  `--clients chat` from a checkout before and after a change of client to compare the transport.

Printed: microseconds of this process's CPU per request (median of the rounds, and each round),
and each client's ratio to the cheapest.

    .venv/bin/python benchmarks/http_clients.py [--in-flight 64] [--pairs 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simrun.simulator import _eventloop as eventloop  # noqa: E402
from simrun.simulator.adapters._process import free_port  # noqa: E402

LIMIT = 16 * 1024 * 1024
# A chat completion (the chat transport reads it; the others compare its bytes).
TURN = json.dumps({"choices": [{"message": {"role": "assistant", "content": "Your trip to Lisbon is booked for the "
                                                                        "12th. " * 8}}], "id": "0" * 32}).encode()
STATE = json.dumps({"bookings": [{"id": f"bk-{i}", "city": "Lisbon", "nights": 3} for i in range(30)]}).encode()
REQUEST = json.dumps({"message": "I want to change my booking to the 14th, please.", "traceparent": "00-" + "1" * 55})

SERVER = r"""
import asyncio, sys
TURN, STATE = sys.argv[2].encode(), sys.argv[3].encode()
def answer(body):
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
class Server(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""
    def data_received(self, data):
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            length = 0
            at = head.find(b"content-length:")
            if at >= 0:
                length = int(head[at + 15:].split(b"\r\n", 1)[0])
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            self.transport.write(answer(TURN if head.startswith(b"post") else STATE))
async def main():
    server = await asyncio.get_running_loop().create_server(Server, "127.0.0.1", int(sys.argv[1]))
    async with server:
        await server.serve_forever()
try:
    import uvloop
    uvloop.run(main())
except ImportError:
    asyncio.run(main())
"""


def start_server() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), TURN.decode(), STATE.decode()])
    import socket

    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the server did not start")


Pair = Callable[[str], Awaitable[None]]


async def http1_client(base: str, in_flight: int) -> tuple[Pair, Callable[[], Awaitable[None]]]:
    from simrun.simulator._http1 import Pool

    pool = Pool(base, timeout_s=30, keepalive_s=4, connections=in_flight)

    async def pair(session: str) -> None:
        turn = await pool.request("POST", f"/v1/sessions/{session}/turn", REQUEST.encode(), limit=LIMIT)
        state = await pool.request("GET", f"/v1/sessions/{session}/state", limit=LIMIT)
        assert turn.status == state.status == 200 and turn.body == TURN and state.body == STATE

    return pair, pool.close


async def aiohttp_client(base: str, in_flight: int) -> tuple[Pair, Callable[[], Awaitable[None]]]:
    import aiohttp

    http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30),
                                 connector=aiohttp.TCPConnector(limit=in_flight, limit_per_host=0,
                                                                keepalive_timeout=4))

    async def bounded(response: aiohttp.ClientResponse) -> bytes:
        try:
            raw = await response.content.readexactly(LIMIT + 1)
        except asyncio.IncompleteReadError as short:
            return short.partial
        raise ValueError(f"more than {LIMIT} bytes ({len(raw)})")

    async def pair(session: str) -> None:
        async with http.post(f"{base}/v1/sessions/{session}/turn", data=REQUEST.encode(),
                             headers={"Content-Type": "application/json"}, allow_redirects=False) as response:
            turn = await bounded(response)
        async with http.get(f"{base}/v1/sessions/{session}/state", allow_redirects=False) as response:
            state = await bounded(response)
        assert turn == TURN and state == STATE

    return pair, http.close


async def httpx_client(base: str, in_flight: int) -> tuple[Pair, Callable[[], Awaitable[None]]]:
    import httpx

    http = httpx.AsyncClient(base_url=base, timeout=30, limits=httpx.Limits(max_connections=in_flight,
                                                                            keepalive_expiry=4))

    async def pair(session: str) -> None:
        turn = await http.post(f"/v1/sessions/{session}/turn", content=REQUEST.encode(),
                               headers={"Content-Type": "application/json"})
        state = await http.get(f"/v1/sessions/{session}/state")
        assert turn.content == TURN and state.content == STATE

    return pair, http.aclose


async def chat_transport(base: str, in_flight: int) -> tuple[Pair, Callable[[], Awaitable[None]]]:
    from simrun.simulator.adapters._template import ChatRuntime

    runtime = ChatRuntime(url=f"{base}/v1", model="m", concurrency=in_flight, timeout_s=30)

    async def pair(session: str) -> None:
        started = await runtime.start({"seed": 1, "persona": "p", "goal": "g", "setup": {}})
        for text in ("I want to change my booking to the 14th, please.", "Yes, confirm it."):
            result = await runtime.turn(started, {"message": text})
            assert result["reply"].startswith("Your trip")
        await runtime.close(started)

    return pair, runtime.aclose


CLIENTS = {"http1": http1_client, "aiohttp": aiohttp_client, "httpx": httpx_client, "chat": chat_transport}
DEFAULT = ["http1", "aiohttp", "httpx"]


async def one_round(make, base: str, in_flight: int, pairs: int) -> float:
    """Microseconds of this process's CPU per request."""
    pair, close = await make(base, in_flight)

    async def conversation(n: int) -> None:
        for i in range(pairs):
            await pair(f"s{n}-{i}")

    await asyncio.gather(*(conversation(n) for n in range(in_flight)))     # warm: connections made
    cpu = time.process_time()
    await asyncio.gather(*(conversation(n) for n in range(in_flight)))
    cpu = time.process_time() - cpu
    await close()
    return cpu / (in_flight * pairs * 2) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=100, help="turn-and-state pairs per conversation per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", nargs="+", choices=list(CLIENTS), default=DEFAULT)
    args = parser.parse_args()
    server, base = start_server()
    figures: dict[str, list[float]] = {name: [] for name in args.clients}
    try:
        for _ in range(args.rounds):
            for name in args.clients:
                figures[name].append(eventloop.run(one_round(CLIENTS[name], base, args.in_flight, args.pairs)))
    finally:
        server.terminate()
        server.wait()
    medians = {name: statistics.median(values) for name, values in figures.items()}
    cheapest = max(min(medians.values()), 1e-9)
    import os

    print(f"{args.in_flight} in flight, {args.pairs} POST+GET pairs each per round, {args.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'client':<10}{'µs CPU/request':>16}{'ratio':>8}   rounds")
    for name, median in medians.items():
        rounds = ", ".join(f"{value:.0f}" for value in figures[name])
        print(f"{name:<10}{median:>16.0f}{median / cheapest:>8.2f}   {rounds}")


if __name__ == "__main__":
    main()
