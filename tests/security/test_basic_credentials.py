"""Basic credentials are secrets in every form they travel: a runtime URL's `user:password@`
is sent as an Authorization header of base64, which a runtime that echoes its headers writes
back; a `Basic` header given in simrun.toml or by flag may be echoed decoded."""

from __future__ import annotations

import base64

import pytest

from simrun import _secrets as secrets
from simrun.simulator._http1 import Pool


@pytest.fixture(autouse=True)
def no_secrets():
    secrets.forget_all()
    yield
    secrets.forget_all()


def _sent_authorization(url: str) -> str:
    """The Authorization header simrun's HTTP client sends for `url`."""
    head = Pool(url, timeout_s=1, keepalive_s=1)._head
    return next(line.split(": ", 1)[1] for line in head.split("\r\n") if line.lower().startswith("authorization"))


@pytest.mark.parametrize("url, password", [("http://alice:pa%24%24word-123@runtime.internal:8080/v1", "pa$$word-123"),
                                           ("https://svc:Zx9-long-secret@10.0.0.7/", "Zx9-long-secret")])
def test_a_url_password_is_cut_in_every_form_it_travels(url, password):
    secrets.register_url(url)
    sent = _sent_authorization(url)
    user = url.split("//", 1)[1].split(":", 1)[0]
    echoes = [sent, sent.split()[1], password, f"{user}:{password}", url.split("//", 1)[1].split("@")[0].split(":")[1]]
    for echo in echoes:
        text = f"the runtime said: you sent {echo} (denied)"
        assert echo not in secrets.redact(text) and secrets.REDACTED in secrets.redact(text), echo


def test_a_basic_header_is_cut_decoded_too():
    token = base64.b64encode(b"ops-bot:hunter2-but-longer").decode()
    secrets.register_header("Authorization", f"Basic {token}")
    for echo in (token, "hunter2-but-longer", "ops-bot:hunter2-but-longer"):
        assert echo not in secrets.redact(f"401 for {echo}"), echo
    assert secrets.redact("ops-bot asked") == "ops-bot asked"          # a user name is no secret


@pytest.mark.parametrize("value", ["Basic not-base64!!", "Basic " + base64.b64encode(b"\xff\xfe").decode(),
                                   "Basic " + base64.b64encode(b"no colon here").decode()])
def test_a_basic_header_that_decodes_to_no_pair_is_kept_as_it_is(value):
    secrets.register_header("Authorization", value)
    assert secrets.redact(f"echo {value}") == f"echo {secrets.REDACTED}"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_user_model_server_s_url_password_is_a_secret(provider, monkeypatch):
    """The user model's server (run.user_base_url, OPENAI_BASE_URL, ANTHROPIC_BASE_URL) may carry
    credentials too; an error body that echoes the Basic header is cut like the runtime's."""
    from simrun.simulator.users._providers import AnthropicProvider, OpenAIProvider

    monkeypatch.setenv("OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY", "not-a-real-key-000")
    url = "http://carol:model-server-pw-42@127.0.0.1:9/v1"
    (OpenAIProvider if provider == "openai" else AnthropicProvider)("m", base_url=url)
    sent = base64.b64encode(b"carol:model-server-pw-42").decode()
    for echo in (sent, "model-server-pw-42"):
        assert echo not in secrets.redact(f"401: bad credentials Basic {echo}"), echo
