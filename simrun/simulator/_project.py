"""A project: simrun.toml + budgets.toml + personas + goals, resolved into one runnable plan.

Everything is validated here, before any run row is written or any cent is spent. The CLI and
Python users both go through `load_plan` and `execute`.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simrun import _secrets as secrets
from simrun._errors import ConfigError, SimrunError
from simrun._money import parse_usd
from simrun._settings import FOREIGN, Budgets, Project, RunSection, RuntimeSection, load_budgets, load_project
from simrun.scoring.dataset import Dataset, load_dataset
from simrun.scoring.gate import RunSummary, baseline_from_git, load_baseline
from simrun.scoring.store import record_goal_problems
from simrun.simulator import _demo as demo
from simrun.simulator._identity import git_state, labels_flag
from simrun.simulator._ledger import CallLedger, Ledger
from simrun.simulator._runner import RunResult, run_matrix
from simrun.simulator.adapters import PythonRuntime, StdioRuntime
from simrun.simulator.users import UserBackend, make_user


@dataclass(frozen=True)
class Plan:
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


def given_file(given: str | Path | None, default: str, flag: str) -> Path | None:
    """A file named by a flag must exist; the default file is optional."""
    if given is None:
        return Path(default) if Path(default).exists() else None
    if not Path(given).is_file():
        raise ConfigError(f"no such file: {given}", field=flag)
    return Path(given)


def load_project_file(config: str | Path | None = None) -> Project:
    config_file = given_file(config, "simrun.toml", "--config")
    return load_project(config_file) if config_file else Project()


def project_db(db: str | None, config: str | Path | None = None) -> str:
    """The database a command reads: --db, else the project's run.db (simrun.toml), else the default."""
    if db:
        return db
    config_file = given_file(config, "simrun.toml", "--config")
    if config_file is None:
        return "simrun.duckdb"
    return str(config_file.parent / load_project(config_file).run.db)


def project_reports(config: str | Path | None = None) -> Path:
    """The reports folder: the project's run.reports (simrun.toml), else `reports`."""
    config_file = given_file(config, "simrun.toml", "--config")
    return config_file.parent / load_project(config_file).run.reports if config_file else Path("reports")


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
        raise ConfigError(str(exc).replace(f"--baseline-ref {given}", given), path=where,
                          field="gate.baseline") from None


def _history_of(history: str | None, base: Path) -> str | None:
    """run.history as a place: an object-store URL as it is, a folder relative to simrun.toml."""
    if not history:
        return None
    from simrun.scoring.store import is_url

    return history if is_url(history) else str(base / history)


def load_plan(*, config: str | Path | None = None, budgets: str | Path | None = None,
              budget: str | None = None, personas: str | None = None, goals: str | None = None,
              repetitions: int | None = None, seed: int | None = None, concurrency: int | None = None,
              user: str | None = None, db: str | None = None, reports: str | None = None,
              runtime_flags: dict[str, Any] | None = None, check_user: bool = True,
              labels: list[str] | None = None, sequential: bool = False) -> Plan:
    """Resolve flags over files over defaults, and validate all of it before anything runs."""
    config_file = given_file(config, "simrun.toml", "--config")
    budgets_file = given_file(budgets, "budgets.toml", "--budgets")
    project = load_project(config_file) if config_file else Project()
    # Paths in simrun.toml are relative to it, like a pyproject.toml's.
    base = config_file.parent if config_file else Path(".")
    run = project.run
    data = base
    elsewhere = set(runtime_flags or ()) & {"transport", "url", "command", "target"}
    if (config_file is None and personas is None and goals is None and not elsewhere
            and demo.in_use(run.personas, run.goals, base)):
        # A folder with no project of its own runs the bundled demo against the bundled runtime
        # (simrun installed from a wheel, anywhere), its options (faults) as given; pointed at
        # another runtime, it needs goals.
        data = demo.folder()
        budgets_file = budgets_file or data / "budgets.toml"
    money = load_budgets(budgets_file) if budgets_file else Budgets()
    amount = parse_usd(budget) if budget is not None else parse_usd(money.budget.default, where="budget.default")
    run = _with_flags(run, repetitions=repetitions, seed=seed, concurrency=concurrency)
    dataset = load_dataset(Path(personas) if personas else data / run.personas,
                           Path(goals) if goals else data / run.goals)
    runtime = project.runtime
    if runtime_flags:
        try:
            runtime = RuntimeSection.model_validate({**runtime.model_dump(), **runtime_flags})
        except ValidationError as exc:
            err = exc.errors()[0]
            key = str(err["loc"][0]) if err["loc"] else "transport"
            flag = {"url": "--url", "command": "--runtime-command", "timeout_s": "--timeout", "headers": "--header",
                    "transport": "--transport"}.get(key, f"runtime.{key}")
            raise ConfigError(err["msg"].removeprefix("Value error, "), field=flag) from None
    if config_file is not None:
        runtime = _rooted(runtime, base)
    rounds = money.gate.sequential
    if sequential and repetitions is not None:
        raise ConfigError("a sequential run's repetitions are its rounds: set gate.sequential.max_rounds (and "
                          "per_round) in budgets.toml instead", field="--repetitions")
    plan = Plan(project=project, budgets=money, dataset=dataset, budget=amount,
                repetitions=rounds.max_rounds * rounds.per_round if sequential else run.repetitions, seed=run.seed,
                concurrency=run.concurrency, user=user or run.user,
                db=Path(db) if db else base / run.db, reports=Path(reports) if reports else base / run.reports,
                runtime=runtime, files=tuple(str(f) for f in (config_file, budgets_file) if f),
                labels=labels_flag(labels) if labels else tuple(run.labels),
                baseline=project_baseline(project, config_file), sequential=sequential,
                history=_history_of(run.history, base))
    if sequential and plan.baseline is None:
        raise ConfigError("--sequential judges the run against a baseline: set gate.baseline in simrun.toml "
                          "(bless one with `simrun baseline bless RUN --out baselines/main.json`)",
                          field="--sequential")
    if not plan.db.parent.is_dir():
        raise ConfigError(f"the folder {plan.db.parent} does not exist", field="--db")
    if plan.reports.exists() and not plan.reports.is_dir():
        raise ConfigError(f"{plan.reports} is a file, not a folder for reports", field="--reports")
    if check_user:
        user_backend(plan)   # an unknown backend, or one without its key or price, fails here
    return plan


