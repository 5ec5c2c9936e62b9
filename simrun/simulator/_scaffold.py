"""`simrun init`: a project for a team's own runtime, written into its repository.

`new_project` asks the runtime what it is and what it offers (health, then one short
conversation: the operations its first reply offers, the records its store holds), and writes
simrun.toml, starter personas, starter goals written for what it saw, and a GitHub Actions
workflow that runs simrun on pull requests and gates them against the baseline blessed on main.
It refuses to overwrite any of these files unless asked to (`force`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from simrun._errors import ConfigError, Parameter, RuntimeFault, SimrunError
from simrun._settings import RuntimeSection
from simrun._untrusted_text import one_line
from simrun._writing import write_file
from simrun.simulator._scaffold_files import FILL_IN, INSTALL, PERSONAS, REFUSAL_GOAL, WORKFLOW
from simrun.simulator.adapters import RuntimeAdapter

GREETING = "Hello! What can you help me with?"


@dataclass(frozen=True)
class Seen:
    """What the runtime showed of itself in one short conversation."""

    runtime: str = "the runtime"
    version: str = ""
    offers: tuple[dict[str, Any], ...] = ()     # next_steps and the card's actions, with an operation
    record_types: tuple[str, ...] = ()
    problem: str | None = None                   # why the conversation could not be held


@dataclass(frozen=True)
class Written:
    files: tuple[Path, ...]
    seen: Seen
    install: Install | None = None      # how the workflow installs simrun


def runtime_section(settings: dict[str, Any]) -> RuntimeSection:
    """The [runtime] table from init's settings (transport, url, command, target, model); a bad
    one names its setting, as the parameter of `simrun.init` it is given by."""
    given = {k: v for k, v in settings.items() if v not in (None, "")}
    if given.get("transport") == "template":
        raise ConfigError(("a template runtime needs its body and reply written by hand: start the project with ",
                           Parameter("transport", "chat"), " or http, then edit [runtime] (docs/any-assistant.md)"),
                          field="transport")
    try:
        section = RuntimeSection.model_validate(given)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "transport"
        known = name in ("transport", "url", "command", "target", "model")
        raise ConfigError(err["msg"].removeprefix("Value error, "), field=name if known else "transport") from None
    if section.transport in ("python", "callable") and "target" not in given:
        raise ConfigError((f"the {section.transport} transport needs ", Parameter("target"),
                           " module:name (or file.py:name)"), field="target")
    return section


async def probe(runtime: RuntimeAdapter) -> Seen:
    """Health, then one greeting: what the runtime offers and what its store holds."""
    name, version = "the runtime", ""
    try:
        health = await runtime.health()
        name, version = str(health.get("runtime") or name), str(health.get("version") or "")
        session = await runtime.start({"seed": 1, "persona": "simrun-init", "goal": "simrun-init", "setup": {}})
        result = await runtime.turn(session, {"message": GREETING})
        state = await runtime.state(session) or {}
        await runtime.close(session)
    except RuntimeFault as fault:
        # Files are written all the same: check-runtime, run next, says what is wrong, with its evidence.
        return Seen(name, version, problem=f"{fault.kind}: {fault}")
    except SimrunError as exc:
        return Seen(name, version, problem=str(exc))
    finally:
        await runtime.aclose()
    return Seen(name, version, offers=_offers(result), record_types=_record_types(state))


def _offers(result: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    offers = [o for o in result.get("next_steps") or () if isinstance(o, dict)]
    card = result.get("card")
    if isinstance(card, dict) and card.get("operation"):
        offers.append({**card, "label": card.get("label") or card["operation"]})
    kept, operations = [], set()
    for offer in offers:
        op = offer.get("operation")
        if isinstance(op, str) and op and op not in operations:
            operations.add(op)
            kept.append(offer)
    return tuple(kept[:5])


def _record_types(state: dict[str, Any]) -> tuple[str, ...]:
    records = state.get("records") if isinstance(state, dict) else None
    if not isinstance(records, dict):
        return ()
    return tuple(sorted({str(r["type"]) for r in records.values() if isinstance(r, dict) and r.get("type")}))


def goal_for(offer: dict[str, Any]) -> dict[str, Any]:
    """A starter goal that asks for what an offer does, and checks the store committed it."""
    op = offer["operation"]
    label = str(offer.get("label") or op.replace("_", " "))
    step: dict[str, Any] = {"operation": op, "say": [f"{label}.", f"Please {label[:1].lower()}{label[1:]}."]}
    if isinstance(offer.get("record"), str):
        step["record"] = offer["record"]
    arguments = {k: v for k, v in (offer.get("arguments") or {}).items() if isinstance(v, (str, int, float, bool))}
    if arguments:
        step["arguments"] = arguments
    quoted = op.replace("'", "''")
    return {"id": slug(op), "title": label, "instructions": f"Ask the assistant to {label[:1].lower()}{label[1:]}.",
            "steps": [step],
            "success": {"sql": [f"SELECT count(*) > 0 FROM events WHERE operation = '{quoted}' "
                                "AND status = 'committed'"]},
            "max_turns": 8}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "goal"


# For an assistant with no protocol code: its tool calls are read from its traces once its tools
# are named (docs/any-assistant.md), written commented out, since only the team knows its tools.
TOOLS_STANZA = [
    "# A hook that gives the session's records (module:function, or a URL with {session}):",
    '# state = "desk:records"',
    "", "# Its tool calls, read from its OpenTelemetry traces (GenAI, OpenInference or OpenLLMetry spans), become",
    "# the store's events once its tools are named: for each write tool, the argument naming the record",
    "# it writes; a tool that only reads is marked so (docs/any-assistant.md).",
    "# [runtime.tools.move_pickup]", '# record = "rx_id"',
    "# [runtime.tools.lookup_prescription]", "# read_only = true"]


def toml_text(section: RuntimeSection) -> str:
    """simrun.toml for the runtime: what `simrun` runs, and how it reaches the runtime."""
    runtime = {k: v for k, v in section.model_dump(exclude_defaults=True).items() if v not in (None, {}, [])}
    runtime = {"transport": section.transport, **runtime}
    lines = ["# What `simrun` runs, and against which runtime (written by `simrun init`). Flags override these.",
             "", "[run]", 'personas = "personas"', 'goals = "goals"', "repetitions = 3", "seed = 1",
             'user = "scripted"           # or openai:<model>, anthropic:<model> (prices in budgets.toml)',
             'db = "simrun.duckdb"', 'reports = "reports"', "", "[runtime]"]
    for key, value in runtime.items():
        lines.append(f"{key} = {json.dumps(value)}")     # a JSON string or list is a TOML one
    if section.transport in ("callable", "chat", "template"):
        lines += TOOLS_STANZA
    lines += ["", "# Once the CI workflow has blessed a baseline on main and it is committed, gate every run:",
              "# [gate]", '# baseline = "origin/main:baselines/main.json"', ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class Install:
    """How CI installs simrun: a pip requirement, or None when init cannot tell (then `where`
    says what it came from, and the workflow stops with a step to fill in)."""

    requirement: str | None
    where: str = ""
    note: str = ""          # what init says about it


def install_spec() -> Install:
    """Where this simrun came from (PEP 610's direct_url.json, as pip recorded it): the git URL and
    commit; a wheel's URL; else, with no record, the index it came from, by its version. From a
    local wheel or folder, None: no install line CI could follow, and never a version no index has."""
    try:
        dist = metadata.distribution("simrun")
    except metadata.PackageNotFoundError:
        return Install(None, "simrun's source tree (not installed)")
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except json.JSONDecodeError:
        direct = {}
    if direct is None:
        # No direct URL and an installer's record: pip (or uv) took it from an index, which has
        # this version. No record at all: a source tree's own metadata (an egg-info beside it).
        if (dist.read_text("INSTALLER") or "").strip():
            return Install(f"simrun=={dist.version}")
        return Install(None, "simrun's source tree (not installed from an index)")
    direct = direct if isinstance(direct, dict) else {}
    url = str(direct.get("url") or "")
    vcs = direct.get("vcs_info") if isinstance(direct.get("vcs_info"), dict) else None
    if vcs is not None and vcs.get("vcs") == "git" and url:
        commit = vcs.get("commit_id") or vcs.get("requested_revision") or "main"
        if url.startswith("file:///"):
            # The same repository, in the form every pip reads (older ones refuse an empty host).
            url = "file://localhost/" + url.removeprefix("file:///")
        note = (f"the workflow installs simrun from {url}, a git repository on this machine: CI reaches it only "
                "if it is there too; otherwise use your team's git URL" if url.startswith("file:") else "")
        return Install(f"simrun @ git+{url}@{commit}", note=note)
    if "archive_info" in direct and url.startswith(("https:", "http:")):
        return Install(f"simrun @ {url}")
    where = "a local folder" if "dir_info" in direct else "a local file"
    where = f"{where} ({url.removeprefix('file://')})" if url else where
    return Install(None, where)


def install_step(install: Install) -> str:
    if install.requirement is None:
        return FILL_IN.replace("@WHERE@", one_line(install.where, 200) or "a local install")
    return INSTALL.rstrip("\n").replace("@PACKAGE@", shlex.quote(one_line(install.requirement, 500) or "simrun"))


def files_for(section: RuntimeSection, seen: Seen, package: str | None = None,
              install: Install | None = None) -> dict[str, str]:
    """Every file init writes, by path relative to the project folder, with its text."""
    goals = [goal_for(offer) for offer in seen.offers] + [REFUSAL_GOAL]
    # A YAML comment ends at a line break: what the runtime said goes into one on one line, or a
    # record type holding "\nforbidden: []" would add keys to the goal.
    runtime = one_line(seen.runtime, 200) or "the runtime"
    header = f"# A starter goal for {runtime}, written by `simrun init` from its first reply: edit it.\n"
    if seen.record_types:
        types = ", ".join(filter(None, (one_line(t, 100) for t in seen.record_types)))
        header += f"# Its store held records of type: {types} (success.records can check them).\n"
    files = {"simrun.toml": toml_text(section)}
    for persona in PERSONAS:
        files[f"personas/{persona['id']}.yaml"] = _yaml(persona)
    for goal in goals:
        files[f"goals/{goal['id']}.yaml"] = header + _yaml(goal)
    install = install or (Install(package) if package else install_spec())
    files[".github/workflows/simrun.yml"] = WORKFLOW.replace("@INSTALL@", install_step(install))
    return files


def _yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def refuse_existing(folder: Path, names: Iterable[str]) -> None:
    # lexists: a dangling link is a name taken too (exists() says False for one).
    existing = [str(folder / name) for name in names if os.path.lexists(folder / name)]
    if existing:
        raise ConfigError((f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
                           "pass ", Parameter("force", True), " to overwrite them"))


def write(folder: Path, files: dict[str, str], *, force: bool = False) -> tuple[Path, ...]:
    """Write every file, or none: an existing one is refused, named, unless `force`."""
    if not force:
        refuse_existing(folder, files)
    paths = {folder / name: text for name, text in files.items()}
    for path, text in paths.items():
        # By simrun's one writer: no folder of the project a link (a committed `.github -> ~`),
        # no file written through one, each whole.
        write_file(path, text, what="the project's file", root=folder, make_folders=True, overwrite=force)
    return tuple(paths)


async def new_project(folder: Path, settings: dict[str, Any], *, force: bool = False,
                      package: str | None = None) -> Written:
    """Ask the runtime what it offers, then write the project for it into `folder`."""
    from simrun.simulator._execute import runtime_of

    section = runtime_section(settings)
    if not force:
        refuse_existing(folder, files_for(section, Seen()))   # before anything is started
    # The runtime starts in the project's folder, as `simrun` will start it (runtime.cwd's default).
    seen = await probe(runtime_of(section.model_copy(update={"cwd": str(folder.resolve())}), concurrency=1))
    install = Install(package) if package else install_spec()
    return Written(write(folder, files_for(section, seen, install=install), force=force), seen, install)
