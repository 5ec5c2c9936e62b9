"""A project: simrun.toml + budgets.toml + personas + goals, resolved into one runnable plan.

Everything is validated here, before any run row is written or any cent is spent: settings given
to the call over the files' over the defaults, each bad one refused naming the file and line, or
the parameter it came by (`repetitions`, `runtime_settings.url`: the command line spells each as
its flag). What the plan names is made and run by `simrun.simulator._execute`.
"""

from __future__ import annotations

import inspect
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simrun import _secrets as secrets
from simrun._errors import ConfigError, Parameter, SimrunError
from simrun._money import Money, amount_of, parse_usd
from simrun._settings import FOREIGN, Budgets, Project, RunSection, RuntimeSection, load_budgets, load_project
from simrun.scoring.dataset import Dataset, load_dataset
from simrun.scoring.gate import RunSummary, baseline_from_git, load_baseline
from simrun.simulator import _demo as demo
from simrun.simulator._identity import given_labels
from simrun.simulator.adapters import load_attribute


@dataclass(frozen=True)
class Plan:
    """A run, resolved and checked: what it runs, against what, with what, and where it is kept."""

    project: Project
    budgets: Budgets
    dataset: Dataset
    budget: Decimal
    repetitions: int
    seed: int
    concurrency: int
    user: str
    db: Path
    reports: Path
    runtime: RuntimeSection
    files: tuple[str, ...] = ()      # the configuration files read
    labels: tuple[str, ...] = ()     # what the run is called (a release, a branch): never part of its key
    baseline: RunSummary | None = None   # gate.baseline of simrun.toml, read before anything runs
    sequential: bool = False         # run in rounds against the baseline (`simrun.scoring.gate._sequential`)
    history: str | None = None       # run.history, resolved: where each finished run is kept (a folder or a URL)
    # The runtime as a Python caller gave it (a class, an instance, a function), in place of
    # importing runtime.target (which then only names it): it runs in this process only.
    runtime_object: Any = None
    bundled_demo: bool = False       # no project was found, and the bundled demo's personas and goals were taken

    @property
    def conversations(self) -> int:
        return len(self.dataset.personas) * len(self.dataset.goals) * self.repetitions

    def config(self) -> dict[str, Any]:
        """What is stored with the run: enough to re-run it, and never a secret."""
        return {
            "repetitions": self.repetitions, "seed": self.seed, "concurrency": self.concurrency,
            "user": self.user, "budget_usd": str(self.budget),
            "runtime": runtime_summary(self.runtime),
            "personas": [p.id for p in self.dataset.personas], "goals": [g.id for g in self.dataset.goals],
            # A run in rounds is judged by the sequential gate with the settings it started with.
            **({"sequential": self.budgets.gate.sequential.model_dump()} if self.sequential else {}),
        }


def given_file(given: str | Path | None, default: str, parameter: str) -> Path | None:
    """A file named by the caller (`parameter`) must exist; the default file is optional."""
    if given is None:
        return Path(default) if Path(default).exists() else None
    if not Path(given).is_file():
        raise ConfigError(f"no such file: {given}", field=parameter)
    return Path(given)


def project_file(config: str | Path | None = None) -> Path | None:
    """simrun.toml: the file given (it must exist), else ./simrun.toml if there is one."""
    return given_file(config, "simrun.toml", "config")


def load_project_file(config: str | Path | None = None) -> Project:
    """The project's simrun.toml (`project_file`), or the defaults when there is none."""
    found = project_file(config)
    return load_project(found) if found else Project()


def budgets_in(found: Path | None) -> Budgets:
    """The budgets.toml found, or the defaults when there is none."""
    return load_budgets(found) if found else Budgets()


def project_budgets(budgets: str | Path | None = None) -> Budgets:
    """budgets.toml: the file given (it must exist), else ./budgets.toml if there is one, else the
    defaults."""
    return budgets_in(given_file(budgets, "budgets.toml", "budgets"))


def project_db(db: str | Path | None, config: str | Path | None = None) -> str:
    """The database a call reads: `db`, else the project's run.db (simrun.toml), else the default."""
    if db:
        return str(db)
    found = project_file(config)
    if found is None:
        return "simrun.duckdb"
    return str(found.parent / load_project(found).run.db)


