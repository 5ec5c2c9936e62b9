"""Docs are tests: the README's commands are the ones CI runs, the site builds strictly offline,
and the docs and the code agree both ways: every command, option and setting is documented, and
every documented one exists (as datasette's documentation tests do)."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import typer

from simrun._settings import Budgets, Project
from simrun.cli._main import app
from simrun.examples.libdesk.truth import FAULTS as LIBDESK_FAULTS
from simrun.examples.tripdesk.faults import FAULTS
from simrun.scoring.dataset._models import MANNERS, Goal, Persona, Step
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
CLI_PAGE = (DOCS / "reference" / "cli.md").read_text()
CONFIG_PAGE = (DOCS / "reference" / "configuration.md").read_text()
SITE = "\n".join(p.read_text() for p in sorted(DOCS.rglob("*.md")))


def setup_commands() -> list[str]:
    section = README.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_two_setup_commands_and_ci_runs_the_second():
    commands = setup_commands()
    assert len(commands) == 2
    assert commands[0].endswith("simrun --budget 5usd")
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci.splitlines()


def test_the_readme_is_short_and_links_the_site():
    assert len(README.encode()) < 12_000, len(README.encode())
    for page in ("docs/tutorial.md", "docs/reference/cli.md", "docs/reference/configuration.md"):
        assert f"]({page})" in README, page


def test_the_readme_says_what_a_run_checks_by_default_and_what_it_does_not():
    """A reader of the README alone learns the defaults the verdict applies, under headings they
    can find, each linking the page that says more; the figures are the code's own."""
    from simrun._settings import DEFAULT_GOAL_FLOOR, DEFAULT_PROGRESS_CEILING, ReleaseSection

    sections = {title: README.split(f"### {title}\n", 1)[1].split("\n#", 1)[0]
                for title in ("Release check", "Gate and baselines", "The dashboard")}
    check = " ".join(sections["Release check"].split())
    assert ReleaseSection().fail_on_runtime_error and ReleaseSection().min_goal_reached is None
    for said in ("every guarantee", "`runtime_error`", f"**{DEFAULT_PROGRESS_CEILING:.0%}**", "`gate.baseline`",
                 "regressions, when no baseline is set", "UNVERIFIABLE",
                 f"goal-reached rate under **{DEFAULT_GOAL_FLOOR:.0%}**"):
        assert said in check, said
    for title, page in (("Release check", "docs/how-to/gate.md#release-check"),
                        ("Gate and baselines", "docs/how-to/gate.md#gate-and-baselines"),
                        ("The dashboard", "docs/how-to/dashboards.md")):
        assert f"]({page})" in sections[title], title


# mkdocs logs a problem as "WARNING -  ..." (or "ERROR -  ..."); `-q` would hide the warnings, and
# `--strict` counts only the warnings it shows, so the build runs without it and every one is read.
LOGGED_PROBLEM = re.compile(r"^(?:WARNING|ERROR)\s+-\s+(.*)$", re.M)


