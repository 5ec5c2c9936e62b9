"""Secrets simrun must never write down: registered once, cut out of all it stores or prints.

A runtime may echo what it was sent (an Authorization header in a 500 body, a token in its
stderr), so keeping secrets out of `runs.config` is not enough. Whatever simrun learns is a
secret is registered here (header values from `--header`, every `${VAR}` it expands, sensitive
header values in simrun.toml, the model API keys, a password in a runtime URL), and every string
bound for the DuckDB file, the console or an error line goes through `redact`. The report and
`simrun show` read the database, so they never see what it never held.

Each secret is searched for as it is, JSON-escaped and URL-encoded, and so is each of its
whitespace-separated parts ("Bearer <token>" also hides a bare "<token>"). Values shorter than
MIN_CHARS are not registered: they cannot be told apart from ordinary text, and cutting every
"1234" out of a transcript would destroy the evidence.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import urllib.parse
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
MIN_CHARS = 8
SENSITIVE_HEADER = re.compile(r"auth|cookie|token|key|secret|passw|session|credential", re.I)

_lock = threading.Lock()
_known: set[str] = set()
_values: list[str] = []      # as registered: what another process must register to know the same
_pattern: re.Pattern[str] | None = None


def register(value: str | None) -> None:
    """Treat `value` (and its parts) as a secret from now on, in this process."""
    global _pattern
    if not value:
        return
    forms = set()
    for part in {value.strip(), *value.split()}:
        if len(part) >= MIN_CHARS:
            forms |= {part, json.dumps(part)[1:-1], urllib.parse.quote(part, safe=""), urllib.parse.quote_plus(part)}
    with _lock:
        if forms <= _known:
            return
        _values.append(value)
        _known.update(forms)
        # Longest first, so that a secret is cut whole before a part of it is.
        _pattern = re.compile("|".join(re.escape(f) for f in sorted(_known, key=len, reverse=True)))


def forget_all() -> None:
    """For tests: a process that starts again knows no secret."""
    global _pattern
    with _lock:
        _known.clear()
        _values.clear()
        _pattern = None


def registered() -> list[str]:
    """Every secret registered in this process, as it was registered: a Ray worker is given them,
    so that it cuts out of what it says the same secrets this process would."""
    with _lock:
        return list(_values)


def longest() -> int:
    """The length of the longest form of a secret known: how far past a cut one may reach."""
    with _lock:
        return max(map(len, _known), default=0)


def active() -> bool:
    """Whether any secret is known (when none is, nothing needs to be searched)."""
    return _pattern is not None


def redact(text: str) -> str:
    pattern = _pattern
    if pattern is None or not isinstance(text, str):
        return text
    return pattern.sub(REDACTED, text)


def found_in(texts: Iterable[str]) -> bool:
    """Whether a secret occurs in any of `texts`: one search over them joined, rather than one
    per string (a store batch holds tens of thousands of strings, and almost never a secret).
    They are joined with a NUL, which no secret holds, so no match spans two of them."""
    pattern = _pattern
    if pattern is None:
        return False
    if any("\x00" in form for form in _known):      # never in practice; then one search each
        return any(pattern.search(text) for text in texts)
    return pattern.search("\x00".join(texts)) is not None


def redact_value(value: Any) -> Any:
    """A JSON-like value with every string in it (keys too) redacted."""
    if _pattern is None:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def register_header(name: str, value: str, *, from_flag: bool = False) -> None:
    """A header value is a secret when it came from a flag (`--header`), or when its name says
    it is one (Authorization, X-Api-Key, Cookie, ...). Basic credentials are secrets decoded too."""
    if from_flag or SENSITIVE_HEADER.search(name):
        register(value)
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return
            username, colon, password = decoded.partition(":")
            if colon:
                register_basic(username, password)


def register_url(url: str | None) -> None:
    """The password of `http://user:password@host`, if the URL has one, as written and as sent."""
    if url:
        parts = urllib.parse.urlsplit(url)
        if parts.password:
            register(parts.password)
            register_basic(urllib.parse.unquote(parts.username or ""), urllib.parse.unquote(parts.password))


def register_basic(username: str, password: str) -> None:
    """Basic credentials in every form they travel: the password, the `user:password` pair, and
    the header's base64 of it (what simrun sends for a URL's `user:password@`, and what a runtime
    that echoes its headers writes back)."""
    pair = f"{username}:{password}"
    register(password)
    register(pair)
    register(base64.b64encode(pair.encode("utf-8")).decode("ascii"))


def cut(text: str, limit: int) -> str:
    """The first `limit` characters of `text` once every secret in all of it is cut out: redact,
    then cut, never the other way round, or a secret that straddles the cut would be kept in
    part (and a part no longer matches the secret it came from). Reads only as far as needed."""
    pattern = _pattern
    if pattern is None:
        return text[:limit]
    parts, size, pos = [], 0, 0
    for match in pattern.finditer(text):
        parts.append(text[pos:match.start()])
        parts.append(REDACTED)
        size += match.start() - pos + len(REDACTED)
        pos = match.end()
        if size >= limit:
            break
    else:
        parts.append(text[pos:])
    return "".join(parts)[:limit]


def tail(text: str, limit: int) -> str:
    """The last `limit` characters of `text` once every secret in all of it is cut out."""
    return redact(text)[-limit:] if limit > 0 else ""
