"""One writer for every file simrun writes (issue 39, rule 2): whole, never through a link (at its
name, dangling or not, or in a folder between the one it was given and the file), never over what
is there when asked not to. The rule is held at its boundary: a check over simrun's code fails
when any module writes a file by another way than `simrun._writing`."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from simrun._errors import SimrunError
from simrun._writing import append_file, write_file
from tests.conftest import ROOT
from tests.fixtures.sources import product_sources

WRITER = ROOT / "simrun" / "_writing.py"
# Opening a file for writing some other way is allowed only here, each for its reason.
ALLOWED = {
    # DuckDB's own files: a database being copied aside to be read while another process holds it.
    ("simrun/scoring/store/_database.py", "shutil.copyfile"),
    # A history file fetched in chunks, bounded as it arrives, into simrun's own temporary folder
    # (O_EXCL: never over anything); it is read from there, never shown to anyone as simrun's output.
    ("simrun/scoring/store/_history.py", "open"),
}
WRITE_MODES = set("wax+")


def _sources() -> list[Path]:
    return [p for p in product_sources(examples=False) if p != WRITER]


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else "?"


def writes_around_the_writer(source: str, where: str) -> list[str]:
    """Every call in `source` that writes a file some other way: a path's write_text/write_bytes/
    rename/replace/symlink_to, open() in a writing mode, os.open for writing (but /dev/null),
    os.replace/rename, shutil's copies and moves, tempfile's named files."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        bad = False
        if last in ("write_text", "write_bytes", "symlink_to", "hardlink_to") or name in (
                "os.replace", "os.rename", "os.link", "os.symlink", "shutil.copy", "shutil.copy2",
                "shutil.copyfile", "shutil.move", "shutil.copytree", "tempfile.NamedTemporaryFile",
                "tempfile.mkstemp"):
            bad = True
        elif name in ("open", "io.open") or (last == "open" and name not in ("os.open", "?")
                                             and not name.startswith(("gzip.", "zipfile.", "tarfile."))):
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"),
                                                                None)
            bad = isinstance(mode, ast.Constant) and isinstance(mode.value, str) and bool(
                WRITE_MODES & set(mode.value))
        elif name == "os.open":
            flags = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
            target = ast.unparse(node.args[0]) if node.args else ""
            bad = any(f in flags for f in ("O_WRONLY", "O_RDWR", "O_CREAT")) and target != "os.devnull"
        if bad and (where, name) not in ALLOWED:
            found.append(f"{where}:{node.lineno}: {name}")
    return found


def test_no_module_writes_a_file_around_the_one_writer():
    sources = _sources()
    assert len(sources) > 100
    found = [hit for path in sources
             for hit in writes_around_the_writer(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]
    assert found == [], "write through simrun.scoring.write_file / append_file instead:\n" + "\n".join(found)


@pytest.mark.parametrize("code", [
    "Path(p).write_text('x')", "p.write_bytes(b'x')", "open(p, 'w')", "open(p, mode='a')", "io.open(p, 'wb')",
    "os.open(p, os.O_WRONLY | os.O_CREAT)", "os.replace(a, b)", "shutil.copyfile(a, b)",
    "tempfile.NamedTemporaryFile()", "p.symlink_to(q)",
])
def test_the_check_sees_each_way_of_writing(code):
    assert writes_around_the_writer(f"import os, io, shutil, tempfile\n{code}\n", "planted.py")


@pytest.mark.parametrize("code", ["open(p)", "open(p, 'rb')", "os.open(os.devnull, os.O_WRONLY)", "p.read_text()"])
def test_the_check_lets_reading_be(code):
    assert writes_around_the_writer(f"import os\n{code}\n", "planted.py") == []


def test_a_link_at_the_name_is_replaced_never_followed(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs")
    (tmp_path / "out").mkdir()
    os.symlink(outside, tmp_path / "out" / "gate.md")
    os.symlink(tmp_path / "nowhere.txt", tmp_path / "out" / "gate.xml")        # dangling
    write_file(tmp_path / "out" / "gate.md", "ours")
    write_file(tmp_path / "out" / "gate.xml", "ours")
    assert outside.read_text() == "theirs" and not (tmp_path / "nowhere.txt").exists()
    for name in ("gate.md", "gate.xml"):
        assert not (tmp_path / "out" / name).is_symlink() and (tmp_path / "out" / name).read_text() == "ours"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gate.md", "gate.xml"]     # no part left


def test_no_folder_between_the_root_and_the_file_may_be_a_link(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    os.symlink(elsewhere, project / ".github")
    with pytest.raises(SimrunError, match=r"\.github is a symbolic link"):
        write_file(project / ".github" / "workflows" / "simrun.yml", "x", root=project, make_folders=True)
    with pytest.raises(SimrunError, match="is a symbolic link"):
        write_file(project / ".github" / "gate.md", "x")            # the file's own folder
    assert list(elsewhere.iterdir()) == []
    with pytest.raises(SimrunError, match="outside the folder"):
        write_file(tmp_path / "x.txt", "x", root=project)


def test_asked_not_to_overwrite_it_refuses_any_name_taken_a_dangling_link_too(tmp_path):
    os.symlink(tmp_path / "nowhere.yaml", tmp_path / "plain.yaml")
    with pytest.raises(SimrunError, match="is there already"):
        write_file(tmp_path / "plain.yaml", "x", overwrite=False)
    assert not (tmp_path / "nowhere.yaml").exists()
    assert write_file(tmp_path / "new.yaml", "y", overwrite=False).read_text() == "y"


def test_missing_folders_are_made_only_when_asked_and_named_otherwise(tmp_path):
    with pytest.raises(SimrunError, match=r"the folder .*baselines does not exist; create it"):
        write_file(tmp_path / "baselines" / "main.json", "{}")
    write_file(tmp_path / "baselines" / "main.json", "{}", make_folders=True)
    assert (tmp_path / "baselines" / "main.json").read_text() == "{}"


def test_append_never_goes_through_a_link(tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("theirs\n")
    os.symlink(outside, tmp_path / "summary.md")
    with pytest.raises(SimrunError, match="cannot write the step summary"):
        append_file(tmp_path / "summary.md", "## forged\n", what="the step summary")
    assert outside.read_text() == "theirs\n"
    append_file(tmp_path / "real.md", "a\n")
    append_file(tmp_path / "real.md", "b\n")
    assert (tmp_path / "real.md").read_text() == "a\nb\n"
