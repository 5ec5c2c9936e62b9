"""The proxy the environment names is used alike by every model backend: a team behind a corporate
proxy gets both providers working, or neither. A real proxy is started on 127.0.0.1, the fake model
API behind it; the API's address is a name that resolves nowhere (`model.invalid`), so a call
that went around the proxy cannot be answered at all."""

from __future__ import annotations

import asyncio
import threading

import pytest

from simrun.scoring.dataset._files import canonical_json
from simrun.simulator.adapters._process import free_port
from simrun.simulator.users._providers import AnthropicProvider, OpenAIProvider
from simrun.simulator.users._wire import environment_proxy
from tests.fixtures.model_api import FakeModelAPI, serve

KEY = "sk-proxy-test-0123456789"
PROVIDERS = {"openai": (OpenAIProvider, "/v1"), "anthropic": (AnthropicProvider, "")}
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


class Proxy:
    """A forwarding HTTP proxy on 127.0.0.1, in a thread: each request in absolute form is
    recorded (its request line and Proxy-Authorization) and passed to `upstream` in origin form,
    whatever host it names; its answer goes back, and the connection is closed."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.seen: list[str] = []
        self.auth: list[str | None] = []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line, *fields = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields if f)}
            self.seen.append(line)
            self.auth.append(headers.get("proxy-authorization"))
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            method, target, version = line.split(" ")
            path = "/" + target.split("://", 1)[1].split("/", 1)[1]
            kept = "".join(f"{k}: {v}\r\n" for k, v in headers.items()
                           if k not in ("connection", "proxy-authorization", "host"))
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            up_writer.write(f"{method} {path} {version}\r\nHost: 127.0.0.1\r\nConnection: close\r\n{kept}\r\n"
                            .encode("latin-1") + body)
            writer.write(await up_reader.read())
            await writer.drain()
            up_writer.close()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, IndexError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture(scope="module")
def behind_a_proxy():
    port = free_port()
    server = serve(FakeModelAPI(), port)
    proxy = Proxy(port)
    yield proxy
    proxy.close()
    server.should_exit = True


def call(kind: str, base_url: str) -> object:
    provider_cls, _ = PROVIDERS[kind]
    provider = provider_cls("m", base_url=base_url, timeout_s=10)
    request = provider.request("You are a user. ## Your goal\nAdd a bag\n", [{"role": "user", "content": "go"}], 50,
                               {"type": "object", "properties": {"message": {"type": "string"}}})

    async def go():
        try:
            return (await provider.complete(request, canonical_json(request))).answer
        except Exception as exc:
            return exc
        finally:
            await provider.client.close()

    return asyncio.run(go())


@pytest.fixture
def environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


@pytest.mark.parametrize("kind", PROVIDERS)
def test_both_providers_call_through_the_proxy_the_environment_names(behind_a_proxy, environment, kind):
    proxy = behind_a_proxy
    environment.setenv("HTTP_PROXY", f"http://me:s3cret@127.0.0.1:{proxy.port}")
    before = len(proxy.seen)
    answer = call(kind, f"http://model.invalid:8080{PROVIDERS[kind][1]}")
    assert not isinstance(answer, Exception), repr(answer)
    path = "/v1/chat/completions" if kind == "openai" else "/v1/messages"
    assert proxy.seen[before:] == [f"POST http://model.invalid:8080{path} HTTP/1.1"]
    assert proxy.auth[-1] == "Basic bWU6czNjcmV0"      # me:s3cret, the proxy's own credentials


@pytest.mark.parametrize("kind", PROVIDERS)
def test_no_proxy_sends_both_providers_around_it(behind_a_proxy, environment, kind):
    proxy = behind_a_proxy
    environment.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    environment.setenv("NO_PROXY", "localhost,.invalid")
    before = len(proxy.seen)
    answer = call(kind, f"http://model.invalid:8080{PROVIDERS[kind][1]}")
    assert isinstance(answer, Exception)          # straight to a name that resolves nowhere
    assert proxy.seen[before:] == []


@pytest.mark.parametrize(("url", "no_proxy", "expected"), [
    ("https://api.openai.com/v1", "", "http://p:1"),
    ("https://api.openai.com/v1", "openai.com", None),
    ("https://api.openai.com/v1", ".openai.com", None),
    ("https://api.openai.com/v1", "penai.com", "http://p:1"),
    ("http://10.1.2.3:8000/v1", "10.0.0.0/8", None),
    ("http://10.1.2.3:8000/v1", "10.1.2.3:9000", "http://p:1"),
    ("http://10.1.2.3:8000/v1", "10.1.2.3:8000", None),
    ("http://[::1]:8000/v1", "::1", None),
    ("http://anything/v1", "*", None),
])
def test_the_proxy_for_an_address_follows_the_environment(environment, url, no_proxy, expected):
    environment.setenv("HTTP_PROXY", "http://p:1")
    environment.setenv("HTTPS_PROXY", "http://p:1")
    environment.setenv("NO_PROXY", no_proxy)
    assert environment_proxy(url) == expected


def test_the_proxy_s_password_is_a_secret_once_it_is_used(environment):
    from simrun import _secrets as secrets

    environment.setenv("HTTPS_PROXY", "http://me:proxy-pass-0123456789@p:1")
    environment_proxy("https://api.openai.com/v1")
    assert "proxy-pass-0123456789" not in secrets.cut("failed through me:proxy-pass-0123456789@p:1", 200)
