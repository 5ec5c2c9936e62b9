"""Reports are written where they are meant to be, and bounded whatever the store holds: simrun
never writes through a symbolic link or into a folder that is one, and every text a page shows
is clipped, including those no template clips by name."""

from __future__ import annotations

import os

import duckdb
import pytest

from simrun._errors import SimrunError
from simrun.scoring.pages._render import TEXT_CHARS, environment, write_page
from tests.security.conftest import one_line_error


def test_a_link_in_the_reports_folder_is_replaced_never_followed(run_cli, project, one_run, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    reports = project / "reports"
    for name in ("index.html", "dashboard.html"):
        (reports / name).unlink(missing_ok=True)
        os.symlink(victim, reports / name)
    run_id = duckdb.connect(str(one_run), read_only=True).execute("SELECT run_id FROM runs").fetchone()[0]
    (reports / f"{run_id}.html").unlink()
    os.symlink(victim, reports / f"{run_id}.html")
    for command in (["report", "latest"], ["dashboard"], ["dashboard", "--out", str(reports / "dashboard.html")]):
        code, output = run_cli(*command)
        assert code == 0, (command, output)
    assert victim.read_text() == "keep me\n"
    for name in ("index.html", "dashboard.html", f"{run_id}.html"):
        assert not (reports / name).is_symlink() and "<html" in (reports / name).read_text().lower()
    assert not [p for p in reports.iterdir() if p.name.endswith(".tmp")]


def test_a_reports_folder_that_is_a_link_is_refused(run_cli, project, one_run, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = project / "linked"
    os.symlink(elsewhere, link)
    code, output = run_cli("report", "latest", "--reports", str(link))
    assert code == 2 and "symbolic link" in one_line_error(output)
    code, output = run_cli("dashboard", "--out", str(link / "index.html"))
    assert code == 2 and "symbolic link" in one_line_error(output)
    assert list(elsewhere.iterdir()) == []


def test_write_page_never_follows_a_link(tmp_path):
    target = tmp_path / "target"
    target.write_text("x")
    os.symlink(target, tmp_path / "page.html")
    write_page(tmp_path / "page.html", "<html>new</html>")
    assert target.read_text() == "x" and (tmp_path / "page.html").read_text() == "<html>new</html>"
    (tmp_path / "folder.html").mkdir()
    with pytest.raises(SimrunError):
        write_page(tmp_path / "folder.html", "<html></html>")


def test_every_printed_value_is_clipped_even_where_no_template_clips_it():
    env = environment()
    huge = "é" * 900_000
    page = env.from_string("{{ a }}|{{ b.c }}|{{ d }}|{{ n }}").render(a=huge, b={"c": huge}, d=[huge], n=12345)
    assert len(page) < 4 * (TEXT_CHARS + 100) and page.endswith("|12345")
    assert "more characters" in page


def test_huge_store_values_leave_the_report_small(run_cli, project, one_run):
    code, output = run_cli("report", "latest")
    assert code == 0, output
    run_id = duckdb.connect(str(one_run), read_only=True).execute("SELECT run_id FROM runs").fetchone()[0]
    clean = (project / "reports" / f"{run_id}.html").stat().st_size
    con = duckdb.connect(str(one_run))
    big = "Z" * 900_000
    con.execute("UPDATE conversations SET goal_reached = false, goal_detail = ?", [f"the store holds {big}"])
    con.execute("UPDATE findings SET detail = ?", [big])
    con.execute("UPDATE runs SET labels = ?", [f'["{big[:5000]}"]'])
    conversations = con.execute("SELECT count(*) FROM conversations").fetchone()[0]
    con.close()
    code, output = run_cli("report", "latest")
    assert code == 0, output
    grown = (project / "reports" / f"{run_id}.html").stat().st_size - clean
    # At most a few clipped texts per conversation, not 900 KB each.
    assert grown < conversations * 6 * (TEXT_CHARS + 100), (grown, conversations)


def test_the_gate_outputs_a_pull_request_commits_as_links_are_replaced_never_followed(run_cli, project, one_run,
                                                                                      tmp_path_factory):
    """`simrun gate --markdown gate.md --junit gate.xml --verdict-json v.json`, run by the generated
    workflow on every pull request, where the pull request commits those names as links: one to a
    file outside the checkout, one dangling. Every writer is simrun's one writer."""
    outside = tmp_path_factory.mktemp("outside-the-checkout")
    victim = outside / "victim.txt"
    victim.write_text("keep me\n")
    os.symlink(victim, project / "gate.md")
    os.symlink(outside / "created-outside.xml", project / "gate.xml")         # dangling
    os.symlink(victim, project / "v.json")
    code, output = run_cli("baseline", "bless", "latest", "--out", "baselines/main.json")
    assert code == 0, output                       # bless made baselines/ (a first bless on main)
    code, output = run_cli("gate", "--baseline", "baselines/main.json", "--candidate", "latest", "--markdown",
                          "gate.md", "--junit", "gate.xml", "--verdict-json", "v.json")
    assert code == 0, output
    assert victim.read_text() == "keep me\n" and not (outside / "created-outside.xml").exists()
    for name, says in (("gate.md", "simrun PASSED"), ("gate.xml", "<testsuites"), ("v.json", '"status"')):
        assert not (project / name).is_symlink() and says in (project / name).read_text(), name
    os.symlink(outside, project / "out")
    code, output = run_cli("gate", "--baseline", "baselines/main.json", "--candidate", "latest", "--markdown",
                          "out/gate.md")
    assert code == 2 and "is a symbolic link" in one_line_error(output)
    assert not (outside / "gate.md").exists()
