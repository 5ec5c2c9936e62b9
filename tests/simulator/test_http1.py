"""simrun's lean HTTP/1.1 client against servers that say exactly what each test makes them say:
what it reads (lengths, chunks, a body that ends with the connection, gzip), what it reuses and
what it never does, and how each way of failing is told apart, bounded and cleaned up."""

from __future__ import annotations

import asyncio
import gzip
import os
import ssl
import subprocess
import tracemalloc
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simrun.simulator._http1 import MAX_HEADER_BYTES, Client, ConnectFailed, Disconnected, NotHttp, Pool, TooLarge
from simrun.simulator.adapters._process import free_port


class Server:
    """A server on 127.0.0.1 that reads each request whole and answers with `answer(request)`:
    bytes to write (or a list of them, written one by one), or None to close without answering."""

    def __init__(self, answer, ssl_context: ssl.SSLContext | None = None) -> None:
        self.answer, self.ssl_context = answer, ssl_context
        self.requests: list[bytes] = []
        self.connections = 0
        self.open = self.most_open = 0

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    def url(self, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                answer = self.answer(request)
                if asyncio.iscoroutine(answer):
                    answer = await answer
                if answer is None:
                    return
                parts = answer if isinstance(answer, list) else [answer]
                for part in parts:
                    if part is None:
                        return
                    writer.write(part)
                    await writer.drain()
                head = b"".join(parts).split(b"HTTP/1.1 ")[-1].split(b"\r\n\r\n")[0].lower()   # the last answer's
                if b"connection: close" in head or not (b"content-length" in head or b"chunked" in head):
                    return          # as a server does: the end of such a body is the end of the connection
        finally:
            self.open -= 1
            writer.close()


def ok(body: bytes = b'{"ok": true}', status: str = "200 OK", *headers: str) -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    return f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


def chunked(*parts: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
        f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) + b"0\r\n\r\n"


def pool(server: Server, **kw) -> Pool:
    return Pool(server.url(), **{"timeout_s": 5.0, "keepalive_s": 5.0, **kw})


def run(coroutine):
    return asyncio.run(coroutine)


def test_answers_are_read_by_length_by_chunks_and_to_the_end_and_connections_are_reused():
    answers = iter([ok(b"one"), chunked(b"tw", b"o"), ok(b"", "204 No Content"), ok(b"four"),
                    b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nfive, to the end"])

    async def go():
        async with Server(lambda request: next(answers)) as server:
            client = pool(server)
            bodies = [(await client.request("GET", "/x", limit=1000)) for _ in range(5)]
            await client.close()
            return [(a.status, a.body) for a in bodies], server.connections

    bodies, connections = run(go())
    assert bodies == [(200, b"one"), (200, b"two"), (204, b""), (200, b"four"), (200, b"five, to the end")]
    assert connections == 1       # every answer but the last kept the connection open


@settings(max_examples=60, deadline=None)
@given(body=st.binary(max_size=3000), mode=st.sampled_from(["length", "chunked", "eof", "gzip"]),
       cuts=st.lists(st.integers(1, 700), max_size=8))
def test_a_body_comes_back_byte_for_byte_however_the_server_splits_its_writes(body, mode, cuts):
    if mode == "length":
        whole = ok(body)
    elif mode == "chunked":
        whole = chunked(*[body[i:i + 500] for i in range(0, len(body), 500)] if body else [])
    elif mode == "eof":
        whole = b"HTTP/1.1 200 OK\r\n\r\n" + body
    else:
        packed = gzip.compress(body)
        whole = ok(packed, "200 OK", "Content-Encoding: gzip")
    parts, rest = [], whole
    for cut in cuts:
        parts.append(rest[:cut])
        rest = rest[cut:]
    parts.append(rest)

    async def go():
        async with Server(lambda request: [p for p in parts if p] or None) as server:
            client = pool(server)
            try:
                return (await client.request("POST", "/v1/x", b"{}", limit=10_000)).body
            finally:
                await client.close()

    assert run(go()) == body


def test_deflate_is_decoded_too():
    async def go():
        async with Server(lambda r: ok(zlib.compress(b'{"a": 1}'), "200 OK", "Content-Encoding: deflate")) as server:
            client = pool(server)
            answer = await client.request("GET", "/", limit=100)
            await client.close()
            return answer.body

    assert run(go()) == b'{"a": 1}'


def test_a_connection_that_carried_a_5xx_is_never_used_again():
    statuses = iter(["500 Internal Server Error", "200 OK", "200 OK", "503 Service Unavailable", "200 OK"])

    async def go():
        async with Server(lambda r: ok(b"{}", next(statuses))) as server:
            client = pool(server)
            seen = [(await client.request("GET", "/", limit=100)).status for _ in range(5)]
            await client.close()
            return seen, server.connections

    seen, connections = run(go())
    assert seen == [500, 200, 200, 503, 200]
    assert connections == 3        # a new one after each 5xx, the same one between


def test_an_idle_connection_is_dropped_after_keepalive_s_and_one_the_server_closed_is_never_used():
    async def go():
        closing = iter([False, True, False, False])

        def answer(request):
            return ok(b"{}", "200 OK", *(["Connection: close"] if next(closing) else []))

        async with Server(answer) as server:
            client = pool(server, keepalive_s=0.2)
            await client.request("GET", "/", limit=100)
            await client.request("GET", "/", limit=100)       # the server closes this one after answering
            await client.request("GET", "/", limit=100)       # so this goes on a new one
            await asyncio.sleep(0.3)
            await client.request("GET", "/", limit=100)       # idle too long: a new one again
            await client.close()
            return server.connections

    assert run(go()) == 3


def test_at_most_connections_are_open_at_once_and_the_rest_wait_their_turn():
    async def slow(request):
        await asyncio.sleep(0.05)
        return ok(b"{}")

    async def go():
        async with Server(slow) as server:
            client = pool(server, connections=2)
            answers = await asyncio.gather(*[client.request("GET", "/", limit=10) for _ in range(7)])
            await client.close()
            return [a.status for a in answers], server.most_open

    statuses, most_open = run(go())
    assert statuses == [200] * 7 and most_open == 2


def test_each_way_of_failing_is_its_own_error():
    port = free_port()

    async def refused():
        client = Pool(f"http://127.0.0.1:{port}", timeout_s=2, keepalive_s=1)
        await client.request("GET", "/", limit=10)

    with pytest.raises(ConnectFailed, match=f"127.0.0.1:{port}"):
        run(refused())

    async def against(answer, limit=100, timeout_s=5.0):
        async with Server(answer) as server:
            client = pool(server, timeout_s=timeout_s)
            try:
                return await client.request("GET", "/", limit=limit)
            finally:
                await client.close()

    with pytest.raises(Disconnected, match="without answering"):
        run(against(lambda r: None))
    with pytest.raises(Disconnected, match="in the middle"):
        run(against(lambda r: [b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nonly this", None]))
    with pytest.raises(NotHttp, match="not an HTTP answer"):
        run(against(lambda r: b"SSH-2.0-OpenSSH_9.2\r\n\r\n"))
    with pytest.raises(TooLarge) as cut:
        run(against(lambda r: ok(b"x" * 5000), limit=1000))
    assert cut.value.seen == 5000 and cut.value.head.startswith(b"xxx")

    async def never(request):
        await asyncio.sleep(30)

    with pytest.raises(TimeoutError):
        run(against(never, timeout_s=0.3))


def test_a_gzip_bomb_and_endless_headers_cost_the_bound_not_what_the_server_sends():
    bomb = gzip.compress(b"a" * (100 * 1024 * 1024), compresslevel=9)
    endless = [b"HTTP/1.1 200 OK\r\n"] + [b"X-Pad: " + b"p" * 1000 + b"\r\n"] * 2000

    async def go(answer, expected):
        async with Server(answer) as server:
            client = pool(server)
            tracemalloc.start()
            try:
                with pytest.raises(expected) as error:
                    await client.request("GET", "/", limit=1 << 20)
                return error.value, tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
                await client.close()

    cut, peak = run(go(lambda r: ok(bomb, "200 OK", "Content-Encoding: gzip"), TooLarge))
    assert cut.seen > 1 << 20 and peak < 20 * 1024 * 1024, peak
    refused, peak = run(go(lambda r: endless, NotHttp))
    assert f"{MAX_HEADER_BYTES:,}" in str(refused) and peak < 10 * 1024 * 1024, peak


def test_a_session_id_never_splits_the_request_line_and_a_header_that_would_is_refused():
    async def go():
        async with Server(lambda r: ok()) as server:
            client = pool(server)
            await client.request("POST", "/v1/sessions/a b\r\nX-Evil: 1/turns", b"{}", limit=100)
            await client.close()
            return server.requests

    (request,) = run(go())
    assert request.startswith(b"POST /v1/sessions/a%20b%0D%0AX-Evil:%201/turns HTTP/1.1\r\n")
    assert b"\r\nX-Evil" not in request
    with pytest.raises(ValueError, match="line break"):
        Pool("http://127.0.0.1:1", timeout_s=1, keepalive_s=1, headers={"X-Key": "a\r\nX-Evil: 1"})
    with pytest.raises(ValueError, match="not an http"):
        Pool("ftp://127.0.0.1:1", timeout_s=1, keepalive_s=1)


def test_a_request_cancelled_or_timed_out_leaves_no_connection_behind_to_read_its_late_answer():
    async def late_then_fast(request):
        if len(served) == 0:
            served.append(1)
            await asyncio.sleep(0.5)
            return ok(b"late")
        return ok(b"fresh")

    served: list[int] = []

    async def go():
        async with Server(late_then_fast) as server:
            client = pool(server, connections=1)
            with pytest.raises(TimeoutError):
                await client.request("GET", "/", limit=100, timeout_s=0.1)
            answer = await client.request("GET", "/", limit=100)
            await client.close()
            return answer.body, server.connections

    body, connections = run(go())
    assert body == b"fresh" and connections == 2


def test_an_interim_100_answer_is_passed_over_for_the_real_one():
    async def go():
        async with Server(lambda r: [b"HTTP/1.1 100 Continue\r\n\r\n", ok(b"real")]) as server:
            client = pool(server)
            answer = await client.request("POST", "/", b"{}", limit=100)
            await client.close()
            return answer.status, answer.body

    assert run(go()) == (200, b"real")


def self_signed(folder) -> tuple:
    """A certificate for 127.0.0.1 that nobody vouches for, made by openssl in `folder`: (its
    file, a server's TLS context serving it)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                           "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                           "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True)
    assert made.returncode == 0, made.stderr
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return cert, context


def test_tls_verifies_the_certificate_by_the_system_s_trust(tmp_path, monkeypatch):
    cert, context = self_signed(tmp_path)

    async def go():
        async with Server(lambda r: ok(b"secure"), ssl_context=context) as server:
            client = Pool(server.url("https"), timeout_s=5, keepalive_s=5)
            try:
                return (await client.request("GET", "/", limit=100)).body
            finally:
                await client.close()

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED|certificate"):
        run(go())                       # a certificate nobody vouches for is refused
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert os.environ["SSL_CERT_FILE"] == str(cert)
    assert run(go()) == b"secure"       # trusted, it is spoken to


def test_a_user_and_password_in_the_address_are_sent_as_basic_auth_and_a_header_given_wins():
    async def go(url_of, **kw):
        async with Server(lambda r: ok()) as server:
            client = Pool(url_of(server), timeout_s=5, keepalive_s=5, **kw)
            await client.request("GET", "/x", limit=100)
            await client.close()
            return server.requests[0]

    sent = run(go(lambda s: f"http://me:p%40ss@127.0.0.1:{s.port}/v1"))
    assert sent.startswith(b"GET /v1/x HTTP/1.1\r\n")
    assert b"Authorization: Basic bWU6cEBzcw==\r\n" in sent and b"Host: 127.0.0.1:" in sent   # me:p@ss
    given = run(go(lambda s: f"http://me:x@127.0.0.1:{s.port}", headers={"authorization": "Bearer k"}))
    assert b"authorization: Bearer k\r\n" in given and b"Basic" not in given


async def _tunnel_proxy(seen: list[bytes], answer: bytes = b"HTTP/1.1 200 Connection established\r\n\r\n"):
    """A CONNECT proxy on 127.0.0.1: records what it is asked, answers `answer`, and (on 200)
    pipes the bytes both ways to the address asked for."""
    async def pipe(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def serve(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head)
        writer.write(answer)
        if not answer.startswith(b"HTTP/1.1 200"):
            writer.close()
            return
        host, port = head.split(b" ")[1].decode().rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return await asyncio.start_server(serve, "127.0.0.1", 0)


def test_https_through_a_proxy_is_a_connect_tunnel_with_tls_end_to_end(tmp_path, monkeypatch):
    cert, context = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    seen: list[bytes] = []

    async def go(answer: bytes | None = None):
        async with Server(lambda r: ok(b"secure"), ssl_context=context) as server:
            proxy = await (_tunnel_proxy(seen) if answer is None else _tunnel_proxy(seen, answer))
            port = proxy.sockets[0].getsockname()[1]
            client = Pool(server.url("https") + "/v1", timeout_s=5, keepalive_s=5,
                          proxy=f"http://me:pw@127.0.0.1:{port}")
            try:
                first = await client.request("POST", "/x", b"{}", limit=100)
                second = await client.request("POST", "/x", b"{}", limit=100)
                return first.body, second.body, server.requests, server.connections
            finally:
                await client.close()
                proxy.close()

    first, second, requests, connections = run(go())
    assert (first, second) == (b"secure", b"secure") and connections == 1    # one tunnel, kept alive
    assert seen[0].startswith(b"CONNECT 127.0.0.1:") and b"Proxy-Authorization: Basic bWU6cHc=" in seen[0]
    assert all(r.startswith(b"POST /v1/x HTTP/1.1") and b"Proxy-Authorization" not in r for r in requests)
    with pytest.raises(ConnectFailed, match="through the proxy .* refused the tunnel: 'HTTP/1.1 407"):
        run(go(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n"))


def test_a_proxy_that_is_not_http_is_said_at_once():
    with pytest.raises(ValueError, match="not an http:// address"):
        Pool("http://model.local/v1", timeout_s=5, keepalive_s=5, proxy="socks5://127.0.0.1:1080")


def test_a_request_s_own_headers_go_with_it_alone_and_replace_the_pool_s_of_the_same_name():
    async def go():
        async with Server(lambda r: ok()) as server:
            client = pool(server, headers={"X-Key": "k", "Accept": "application/json"})
            await client.request("POST", "/t", b"{}", limit=100, headers={"x-simrun-session": "s1", "x-key": "k2"})
            await client.request("GET", "/s", limit=100)
            await client.close()
            return server.requests

    first, second = run(go())
    assert b"x-simrun-session: s1\r\n" in first and b"x-key: k2\r\n" in first and b"X-Key" not in first
    assert b"Accept: application/json\r\n" in first
    assert b"X-Key: k\r\n" in second and b"simrun-session" not in second
    with pytest.raises(ValueError, match="line break"):
        run(Pool("http://127.0.0.1:1", timeout_s=1, keepalive_s=1).request(
            "GET", "/", limit=10, headers={"traceparent": "x\r\nInjected: 1"}))


def test_the_client_keeps_a_pool_for_each_server_and_sends_by_absolute_url():
    """The chat and template transports send by URL: a turn endpoint and a state hook may be two
    servers. Each gets its own keep-alive connections, and the query string is sent as it is."""
    async def go():
        async with Server(lambda r: ok(b"a")) as one, Server(lambda r: ok(b"b")) as two:
            client = Client(timeout_s=5, keepalive_s=5, connections=2, headers={"Authorization": "Bearer k"})
            answers = []
            for _ in range(3):
                answers.append(await client.request("POST", f"{one.url()}/v1/chat?x=1&y=%20", b"{}", limit=10))
                answers.append(await client.request("GET", f"{two.url()}/state/s1", limit=10))
            await client.close()
            with pytest.raises(ConnectFailed, match="closed"):
                await client.request("GET", f"{one.url()}/", limit=10)
            return answers, one, two

    answers, one, two = run(go())
    assert [a.body for a in answers] == [b"a", b"b"] * 3
    assert one.connections == two.connections == 1       # reused, each server its own
    assert one.requests[0].startswith(b"POST /v1/chat?x=1&y=%20 HTTP/1.1\r\n")
    assert two.requests[0].startswith(b"GET /state/s1 HTTP/1.1\r\n")
    assert all(b"Authorization: Bearer k\r\n" in r and b"User-Agent: simrun/" in r for r in one.requests + two.requests)

    async def given_agent():
        async with Server(lambda r: ok()) as server:
            client = Client(timeout_s=5, keepalive_s=5, headers={"user-agent": "team-bot/2"})
            await client.request("GET", f"{server.url()}/", limit=100)
            await client.close()
            return server.requests[0]

    sent = run(given_agent())
    assert b"user-agent: team-bot/2\r\n" in sent and b"simrun/" not in sent


@pytest.mark.parametrize("url", ["ftp://example.com/x", "example.com:8000/chat", "http:///nohost"])
def test_an_address_the_client_cannot_send_to_is_refused_before_anything_is_sent(url):
    with pytest.raises(ValueError, match="not an http:// or https:// address"):
        Client(timeout_s=1, keepalive_s=1).check(url)


def test_a_header_that_cannot_be_sent_is_refused_when_the_client_is_made():
    with pytest.raises(ValueError, match="line break"):
        Client(timeout_s=1, keepalive_s=1, headers={"X-Key": "k\nInjected: 1"})
