"""A plan made to run: its runtime and its user made from its settings, and the matrix run.

`simrun.simulator._project` loads and checks a project into a `Plan`; this module makes what the
plan names (the runtime adapter of its transport, the user backend of its user, each with the
secrets they read from the environment) and runs it (`execute`). The run's API, a Ray worker
and `simrun init`'s probe all make their runtime and user here.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simrun import _secrets as secrets
from simrun._errors import ConfigError
from simrun._settings import FOREIGN, RuntimeSection
from simrun.scoring.store import Finished, Store, record_goal_problems
from simrun.simulator._identity import git_state
from simrun.simulator._ledger import CallLedger, Ledger
from simrun.simulator._limits import RateLimiter
from simrun.simulator._project import Plan, command_list
from simrun.simulator._runner import ClusterExecutor, RunResult, run_matrix
from simrun.simulator.adapters import PythonRuntime, RuntimeAdapter, StdioRuntime, instantiated
from simrun.simulator.users import ReplayCache, UserBackend, make_user

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(value: str, where: str) -> str:
    """${VAR} from the environment; a missing variable is refused with its name."""
    def one(m: re.Match[str]) -> str:
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


def runtime_for(plan: Plan) -> RuntimeAdapter:
    """The adapter for the plan's transport. Secrets are read from the environment only here."""
    return runtime_of(plan.runtime, plan.concurrency, plan.runtime_object)


def runtime_of(rt: RuntimeSection, concurrency: int = 8, given: Any = None) -> RuntimeAdapter:
    """The adapter for a [runtime] table, `concurrency` requests at once at most. `given`: the
    runtime as a Python caller gave it (a class, an instance, a function), used in place of
    importing `rt.target`."""
    if rt.transport == "python":
        if given is None:
            return PythonRuntime.from_target(rt.target, rt.options, folder=rt.cwd,
                                             max_result_bytes=rt.max_result_bytes)
        # A class is made anew for each adapter, with its options, as a target's class is.
        made = instantiated(given, rt.options, rt.target) if isinstance(given, type) else given
        return PythonRuntime(made, max_result_bytes=rt.max_result_bytes)
    env = {k: expand(v, f"runtime.env.{k}") for k, v in rt.env.items()}
    headers = {k: expand(v, f"runtime.headers.{k}") for k, v in rt.headers.items()}
    for name, value in headers.items():
        secrets.register_header(name, value)
    secrets.register_url(rt.url)
    if rt.transport in FOREIGN:
        return foreign_runtime(rt, env, headers, concurrency, given)
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


def foreign_runtime(rt: RuntimeSection, env: dict[str, str], headers: dict[str, str], concurrency: int,
                    given: Any = None) -> RuntimeAdapter:
    """An assistant with no protocol code: a function, an OpenAI-compatible endpoint, or any JSON
    endpoint through a body template (docs/any-assistant.md). `given`: the function itself."""
    from simrun.simulator.adapters import Tool

    settings: dict[str, Any] = {
        "tools": {name: Tool(t.record, t.read_only) for name, t in rt.tools.items()},
        "traces": rt.wants_traces, "trace_wait_s": rt.trace_wait_s, "trace_port": rt.trace_port,
        "state": rt.state, "max_result_bytes": rt.max_result_bytes, "folder": rt.cwd}
    if rt.transport == "callable":
        from simrun.simulator.adapters import CallableRuntime

        return CallableRuntime(rt.target, timeout_s=rt.timeout_s, isolation=rt.isolation,
                               startup_timeout_s=rt.startup_timeout_s, function=given, **settings)
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


def user_backend(plan: Plan, ledger: CallLedger[Any] | None = None, replay: ReplayCache | None = None,
                 limiter: RateLimiter | None = None) -> UserBackend:
    """The plan's user. Made before a run only to check it (an unknown backend, or one without its
    key or price, is refused), then again by each run with the run's ledger."""
    run = plan.project.run
    options = {"base_url": run.user_base_url} if run.user_base_url else {}
    return make_user(plan.user, budgets=plan.budgets, ledger=ledger, replay=replay, settings=plan.project.user,
                     output=run.user_output, limiter=limiter, **options)


async def execute(plan: Plan, store: Store, *, user: UserBackend | None = None, runtime: RuntimeAdapter | None = None,
                  replay: ReplayCache | None = None, ledger: Ledger | None = None, shard: tuple[int, int] | None = None,
                  resume: bool | str = True, on_conversation: Callable[[Finished], None] | None = None,
                  on_user_ready: Callable[[str], None] | None = None, executor: ClusterExecutor | None = None,
                  upto: int | None = None) -> RunResult:
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