def project_reports(config: str | Path | None = None) -> Path:
    """The reports folder: the project's run.reports (simrun.toml), else `reports`."""
    found = project_file(config)
    return found.parent / load_project(found).run.reports if found else Path("reports")


def project_history(config: str | Path | None = None) -> str | None:
    """run.history of simrun.toml, resolved: an object-store URL as it is, a folder relative to
    simrun.toml; None when the project keeps no history (or there is no project)."""
    found = project_file(config)
    return _history_of(load_project(found).run.history, found.parent) if found else None


def project_dataset(config: str | Path | None = None, personas: str | Path | None = None,
                    goals: str | Path | None = None) -> Dataset:
    """The project's personas and goals, resolved as a run resolves them: the folders given, else
    those of simrun.toml (relative to it)."""
    found = project_file(config)
    project = load_project(found) if found else Project()
    base = found.parent if found else Path(".")
    return load_dataset(Path(personas) if personas else base / project.run.personas,
                        Path(goals) if goals else base / project.run.goals)


def project_baseline(project: Project, config_file: Path | None) -> RunSummary | None:
    """gate.baseline of simrun.toml: a file relative to it, else a git REF:PATH read in its folder.
    A baseline that cannot be read is bad input, refused before anything runs."""
    given = project.gate.baseline
    if not given:
        return None
    base = config_file.parent if config_file else Path(".")
    where = str(config_file or "simrun.toml")
    try:
        if (base / given).is_file() or ":" not in given:
            return load_baseline(base / given)
        return baseline_from_git(given, cwd=base)
    except SimrunError as exc:
        # git's errors start with the parameter a REF:PATH comes by (baseline_ref); this one
        # came by the file's setting, which names itself.
        said = "".join(part for part in exc.parts if isinstance(part, str)).lstrip()
        raise ConfigError(said, path=where, field="gate.baseline") from None


def _history_of(history: str | None, base: Path) -> str | None:
    """run.history as a place: an object-store URL as it is, a folder relative to simrun.toml."""
    if not history:
        return None
    from simrun.scoring.store import is_url

    return history if is_url(history) else str(base / history)


