"""A team's first hour: a project for their own runtime (`simrun init`), and the JSON Schemas of
persona and goal files for their editor (`simrun schema`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from simrun._writing import write_file
from simrun.scoring.dataset import json_schemas
from simrun.simulator import Install, Seen, eventloop, new_project


@dataclass(frozen=True)
class NewProject:
    """A project written: its folder, the files written, what the runtime showed of itself in one
    short conversation (`seen`), and how the CI workflow installs simrun (`install`)."""

    folder: Path
    files: tuple[Path, ...]
    seen: Seen
    install: Install | None


def init(folder: str | Path = ".", *, transport: str = "http", url: str | None = None, command: str | None = None,
         target: str | None = None, model: str | None = None, package: str | None = None,
         force: bool = False) -> NewProject:
    """Write simrun.toml, starter personas and goals for YOUR runtime, and a CI workflow that
    gates pull requests, into `folder` (made if missing). The runtime is asked what it offers
    first (health, then one greeting), and a starter goal is written for each operation it offers.
    `transport`: how simrun reaches it (http, stdio, python, chat or callable), with `url` (a
    running server), `command` (what starts it), `target` (python: module:Class; callable:
    module:function) or `model` (chat). `package`: how CI installs simrun, as a pip requirement
    (default: where this simrun came from). `force`: overwrite files that exist."""
    where = Path(folder)
    settings = {"transport": transport, "url": url, "command": command, "target": target, "model": model}
    where.mkdir(parents=True, exist_ok=True)
    written = eventloop.run(new_project(where, settings, force=force, package=package))
    return NewProject(where, written.files, written.seen, written.install)


def write_schemas(out: str | Path = "schemas") -> tuple[Path, ...]:
    """Write the JSON Schemas of persona and goal files into the folder `out` (made if missing),
    for editors; the files written."""
    folder = Path(out)
    return tuple(write_file(folder / f"{name}.schema.json", json.dumps(body, indent=2) + "\n",
                            what="the JSON Schema", make_folders=True)
                 for name, body in json_schemas().items())
