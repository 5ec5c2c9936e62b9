"""One client for plain HTTP (issue 43): every plain request simrun makes goes through
simulator/_http1.py. The http, chat and template transports and the light path for OpenAI-compatible
model servers all send through it; no other module of simrun's imports an HTTP client library.

The rule is held by a check over simrun's code (simrun/, simulator/, scoring/), which fails when a
module other than the client imports an HTTP client (aiohttp's client, httpx, httptools, requests,
urllib3, http.client, urllib.request's openers), by statement or by importlib. What is not a plain
request is named with its reason: a server (aiohttp.web), the environment's proxy settings
(urllib.request.getproxies, which sends nothing), and the model SDKs' own clients (a client is
given to the Anthropic SDK through its documented `http_client=`, built from httpx2 types).
"""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT
from tests.fixtures.sources import product_sources

THE_CLIENT = "simrun/simulator/_http1.py"
CLIENT_LIBRARIES = ("aiohttp", "httpx", "httpx2", "httpcore", "httptools", "h11", "requests", "urllib3",
                    "pycurl", "http.client", "urllib.request")
# Parts of those that send no request: aiohttp's server, and urllib's reading of the environment.
NOT_A_REQUEST = {"aiohttp.web", "urllib.request.getproxies", "urllib.request.proxy_bypass"}
# Modules that use a client library for what is not simrun's own plain request, and why.
ALLOWED = {
    THE_CLIENT: {"httptools"},                       # the one client: its parser
    # The Anthropic SDK's own client, given to it through its documented `http_client=` (issue 43,
    # part 1): the SDK's request path, not a plain request of simrun's.
    "simrun/simulator/users/_bounded.py": {"httpx2"},
}


def _library(name: str) -> str | None:
    """The client library `name` (a module, or a module's attribute, dotted) belongs to, if any."""
    if any(name == part or name.startswith(part + ".") for part in NOT_A_REQUEST):
        return None
    return next((lib for lib in CLIENT_LIBRARIES if name == lib or name.startswith(lib + ".")), None)


def plain_http_uses(source: str) -> list[tuple[int, str]]:
    """(line, library) for each use of an HTTP client library in `source`."""
    found: list[tuple[int, str]] = []
    modules: dict[str, str] = {}       # a name an `import` binds -> the module it names
    tree = ast.parse(source)
    inner: set[int] = set()            # attributes that are part of a longer chain

    def note(node: ast.AST, name: str) -> None:
        library = _library(name)
        if library is not None:
            found.append((getattr(node, "lineno", 0), library))

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            inner.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is None and "." in alias.name:
                    # `import urllib.request` binds `urllib`: what is read through it is checked below.
                    modules[alias.name.split(".")[0]] = alias.name.split(".")[0]
                    if _library(alias.name) != "urllib.request":
                        note(node, alias.name)
                else:
                    modules[alias.asname or alias.name] = alias.name
                    note(node, alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                note(node, f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            parts: list[str] = []
            value: ast.AST = node
            while isinstance(value, ast.Attribute):
                parts.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules:
                note(node, ".".join([modules[value.id], *parts]))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            if name in ("import_module", "__import__"):
                note(node, node.args[0].value)
    return sorted(set(found))


def _sources() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in product_sources()}


def test_only_the_one_client_sends_plain_http():
    sources = _sources()
    assert THE_CLIENT in sources and "simrun/simulator/adapters/_template.py" in sources
    wrong = {path: uses for path, source in sources.items()
             if (uses := [(line, lib) for line, lib in plain_http_uses(source)
                          if lib not in ALLOWED.get(path, set())])}
    assert not wrong, ("plain HTTP around simrun's one client (simulator/_http1.py): send it through "
                       f"`Pool` or `Client` there: {wrong}")


def test_each_transport_and_the_model_light_path_send_through_the_one_client():
    """The modules that make simrun's plain requests each import the client, and nothing else does it for them."""
    sources = _sources()
    for path in ("simrun/simulator/adapters/_http.py", "simrun/simulator/adapters/_template.py",
                 "simrun/simulator/users/_wire.py"):
        assert "from simrun.simulator._http1 import" in sources[path], path


@pytest.mark.parametrize("source, expected", [
    ("import aiohttp\n", ["aiohttp"]),
    ("from aiohttp import ClientSession\n", ["aiohttp"]),
    ("import aiohttp.web\naiohttp.ClientSession()\n", ["aiohttp"]),
    ("import httpx as h\n", ["httpx"]),
    ("from httpx import AsyncClient\n", ["httpx"]),
    ("import http.client\n", ["http.client"]),
    ("from urllib.request import urlopen\n", ["urllib.request"]),
    ("from urllib import request\n", ["urllib.request"]),
    ("import urllib.request\nurllib.request.urlopen('http://x')\n", ["urllib.request"]),
    ("import importlib\nimportlib.import_module('requests')\n", ["requests"]),
    ("__import__('urllib3')\n", ["urllib3"]),
    ("import httptools\n", ["httptools"]),
    # Not a plain request: a server, the environment's proxies, a name that only looks alike.
    ("from aiohttp import web\n", []),
    ("import aiohttp.web\nweb = aiohttp.web\n", []),
    ("import urllib.request\nurllib.request.getproxies()\n", []),
    ("import urllib.parse\nurllib.parse.quote('x')\n", []),
    ("import httpx_sse_helpers_not_a_client\n", []),
    ("from simrun.simulator._http1 import Client\n", []),
])
def test_the_check_finds_a_planted_client_and_passes_what_sends_nothing(source, expected):
    assert [library for _, library in plain_http_uses(source)] == expected