def load_plan(*, config: str | Path | None = None, budgets: str | Path | None = None,
              budget: Money | None = None, personas: str | Path | None = None, goals: str | Path | None = None,
              repetitions: int | None = None, seed: int | None = None, concurrency: int | None = None,
              user: str | None = None, db: str | Path | None = None, reports: str | Path | None = None,
              runtime: Any = None, runtime_settings: Mapping[str, Any] | None = None,
              labels: str | Sequence[str] | None = None, sequential: bool = False,
              demo_if_no_project: bool = False) -> Plan:
    """Resolve the call's settings over the files' over the defaults, and validate all of it
    before anything runs. `runtime`: the runtime itself, over [runtime]'s transport and target
    (`given_runtime`); `runtime_settings`: settings over the rest of [runtime]. With no project
    (no simrun.toml, no personas or goals folder), `demo_if_no_project` takes the bundled demo's
    personas and goals; else that is refused, saying where simrun looked."""
    config_file = given_file(config, "simrun.toml", "config")
    budgets_file = given_file(budgets, "budgets.toml", "budgets")
    project = load_project(config_file) if config_file else Project()
    # Paths in simrun.toml are relative to it, like a pyproject.toml's.
    base = config_file.parent if config_file else Path(".")
    run = project.run
    data = base
    settings = dict(runtime_settings or {})
    given: Any = None
    if runtime is not None:
        chosen, given = given_runtime(runtime, base)
        settings.update(chosen)
    elsewhere = set(settings) & {"transport", "url", "command", "target"}
    bundled = False
    if (config_file is None and personas is None and goals is None and not elsewhere
            and demo.in_use(run.personas, run.goals, base)):
        if not demo_if_no_project:
            raise ConfigError((f"no project in {Path.cwd()}: no simrun.toml, and no {run.personas}/ or "
                               f"{run.goals}/ folder; run from a project's folder (`simrun init` starts one) or give ",
                               Parameter("config"), " (its simrun.toml); simrun.demo() runs the bundled demo"))
        # The bundled demo against the bundled runtime (simrun installed from a wheel, anywhere),
        # its options (faults) as given; pointed at another runtime, it needs goals.
        data = demo.folder()
        budgets_file = budgets_file or data / "budgets.toml"
        bundled = True
    money = budgets_in(budgets_file)
    amount = amount_of(budget) if budget is not None else parse_usd(money.budget.default, where="budget.default")
    run = _with_numbers(run, repetitions=repetitions, seed=seed, concurrency=concurrency)
    dataset = load_dataset(Path(personas) if personas else data / run.personas,
                           Path(goals) if goals else data / run.goals)
    section = _runtime_section(project.runtime, settings)
    if config_file is not None:
        section = _rooted(section, base)
    if given is not None:
        _check_given(given, section)
    rounds = money.gate.sequential
    if sequential and repetitions is not None:
        raise ConfigError("a sequential run's repetitions are its rounds: set gate.sequential.max_rounds (and "
                          "per_round) in budgets.toml instead", field="repetitions")
    if isinstance(labels, str):
        labels = [labels]           # one label, not its letters
    plan = Plan(project=project, budgets=money, dataset=dataset, budget=amount,
                repetitions=rounds.max_rounds * rounds.per_round if sequential else run.repetitions, seed=run.seed,
                concurrency=run.concurrency, user=user or run.user,
                db=Path(db) if db else base / run.db, reports=Path(reports) if reports else base / run.reports,
                runtime=section, files=tuple(str(f) for f in (config_file, budgets_file) if f),
                labels=given_labels(labels) if labels else tuple(run.labels),
                baseline=project_baseline(project, config_file), sequential=sequential,
                history=_history_of(run.history, base), runtime_object=given, bundled_demo=bundled)
    if sequential and plan.baseline is None:
        raise ConfigError((Parameter("sequential", True), " judges the run against a baseline: set gate.baseline "
                           "in simrun.toml (bless one with `simrun baseline bless RUN --out baselines/main.json`)"),
                          field="sequential")
    if not plan.db.parent.is_dir():
        raise ConfigError(f"the folder {plan.db.parent} does not exist", field="db")
    if plan.reports.exists() and not plan.reports.is_dir():
        raise ConfigError(f"{plan.reports} is a file, not a folder for reports", field="reports")
    return plan


def given_runtime(runtime: Any, base: Path) -> tuple[dict[str, Any], Any]:
    """A runtime given to the call, as the [runtime] settings it stands for, and the object to run
    in place of importing the target (None when the target is to be imported).

    An import string (`module:Class`, `file.py:Class`, `module:function`) is imported now, from
    `base` (the folder of simrun.toml), so that a wrong one is refused before anything runs: a
    class is the python transport's target, a function the callable transport's. A class, an
    instance (with the protocol's `start` and `turn`) or a function is run as it is, in this
    process; its import path names it in the run's stored settings."""
    if isinstance(runtime, str):
        found = load_attribute(runtime, "module:Class or module:function", folder=base)
        transport = _transport_of(found)
        # An instance named by a string is the object itself: a class or a function is imported
        # again where it runs (a worker process, a Ray worker), from its name.
        return {"transport": transport, "target": runtime}, (found if _is_instance(found) else None)
    return {"transport": _transport_of(runtime), "target": _name_of(runtime)}, runtime


def _is_instance(found: Any) -> bool:
    return not isinstance(found, type) and hasattr(found, "start") and hasattr(found, "turn")


def _transport_of(found: Any) -> str:
    if isinstance(found, type) or _is_instance(found):
        return "python"
    if callable(found):
        return "callable"
    raise ConfigError(f"a {type(found).__name__} is not a runtime: give a class, or an instance, with the "
                      "protocol's start() and turn() (docs/protocol.md), a function (messages, session) -> reply, "
                      "or its import string ('module:Class', 'module:function')", field="runtime")


def _name_of(runtime: Any) -> str:
    """`module:Name` of a class or a function; of an instance, its class's."""
    named = runtime if isinstance(runtime, type) or inspect.isroutine(runtime) else type(runtime)
    return f"{getattr(named, '__module__', '?')}:{getattr(named, '__qualname__', type(runtime).__name__)}"


