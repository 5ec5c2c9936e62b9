"""The pages' Jinja environment keeps what it compiled across processes, and a cache it cannot
use costs only the compilation, never the page."""

from __future__ import annotations

import os
import tempfile

from jinja2 import DictLoader, Environment

from simrun.scoring.pages import _render as render


def _env(cache) -> Environment:
    return Environment(loader=DictLoader({"page.html": "<p>{{ n }} runs</p>"}), bytecode_cache=cache)


def test_a_template_compiled_once_is_read_back_by_the_next_process(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert _env(render._bytecode_cache()).get_template("page.html").render(n=3) == "<p>3 runs</p>"
    cached = list((tmp_path / f"_jinja2-cache-{os.getuid()}").iterdir())
    assert len(cached) == 1
    # Another process: a new cache over the same folder, and nothing to compile.
    second = _env(render._bytecode_cache())
    monkeypatch.setattr(second, "compile", lambda *a, **k: (_ for _ in ()).throw(AssertionError("compiled")))
    assert second.get_template("page.html").render(n=4) == "<p>4 runs</p>"

def test_a_cache_folder_that_is_not_the_user_s_own_is_not_used(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / f"_jinja2-cache-{os.getuid()}").write_text("not a folder")
    assert render._bytecode_cache() is None
    assert _env(None).get_template("page.html").render(n=1) == "<p>1 runs</p>"


def test_a_cache_file_that_cannot_be_written_costs_only_the_compilation(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cache = render._bytecode_cache()
    folder = tmp_path / f"_jinja2-cache-{os.getuid()}"
    folder.rmdir()                      # gone after the cache was made: every write fails
    assert _env(cache).get_template("page.html").render(n=2) == "<p>2 runs</p>"
    assert not folder.exists()


def test_the_pages_environment_keeps_its_templates_in_that_cache():
    assert isinstance(render.environment().bytecode_cache, render._QuietCache)
