"""simrun's one HTTP client: asyncio's transports and httptools' parser, nothing more.

Every plain HTTP request simrun makes goes through this module (tests/simulator/test_one_client.py
holds it to that): the http transport's, the chat and template transports' (`Client`, for
absolute URLs: a turn endpoint and a state hook may be different servers), and the light path for
OpenAI-compatible model servers (simulator/users/_wire.py). The SDKs' own clients are theirs.

simrun's requests are few kinds, all alike: a JSON body it has already serialised, sent to one
server, an answer read whole into bytes. At a fast model the general clients cost more CPU than
everything else per request. Measured side by side for the runtime's request pattern (a POST and
a GET on keep-alive connections, 64 in flight; `benchmarks/http_clients.py`, issue 43, three
sittings on a loaded machine): this client 22-34 µs of this process's CPU a request, aiohttp (one
shared session, its C parser) 108-162, 4-5x as much, httpx about 2,000; at three or four requests
a model call, aiohttp would cost 0.3-0.5 ms more of the harness's 1.2 ms a call. What they do
that simrun needs is done here, and bounded for a server that may be hostile:

- one pool per server, its size a limit (the calls in flight), idle connections reused newest
  first and dropped once idle longer than `keepalive_s` (shorter than the server's own keep-alive,
  so that simrun never sends on a connection the server is closing);
- a connection that carried a 5xx answer is never reused: a server that fails inside a request
  often closes the connection right after its error answer without saying so (Starlette under
  uvicorn does), and the next request on it would be lost;
- the answer's body counted as it arrives, after decoding gzip or deflate, and cut at `limit`
  (`TooLarge`, with its first bytes); headers held to `MAX_HEADER_BYTES`;
- one deadline for the whole request (waiting for a connection, connecting, sending, reading);
- errors that say what happened: the server could not be reached (`ConnectFailed`: the request
  never left), it closed the connection without a whole answer (`Disconnected`), or what it said
  is not HTTP (`NotHttp`). No redirects are followed, no cookies kept;
- a proxy only when one is given (`proxy=`: the model path resolves the environment's, see
  `simrun.simulator.users._wire.environment_proxy`): an http:// server is asked through it in
  absolute form, an https:// one through a CONNECT tunnel, TLS spoken end to end inside it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import socket
import ssl
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httptools

from simrun._version import __version__

_INFLATE_BLOCK = 256 * 1024
MAX_HEADER_BYTES = 64 * 1024       # aiohttp allows 8,190 per line and 32,768 for all: a little more room
# What a path may hold as it is; anything else is percent-encoded (a session id is the runtime's text).
_PLAIN_PATH = re.compile(r"[A-Za-z0-9/:@!$&'()*+,;=._~%?-]*")


class HttpError(Exception):
    """A request that got no usable answer: the adapters turn each kind into their own fault."""


class ConnectFailed(HttpError):
    """The server could not be reached (refused, unknown host, TLS refused): nothing was sent."""


class Disconnected(HttpError):
    """The server closed the connection before its whole answer arrived."""


class NotHttp(HttpError):
    """What the server sent is not an HTTP/1.x answer (or its headers are beyond the bound)."""


class TooLarge(HttpError):
    """The body, decoded, went past the limit: `seen` bytes or more, `head` its first ones."""

    def __init__(self, seen: int, head: bytes) -> None:
        super().__init__(f"the answer is {seen:,} bytes or more")
        self.seen, self.head = seen, head


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]      # names in lower case; a repeated header's values joined by ", "
    body: bytes


class _Connection(asyncio.Protocol):
    """One keep-alive connection, reading one answer at a time into `waiter`."""

    # Set by `connection_made`, which asyncio calls before `create_connection` hands the
    # connection over: every connection the pool holds or hands out has it.
    transport: asyncio.Transport

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[Answer] | None = None
        self.closed = False
        self.idle_since = 0.0

    def expect(self, waiter: asyncio.Future[Answer], limit: int) -> None:
        self.waiter, self.limit = waiter, limit
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.size = self.header_bytes = 0
        self.headers_done = False
        self.decoder: Any = None
        self.until_eof = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport   # type: ignore[assignment]  # the stub's BaseTransport: a stream gets a Transport

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():
            self.abort()             # nothing was asked: a server that talks out of turn is not reused
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:    # a callback's _Stop comes wrapped in one, its answer failed
            self._fail(NotHttp(f"not an HTTP answer ({type(exc).__name__}: {exc})"))
            return
        if not self.headers_done:       # counted after parsing: a chunk may hold the headers and a body
            self.header_bytes += len(data)
            if self.header_bytes > MAX_HEADER_BYTES:
                self._fail(NotHttp(f"the answer's headers run past {MAX_HEADER_BYTES:,} bytes"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is None or self.waiter.done():
            return
        if self.headers_done and self.until_eof:   # a body without a length ends with the connection
            self.on_message_complete()
        else:
            said = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
            self.waiter.set_exception(Disconnected(
                "the server closed the connection " + ("in the middle of its answer" if self.headers_done
                                                        else "without answering") + said))

    # httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        self.headers_done = True
        encoding = self.headers.get("content-encoding", "").strip().lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            # wbits 47: a gzip or a zlib header, told apart by the decoder itself.
            self.decoder = zlib.decompressobj(47)
        self.until_eof = "content-length" not in self.headers and "chunked" not in \
            self.headers.get("transfer-encoding", "").lower()

    def on_body(self, body: bytes) -> None:
        if self.decoder is None:
            self._take(body)
            return
        while body:
            try:
                # Inflated a block at a time (zlib's output for one call is held twice while it is
                # made), and at most one byte past the limit: a bomb costs the limit, no more.
                piece = self.decoder.decompress(body, min(_INFLATE_BLOCK, self.limit + 1 - self.size))
            except zlib.error as exc:
                self._fail(NotHttp(f"the body does not decode as {self.headers['content-encoding']} ({exc})"))
                raise _Stop from None
            self._take(piece)
            body = self.decoder.unconsumed_tail

    def _take(self, body: bytes) -> None:
        self.chunks.append(body)
        self.size += len(body)
        if self.size > self.limit:
            declared = 0 if self.decoder is not None else _int(self.headers.get("content-length"))
            head = b""          # the first bytes, without joining what is past the limit (twice its memory)
            for chunk in self.chunks:
                head += chunk[:4096 - len(head)]
                if len(head) >= 4096:
                    break
            self.chunks.clear()
            self._fail(TooLarge(max(self.size, declared), head))
            raise _Stop

    def on_message_complete(self) -> None:
        if self.waiter is None or self.waiter.done():
            return
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:    # an interim answer: the real one follows
            self.expect(self.waiter, self.limit)
            return
        body = b"".join(self.chunks)
        if self.decoder is not None:
            body += self.decoder.flush()
        if status >= 500 or not self.parser.should_keep_alive():
            self.abort()
        self.waiter.set_result(Answer(status, self.headers, body))

    def _fail(self, error: HttpError) -> None:
        self.abort()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(error)

    def abort(self) -> None:
        self.closed = True
        self.transport.abort()


class _Stop(Exception):
    """Raised from a parser callback to stop reading: the answer has already failed."""


def _int(text: str | None) -> int:
    try:
        return int(text) if text is not None else 0
    except ValueError:
        return 0


def _plain(name: str, value: str) -> str:
    if any(c in name + value for c in "\r\n\0") or not name or ":" in name:
        raise ValueError(f"the header {name!r} holds a line break, a NUL or a colon: it cannot be sent")
    return f"{name}: {value}\r\n"


def _merged(base: Mapping[str, str], over: Mapping[str, str]) -> dict[str, str]:
    """`base` and `over`, a name in both (in any case) taking `over`'s value."""
    named = {name.lower() for name in over}
    return {**{name: value for name, value in base.items() if name.lower() not in named}, **over}