def _with_flags(run: RunSection, **flags: int | None) -> RunSection:
    """simrun.toml's [run], with the numbers given as flags in place of its own, held to the same
    bounds as the file's (what the store can keep among them): `-n 99999999999` is refused naming
    --repetitions, as `repetitions = 99999999999` names its line."""
    given = {name: value for name, value in flags.items() if value is not None}
    if not given:
        return run
    try:
        return RunSection.model_validate({**run.model_dump(), **given})
    except ValidationError as exc:
        err = exc.errors()[0]
        name, bounds = str(err["loc"][0]), err.get("ctx") or {}
        said = (f"must be at least {bounds['ge']:,}" if "ge" in bounds else
                f"must be at most {bounds['le']:,}" if "le" in bounds else err["msg"])
        raise ConfigError(f"{said}, got {given[name]}", field=f"--{name}") from None


def _rooted(runtime: RuntimeSection, folder: Path) -> RuntimeSection:
    """runtime.cwd defaults to the folder of simrun.toml, and a relative one is relative to it:
    the started command, and relative paths in it (`./server`, `python app.py`), work from there
    whatever the shell's directory."""
    cwd = (folder / runtime.cwd) if runtime.cwd else folder
    return runtime.model_copy(update={"cwd": str(cwd.resolve())})


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(value: str, where: str) -> str:
    """${VAR} from the environment; a missing variable is refused with its name."""
    def one(m: re.Match) -> str:
        if m.group(1) not in os.environ:
            raise ConfigError(f"needs the environment variable {m.group(1)}; set it (it is never stored)",
                              field=where)
        secrets.register(os.environ[m.group(1)])     # whatever the runtime echoes of it is cut out
        return os.environ[m.group(1)]

    return _VAR.sub(one, value)


def environment_of(plan: Plan) -> dict[str, str]:
    """The environment variables running `plan` reads, with their values here: what a process on
    another machine (a Ray worker) is given, to run the plan as this one would: the user model's
    API key and base URL (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, as the SDKs read them), and the
    `${VAR}`s of the runtime's headers and environment."""
    from simrun.simulator.users import KEY_VARIABLES

    kind = plan.user.split(":", 1)[0]
    names = {KEY_VARIABLES[kind], f"{kind.upper()}_BASE_URL"} if kind in KEY_VARIABLES else set()
    for value in [*plan.runtime.env.values(), *plan.runtime.headers.values()]:
        names.update(_VAR.findall(value))
    return {name: os.environ[name] for name in sorted(names) if name in os.environ}


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


def runtime_for(plan: Plan):
    """The adapter for the plan's transport. Secrets are read from the environment only here."""
    return runtime_of(plan.runtime, plan.concurrency)