def build_site(config: Path, site: Path) -> tuple[int, list[str]]:
    """`mkdocs build --strict` of `config` into `site`, as a plain clone builds it: no `-q`, and no
    variable of this process's but PATH (any connection would go to a proxy that is not there: the
    build must need none). Its exit code, and every warning or error it logged."""
    env = {"PATH": os.environ.get("PATH", ""), "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "NO_PROXY": ""}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                           capture_output=True, text=True, env=env, timeout=300, cwd=site.parent)
    return built.returncode, LOGGED_PROBLEM.findall(built.stdout + built.stderr)


def test_the_site_builds_strictly_and_offline_with_no_warning(tmp_path):
    code, problems = build_site(ROOT / "mkdocs.yml", tmp_path / "site")
    assert problems == [] and code == 0, problems
    index = (tmp_path / "site" / "index.html").read_text()
    assert "fonts.googleapis.com" not in index            # the site reads offline too
    for page in ("tutorial", "reference/cli", "reference/configuration", "protocol", "how-to/gate", "benchmarks"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page
    # The benchmarks' reference and history are the files beside the scripts, included whole.
    benchmarks = (tmp_path / "site" / "benchmarks" / "index.html").read_text()
    assert "gate_sequential.py" in benchmarks and "--8&lt;--" not in benchmarks and "--8<--" not in benchmarks
    assert "The summary table" in (tmp_path / "site" / "benchmarks" / "HISTORY" / "index.html").read_text()


def test_a_broken_link_or_anchor_fails_the_build_and_is_counted(tmp_path):
    """Control: a copy of the docs with a link to no page and one to no heading of the benchmarks'
    reference (a file included from benchmarks/) fails, and each is one of the warnings counted."""
    clone = tmp_path / "clone"
    shutil.copytree(DOCS, clone / "docs")
    shutil.copy(ROOT / "mkdocs.yml", clone / "mkdocs.yml")
    (clone / "benchmarks").mkdir()
    for name in ("README.md", "HISTORY.md"):
        shutil.copy(ROOT / "benchmarks" / name, clone / "benchmarks" / name)
    page = clone / "docs" / "index.md"
    page.write_text(page.read_text() + "\n[gone](how-to/no-such-page.md) and "
                    "[figures](benchmarks/README.md#no-such-heading)\n")
    code, problems = build_site(clone / "mkdocs.yml", tmp_path / "site")
    assert code != 0 and len(problems) == 2, problems
    assert "how-to/no-such-page.md" in "\n".join(problems) and "#no-such-heading" in "\n".join(problems), problems


# --- the layout the docs name ------------------------------------------------------------------

WRITTEN = {"README.md": README, "CONTRIBUTING.md": (ROOT / "CONTRIBUTING.md").read_text(),
           "benchmarks/README.md": (ROOT / "benchmarks" / "README.md").read_text(),
           **{str(p.relative_to(ROOT)): p.read_text() for p in sorted(DOCS.rglob("*.md"))}}
# A path of the clone (`simrun/_settings.py`, `tests/fixtures/`), and a module of simrun's layers
# (`simrun.scoring.gate.gate_verdict`; the public names are docs/how-to/python-api.md's to test).
NAMED_PATH = re.compile(r"(?<![\w/.:-])((?:simrun|scoring|simulator|tests|benchmarks)/[\w./*-]*[\w*]/?)")
NAMED_MODULE = re.compile(r"(?<![\w.])(simrun\.(?:scoring|simulator|cli|examples|_[a-z_]+)(?:\.\w+)*)")


def stale_names(written: dict[str, str]) -> list[str]:
    """Every source path the docs name that is not in the clone, or that names a file through the
    card's links (`scoring/_settings.py` for `simrun/_settings.py`: a second name), and every
    module of simrun's layers they name that does not import, as 'page: name'."""
    found = []
    for page, text in written.items():
        for path in sorted(set(NAMED_PATH.findall(text))):
            through_link = path.startswith(("scoring/", "simulator/")) and path not in ("scoring/", "simulator/")
            if through_link or not any(ROOT.glob(path.rstrip("/"))):    # a pattern (`refill_*.py`) names some
                found.append(f"{page}: {path}")
        for dotted in sorted(set(NAMED_MODULE.findall(text))):
            parts = dotted.split(".")
            for cut in range(len(parts), 0, -1):
                try:
                    found_object = importlib.import_module(".".join(parts[:cut]))
                    break
                except ImportError:
                    continue
            for attribute in parts[cut:]:
                found_object = getattr(found_object, attribute, None)
            if found_object is None:
                found.append(f"{page}: {dotted}")
    return found


def test_every_source_path_and_module_the_docs_name_exists_by_its_one_name():
    assert stale_names(WRITTEN) == []


def test_a_moved_or_gone_name_in_the_docs_is_found():
    """Control: paths and modules of the layout before the base layer moved into `simrun`."""
    planted = {"docs/old.md": "errors in `scoring/_errors.py`, settings in `simrun/scoring/_settings.py`, the "
                              "store in `simulator/` and `simrun/scoring/store/`, raised as "
                              "`simrun.scoring._errors.ConfigError`, gated by `simrun.scoring.gate.gate_verdict`"}
    assert stale_names(planted) == ["docs/old.md: scoring/_errors.py", "docs/old.md: simrun/scoring/_settings.py",
                                    "docs/old.md: simrun.scoring._errors.ConfigError"]


# --- the command line and its reference page, both ways ----------------------------------------

def cli_tree(command=None, path=()) -> dict[str, set[str]]:
    """Every command (`simrun`, `simrun gate`, `simrun baseline bless`) -> its options and arguments."""
    command = command or typer.main.get_command(app)
    tree = {" ".join(("simrun", *path)): {
        f"`{p.name.upper()}`" if p.param_type_name == "argument" else f"`{opt}`"
        for p in command.params if p.name != "help"
        for opt in ([p.name] if p.param_type_name == "argument" else [*p.opts, *p.secondary_opts])}}
    for name, sub in getattr(command, "commands", {}).items():
        tree |= cli_tree(sub, (*path, name))
    return tree


def documented_cli(page: str) -> dict[str, set[str]]:
    """The reference page's commands (### `simrun ...`) -> the flags and arguments in its table."""
    documented = {}
    for section in page.split("\n### ")[1:]:
        heading, body = section.split("\n", 1)
        name = heading.strip().strip("`")
        rows = [line for line in body.splitlines() if line.startswith("| `")]
        documented[name] = {flag for row in rows for flag in re.findall(r"`[^`]+`", row.split(" | ")[0])}
    return documented


def disagreements(tree: dict[str, set[str]], documented: dict[str, set[str]]) -> list[str]:
    problems = [f"{name}: not documented" for name in tree.keys() - documented.keys()]
    problems += [f"{name}: documented, but there is no such command" for name in documented.keys() - tree.keys()]
    for name in tree.keys() & documented.keys():
        problems += [f"{name} {flag}: not documented" for flag in sorted(tree[name] - documented[name])]
        problems += [f"{name} {flag}: documented, but there is no such option"
                     for flag in sorted(documented[name] - tree[name])]
    return problems


def test_every_command_and_option_is_documented_and_every_documented_one_exists():
    assert disagreements(cli_tree(), documented_cli(CLI_PAGE)) == []


def test_the_cli_check_fails_on_an_option_added_without_docs_or_docs_of_a_removed_one():
    """Control: the check above is not vacuous."""
    tree, documented = cli_tree(), documented_cli(CLI_PAGE)
    assert len(tree) > 15 and sum(map(len, tree.values())) > 100
    grown = {**tree, "simrun gate": tree["simrun gate"] | {"`--new-flag`"}}
    assert disagreements(grown, documented) == ["simrun gate `--new-flag`: not documented"]
    assert disagreements({**tree, "simrun fly": set()}, documented) == ["simrun fly: not documented"]
    shrunk = {**tree, "simrun plan": tree["simrun plan"] - {"`--seed`"}}
    assert disagreements(shrunk, documented) == ["simrun plan `--seed`: documented, but there is no such option"]


# --- the configuration files and their reference page, both ways -------------------------------

SECTIONS = {**{f"simrun.toml [{k}]": f.annotation for k, f in Project.model_fields.items()},
            **{f"budgets.toml [{k}]": Budgets.model_fields[k].annotation for k in ("budget", "gate", "release")}}
MAPS = {"prices": Budgets.model_fields["prices"], "limits": Budgets.model_fields["limits"]}


def config_keys(sections=None) -> set[str]:
    """`section.key` for every key of simrun.toml and budgets.toml (from the pydantic models)."""
    sections = sections or SECTIONS
    return {f"{name.split('[')[1].rstrip(']')}.{key}" for name, model in sections.items() for key in model.model_fields}


def config_disagreements(keys: set[str], page: str) -> list[str]:
    named = set(re.findall(r"`((?:run|gate|runtime|user|budget|release)\.[a-z_]+)`", page))
    return ([f"{k}: not documented" for k in sorted(keys - named)]
            + [f"{k}: documented, but there is no such setting" for k in sorted(named - keys)])


def test_every_setting_is_documented_and_every_documented_one_exists():
    assert config_disagreements(config_keys(), CONFIG_PAGE) == []
    # The tables of model prices, rate limits and tools: every key of their entries.
    from simrun._settings import Limit, Price, ToolSection

    for model in (Price, Limit, ToolSection):
        for key in model.model_fields:
            assert f"`{key}`" in CONFIG_PAGE, f"{model.__name__}.{key}"


def test_the_config_check_fails_on_a_setting_added_without_docs():
    """Control: a section model with one more key than the page names."""
    from pydantic import create_model

    from simrun._settings import RunSection

    grown = create_model("Grown", __base__=RunSection, warp_speed=(bool, False))
    keys = config_keys({**SECTIONS, "simrun.toml [run]": grown})
    assert config_disagreements(keys, CONFIG_PAGE) == ["run.warp_speed: not documented"]
    assert config_disagreements(config_keys(), CONFIG_PAGE + "\n`run.gone_key`") == [
        "run.gone_key: documented, but there is no such setting"]


def test_every_manner_fault_and_field_is_documented():
    for manner in MANNERS:
        assert f"| `{manner}` |" in SITE, manner
    for fault in (*FAULTS, *LIBDESK_FAULTS):
        assert f"| `{fault}` |" in SITE, fault
    for model in (Persona, Goal, Step):
        for field in model.model_fields:
            assert f"`{field}`" in SITE, f"{model.__name__}.{field}"