class Pool:
    """Requests to one server (`base_url`: scheme, host, port and a path prefix) over at most
    `connections` connections (0: no limit), each request within `timeout_s`."""

    def __init__(self, base_url: str, *, timeout_s: float, keepalive_s: float, connections: int = 0,
                 headers: dict[str, str] | None = None, proxy: str | None = None) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"{base_url!r} is not an http:// or https:// address")
        self.host, self.tls = url.hostname, url.scheme == "https"
        self.port = url.port or (443 if self.tls else 80)
        self.prefix = url.path.rstrip("/")
        self.proxy: tuple[str, int] | None = None
        proxy_head = ""
        if proxy:
            via = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            if via.scheme != "http" or not via.hostname:
                raise ValueError(f"the proxy {proxy!r} is not an http:// address (the only kind simrun speaks to)")
            self.proxy = (via.hostname, via.port or 80)
            if via.username is not None:
                pair = f"{unquote(via.username)}:{unquote(via.password or '')}".encode()
                proxy_head = _plain("Proxy-Authorization", "Basic " + base64.b64encode(pair).decode())
            if not self.tls:     # a plain request names its whole address to the proxy
                self.prefix = f"http://{self.host}:{self.port}{self.prefix}"
        # What a CONNECT tunnel is asked with (https through a proxy); a plain request carries
        # the proxy's credentials itself.
        self._connect = (f"CONNECT {self.host}:{self.port} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                         f"{proxy_head}\r\n").encode() if self.proxy and self.tls else b""
        self.timeout_s, self.keepalive_s, self.connections = timeout_s, keepalive_s, connections
        given = {"Host": url.netloc.rsplit("@", 1)[-1]}
        if url.username is not None:     # user:password@ in the address is Basic auth, as aiohttp sent it
            pair = f"{unquote(url.username)}:{unquote(url.password or '')}".encode()
            given["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        self._headers = _merged(given, headers or {})     # theirs win
        self._proxy_head = proxy_head if self.proxy and not self.tls else ""
        self._head = "".join(_plain(name, value) for name, value in self._headers.items()) + self._proxy_head
        self._idle: list[_Connection] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._ssl: ssl.SSLContext | None = None
        self.closed = False

    async def request(self, method: str, path: str, body: bytes | None = None, *, limit: int,
                      content_type: str = "application/json", timeout_s: float | None = None,
                      headers: Mapping[str, str] | None = None) -> Answer:
        """The answer to `method path` (the pool's prefix before it), whatever its status;
        `headers`: this request's own, beside the pool's (a name in both: this request's value)."""
        if self.closed:
            raise ConnectFailed("the client is closed")
        if not _PLAIN_PATH.fullmatch(path):
            path = quote(path, safe="/:@!$&'()*+,;=._~%?-")
        own = self._head if not headers else "".join(
            _plain(name, value) for name, value in _merged(self._headers, headers).items()) + self._proxy_head
        head = f"{method} {self.prefix}{path} HTTP/1.1\r\n{own}"
        if body is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        message = (head + "\r\n").encode("utf-8") + (body or b"")
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.timeout_s if timeout_s is None else timeout_s):
            async with self._slot(loop):
                connection = await self._connection(loop)
                waiter: asyncio.Future[Answer] = loop.create_future()
                connection.expect(waiter, limit)
                try:
                    connection.transport.write(message)
                    answer = await waiter
                except BaseException:
                    connection.abort()     # cancelled or timed out mid-answer: the rest is never read
                    raise
                finally:
                    connection.waiter = None
                if not connection.closed:
                    connection.idle_since = loop.time()
                    self._idle.append(connection)
                return answer

    def _slot(self, loop: asyncio.AbstractEventLoop) -> asyncio.Semaphore | contextlib.nullcontext[None]:
        if self._loop is not loop:       # a client may serve several event loops, one after another
            for connection in self._idle:
                connection.abort()
            self._idle.clear()
            self._loop = loop
            self._slots = asyncio.Semaphore(self.connections) if self.connections > 0 else None
        return self._slots if self._slots is not None else contextlib.nullcontext()

    async def _connection(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        now = loop.time()
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed and now - connection.idle_since < self.keepalive_s:
                return connection
            connection.abort()
        if self.tls and self._ssl is None:
            self._ssl = ssl.create_default_context()
        context, name = (self._ssl, self.host) if self.tls else (None, None)
        try:
            if self._connect:
                sock = await self._tunnel(loop)
                _, connection = await loop.create_connection(_Connection, sock=sock, ssl=context, server_hostname=name)
            else:
                host, port = self.proxy or (self.host, self.port)
                _, connection = await loop.create_connection(_Connection, host, port, ssl=context,
                                                             server_hostname=name)
        except OSError as exc:      # refused, unreachable, unknown host, a certificate refused
            where = f"{self.host}:{self.port}" + (f" through the proxy {self.proxy[0]}:{self.proxy[1]}"
                                                  if self.proxy else "")
            raise ConnectFailed(f"cannot connect to {where} ({type(exc).__name__}: {exc})") from None
        return connection

    async def _tunnel(self, loop: asyncio.AbstractEventLoop) -> socket.socket:
        """A socket to the proxy, through which CONNECT has opened a tunnel to the server."""
        assert self.proxy is not None
        (family, kind, proto, _, address), *_ = await loop.getaddrinfo(*self.proxy, type=socket.SOCK_STREAM)
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, address)
            await loop.sock_sendall(sock, self._connect)
            said = b""
            while b"\r\n\r\n" not in said:     # the proxy's answer; the tunnel's bytes follow it, none before
                chunk = await loop.sock_recv(sock, 1)
                if not chunk or len(said) > MAX_HEADER_BYTES:
                    raise OSError("the proxy closed the connection (or went past the bound) before answering CONNECT")
                said += chunk
            status = said.split(b"\r\n", 1)[0].decode("latin-1")
            if status.split(" ")[1:2] != ["200"]:
                raise OSError(f"the proxy refused the tunnel: {status!r}")
        except BaseException:
            sock.close()
            raise
        return sock

    async def close(self) -> None:
        self.closed = True
        for connection in self._idle:
            connection.abort()
        self._idle.clear()



class Client:
    """Requests by absolute URL, to any number of servers: one `Pool` for each origin (scheme,
    credentials, host and port), each of at most `connections` connections, made when first
    asked. The chat and template transports use it: a turn endpoint and a state hook may be
    different servers. `headers` go with every request, after a `User-Agent` of simrun's (what the
    general clients send, and some gateways refuse a request without; a given one wins); a header
    or an address that cannot be sent is refused with a ValueError (`check`), before anything is sent."""

    def __init__(self, *, timeout_s: float, keepalive_s: float, connections: int = 0,
                 headers: Mapping[str, str] | None = None) -> None:
        self.timeout_s, self.keepalive_s, self.connections = timeout_s, keepalive_s, connections
        self.headers = _merged({"User-Agent": f"simrun/{__version__}"}, headers or {})
        for name, value in self.headers.items():
            _plain(name, value)
        self._pools: dict[str, Pool] = {}
        self.closed = False

    def check(self, url: str) -> None:
        """Refuse now (ValueError) an address no request could be sent to."""
        self._split(url)

    def _split(self, url: str) -> tuple[Pool, str]:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        pool = self._pools.get(origin)
        if pool is None or pool.closed:
            pool = self._pools[origin] = Pool(origin, timeout_s=self.timeout_s, keepalive_s=self.keepalive_s,
                                              connections=self.connections, headers=self.headers)
        return pool, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    async def request(self, method: str, url: str, body: bytes | None = None, *, limit: int,
                      headers: Mapping[str, str] | None = None, timeout_s: float | None = None) -> Answer:
        """The answer to `method url`, whatever its status (see `Pool.request`)."""
        if self.closed:
            raise ConnectFailed("the client is closed")
        pool, target = self._split(url)
        return await pool.request(method, target, body, limit=limit, headers=headers, timeout_s=timeout_s)

    async def close(self) -> None:
        self.closed = True
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.close()
