"""docs/how-to/python-api.md is run as written: its Python blocks, in order and in one namespace,
in a copy of the demo project, as a reader pasting them into a session would. What a block
prints is checked where the page says what it prints."""

from __future__ import annotations

import contextlib
import io
import re

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "how-to" / "python-api.md"


def blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.+?)\n```", text, flags=re.S)


def test_every_python_block_of_the_page_runs_in_the_demo_project(project, monkeypatch):
    monkeypatch.chdir(project)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    found = blocks(PAGE.read_text())
    assert len(found) >= 6
    namespace: dict = {}
    printed = []
    for block in found:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, str(PAGE), "exec"), namespace)   # noqa: S102 - the page's own code
        printed.append(out.getvalue())
    first, refused = printed[0].split(), printed[1].strip()
    assert first[0] == "0" and re.fullmatch(r"r[0-9]{8}-[0-9]{6}-[0-9a-f]+", first[1]), printed[0]
    # The error the page says it prints, word for word.
    said = re.search(r"print\(error\)\s+# (.+)", found[1]).group(1)
    assert refused == said
    assert namespace["judged"].gate.baseline.run_id == namespace["baseline"].run_id
    assert any("conversations planned" in said for said in printed)
    # What the page says its blocks give, they give.
    assert (namespace["by_class"].exit_code, namespace["by_instance"].exit_code) == (0, 1)
    assert (project / "gate.md").read_text().startswith("## ") and (project / "baselines" / "main.json").is_file()
    assert namespace["again"].gate.baseline.runs == (namespace["baseline"].run_id, namespace["candidate"].run_id)
    assert namespace["merged"].verdict.outcome.conversations == namespace["outcome"].conversations
    assert namespace["imported"].conversations == namespace["exported"].items
    assert all(path.is_file() for path in (*namespace["started"].files, *namespace["schemas"]))


def test_the_page_is_in_the_site_and_names_every_export():
    import simrun

    assert "how-to/python-api.md" in (ROOT / "mkdocs.yml").read_text()
    text = PAGE.read_text()
    assert [name for name in simrun.__all__ if name != "__version__" and f"`{name}`" not in text] == []