def _check_given(given: Any, section: RuntimeSection) -> None:
    """A runtime object runs as it is: an instance takes no options (its class would), and a
    function object cannot be imported by the worker processes of isolation = "process"."""
    if _is_instance(given) and section.options:
        raise ConfigError("an instance is run as it is, and [runtime.options] are for a runtime simrun makes from "
                          "its class: give the class, or leave the options out", field="runtime")
    if section.transport == "callable" and section.isolation == "process":
        raise ConfigError("isolation = \"process\" runs the function in worker processes, which import it by "
                          "name: give it as an import string ('module:function')", field="runtime")


def _runtime_section(runtime: RuntimeSection, settings: Mapping[str, Any]) -> RuntimeSection:
    """simrun.toml's [runtime] with the call's settings over it, checked as the file's are. A
    header given to the call is a secret whatever its name, as one given as a flag is."""
    if not settings:
        return runtime
    for name, value in dict(settings.get("headers") or {}).items():
        secrets.register_header(str(name), str(value), from_flag=True)
    try:
        return RuntimeSection.model_validate({**runtime.model_dump(), **settings})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "transport"
        raise ConfigError(err["msg"].removeprefix("Value error, "), field=f"runtime_settings.{key}") from None


def _with_numbers(run: RunSection, **numbers: int | None) -> RunSection:
    """simrun.toml's [run], with the numbers given to the call in place of its own, held to the
    same bounds as the file's (what the store can keep among them): `repetitions=99999999999` is
    refused naming `repetitions`, as `repetitions = 99999999999` names its line."""
    given = {name: value for name, value in numbers.items() if value is not None}
    if not given:
        return run
    try:
        return RunSection.model_validate({**run.model_dump(), **given})
    except ValidationError as exc:
        err = exc.errors()[0]
        name, bounds = str(err["loc"][0]), err.get("ctx") or {}
        said = (f"must be at least {bounds['ge']:,}" if "ge" in bounds else
                f"must be at most {bounds['le']:,}" if "le" in bounds else err["msg"])
        raise ConfigError(f"{said}, got {given[name]}", field=name) from None


def _rooted(runtime: RuntimeSection, folder: Path) -> RuntimeSection:
    """runtime.cwd defaults to the folder of simrun.toml, and a relative one is relative to it:
    the started command, and relative paths in it (`./server`, `python app.py`), work from there
    whatever the shell's directory."""
    cwd = (folder / runtime.cwd) if runtime.cwd else folder
    return runtime.model_copy(update={"cwd": str(cwd.resolve())})


def checked_shard(shard: Any) -> tuple[int, int] | None:
    """A shard given as the pair (i, n): shard i (0-based) of n."""
    if shard is None:
        return None
    pair = tuple(shard) if isinstance(shard, (tuple, list)) else ()
    if len(pair) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in pair):
        raise ConfigError(f"give the shard as a pair of integers (i, n), e.g. (0, 4); got {shard!r}", field="shard")
    index, count = pair
    if count < 1 or not 0 <= index < count:
        raise ConfigError(f"there is no shard {index} of {count}: the shards of n are 0 to n - 1, e.g. 0 of 4",
                          field="shard")
    return index, count


def command_list(command: list[str] | str | None) -> list[str] | None:
    return shlex.split(command) if isinstance(command, str) else command


def runtime_summary(runtime: RuntimeSection) -> dict[str, Any]:
    """The runtime as stored with a run: header and environment values left out (secrets)."""
    summary: dict[str, Any] = {"transport": runtime.transport, "timeout_s": runtime.timeout_s}
    if runtime.transport == "python":
        summary |= {"target": runtime.target, "options": runtime.options}
    elif runtime.transport == "callable":
        summary |= {"target": runtime.target}
    else:
        summary |= {"url": runtime.url, "command": command_list(runtime.command), "cwd": runtime.cwd,
                    "env": sorted(runtime.env), "headers": sorted(runtime.headers)}
    if runtime.transport in ("chat", "template"):
        summary |= {"model": runtime.model, "body": runtime.body, "reply": runtime.reply}
    if runtime.transport in FOREIGN:
        summary |= {"tools": {name: tool.model_dump() for name, tool in runtime.tools.items()},
                    "traces": runtime.wants_traces, "state": runtime.state}
    return summary