def runtime_of(rt: RuntimeSection, concurrency: int = 8):
    """The adapter for a [runtime] table, `concurrency` requests at once at most."""
    if rt.transport == "python":
        return PythonRuntime.from_target(rt.target, rt.options, folder=rt.cwd, max_result_bytes=rt.max_result_bytes)
    env = {k: expand(v, f"runtime.env.{k}") for k, v in rt.env.items()}
    headers = {k: expand(v, f"runtime.headers.{k}") for k, v in rt.headers.items()}
    for name, value in headers.items():
        secrets.register_header(name, value)
    secrets.register_url(rt.url)
    if rt.transport in FOREIGN:
        return foreign_runtime(rt, env, headers, concurrency)
    if rt.transport == "http":
        # Imported here: aiohttp takes a third of a second to import, which commands that reach
        # no runtime over HTTP (`simrun --help`, `runs`, `gate`, a python or stdio runtime) need not pay.
        from simrun.simulator.adapters import HttpRuntime

        return HttpRuntime(url=rt.url, command=command_list(rt.command), env=env, cwd=rt.cwd,
                           timeout_s=rt.timeout_s, startup_timeout_s=rt.startup_timeout_s, headers=headers,
                           concurrency=concurrency, max_result_bytes=rt.max_result_bytes)
    command = command_list(rt.command)
    assert command is not None      # RuntimeSection's validation: stdio needs its command
    return StdioRuntime(command, env=env, cwd=rt.cwd, timeout_s=rt.timeout_s,
                        startup_timeout_s=rt.startup_timeout_s, max_result_bytes=rt.max_result_bytes)


def foreign_runtime(rt: RuntimeSection, env: dict[str, str], headers: dict[str, str], concurrency: int):
    """An assistant with no protocol code: a function, an OpenAI-compatible endpoint, or any JSON
    endpoint through a body template (docs/any-assistant.md)."""
    from simrun.simulator.adapters import Tool

    settings: dict[str, Any] = {
        "tools": {name: Tool(t.record, t.read_only) for name, t in rt.tools.items()},
        "traces": rt.wants_traces, "trace_wait_s": rt.trace_wait_s, "trace_port": rt.trace_port,
        "state": rt.state, "max_result_bytes": rt.max_result_bytes, "folder": rt.cwd}
    if rt.transport == "callable":
        from simrun.simulator.adapters import CallableRuntime

        return CallableRuntime(rt.target, timeout_s=rt.timeout_s, isolation=rt.isolation,
                               startup_timeout_s=rt.startup_timeout_s, **settings)
    from simrun.simulator.adapters import ChatRuntime, TemplateRuntime

    http: dict[str, Any] = {
        "url": rt.url, "headers": headers, "command": command_list(rt.command), "env": env, "cwd": rt.cwd,
        "timeout_s": rt.timeout_s, "startup_timeout_s": rt.startup_timeout_s, "concurrency": concurrency}
    # RuntimeSection's validation gives a chat transport its model, a template one its body and reply.
    if rt.transport == "chat":
        assert rt.model is not None
        return ChatRuntime(model=rt.model, **http, **settings)
    assert rt.body is not None and rt.reply is not None
    return TemplateRuntime(body=rt.body, reply=rt.reply, **http, **settings)


def user_backend(plan: Plan, ledger: CallLedger[Any] | None = None, replay=None, limiter=None) -> UserBackend:
    run = plan.project.run
    options = {"base_url": run.user_base_url} if run.user_base_url else {}
    return make_user(plan.user, budgets=plan.budgets, ledger=ledger, replay=replay, settings=plan.project.user,
                     output=run.user_output, limiter=limiter, **options)


async def execute(plan: Plan, store, *, user: UserBackend | None = None, runtime=None, replay=None,
                  ledger: Ledger | None = None, shard: tuple[int, int] | None = None, resume: bool | str = True,
                  on_conversation=None, on_user_ready=None, executor=None, upto: int | None = None) -> RunResult:
    """Run the plan. One ledger holds the budget for the user backend and the runner alike.
    `executor` runs the conversations (default: in this process; `simrun.simulator.executors`)."""
    ledger = ledger or Ledger(plan.budget)
    git = await asyncio.to_thread(git_state, Path.cwd())    # the folder simrun runs in
    result = await run_matrix(plan.dataset, runtime or runtime_for(plan), user or user_backend(plan, ledger, replay),
                              store, repetitions=plan.repetitions, seed=plan.seed, budget=plan.budget,
                              concurrency=plan.concurrency, config=plan.config(), ledger=ledger, shard=shard,
                              resume=resume if replay is None else False, on_conversation=on_conversation,
                              on_user_ready=on_user_ready, labels=plan.labels, git=git,
                              executor=executor, upto=upto)
    # Goals that name what no store held: the run's verdict blames the goal file, not the runtime.
    # Not in a shard: it holds part of the run, and a name another shard saw is not missing.
    if shard is None:
        record_goal_problems(store, result.run_id, plan.dataset.goals)
    return result


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`--shard i/n`: shard i (0-based) of n."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or int(m.group(2)) < 1 or int(m.group(1)) >= int(m.group(2)):
        raise ConfigError(f"{text!r}: write the shard as i/n with 0 <= i < n, e.g. 0/4", field="--shard")
    return int(m.group(1)), int(m.group(2))
