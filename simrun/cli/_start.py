"""A team's first hour: `simrun init` (a project for their own runtime) and `simrun demo` (the
bundled demo with faults planted, to see what a finding looks like)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
import typer.core

from simrun import SimrunError, init, prepare_demo
from simrun.cli._common import RUNTIME_COMMAND, URL, fail, out
from simrun.cli._run import run_and_report

TRANSPORTS = ("http", "stdio", "python", "chat", "callable")


def register(app: typer.Typer) -> None:
    @app.command("init")
    def init_command(
            ctx: typer.Context,
            folder: str = typer.Argument(".", help="The project's folder (default: here), e.g. the runtime's "
                                         "repository."),
            transport: Optional[str] = typer.Option(None, "--transport", help="How simrun reaches the runtime: "
                                                    "http, stdio, python, chat or callable (asked when a terminal)."),
            url: Optional[str] = URL,
            runtime_command: Optional[str] = RUNTIME_COMMAND,
            target: Optional[str] = typer.Option(None, "--target", help="python: module:Class (or file.py:Class); "
                                                 "callable: module:function."),
            model: Optional[str] = typer.Option(None, "--model", help="chat: the model name the endpoint serves."),
            package: Optional[str] = typer.Option(None, "--package", help="How CI installs simrun, as a pip "
                                                  "requirement (default: the git URL and commit this simrun came "
                                                  "from, or its version from an index; from a local wheel or "
                                                  "folder, a step to fill in)."),
            force: bool = typer.Option(False, "--force", help="Overwrite files that already exist."),
            check: bool = typer.Option(True, "--check/--no-check", help="Run check-runtime on the new project."),
    ) -> None:
        """Write simrun.toml, starter personas and goals for YOUR runtime, and a CI workflow that gates
        pull requests; then run check-runtime against it."""
        if transport is None and _terminal():
            transport, url, runtime_command, target = _ask()
        try:
            written = init(folder, transport=transport or "http", url=url, command=runtime_command, target=target,
                           model=model, package=package, force=force)
        except SimrunError as exc:
            fail(exc)
        where = written.folder
        seen = written.seen
        for path in written.files:
            out.print(f"wrote {path}", highlight=False)
        install = written.install
        if install is not None and install.requirement is None:
            out.print(f"the workflow's install step is left to fill in: this simrun came from {install.where}, which "
                      "CI cannot reach; write your team's install line there (or pass --package)", style="yellow",
                      highlight=False, markup=False, soft_wrap=True)
        elif install is not None and install.note:
            out.print(f"note: {install.note}", style="yellow", highlight=False, markup=False, soft_wrap=True)
        elif install is not None:
            out.print(f"the workflow installs {install.requirement}", highlight=False, markup=False, soft_wrap=True)
        if seen.problem:
            out.print(f"the runtime could not be asked what it offers ({seen.problem}); the goals are a start",
                      style="yellow", highlight=False, markup=False, soft_wrap=True)
        elif not seen.offers:
            out.print(f"{seen.runtime} offered no operation in its first reply: write a goal for each thing it "
                      "does (docs: 'Write a goal')", style="yellow", highlight=False, soft_wrap=True)
        else:
            ops = ", ".join(o["operation"] for o in seen.offers)
            out.print(f"{seen.runtime} {seen.version} offers {ops}: one starter goal each", highlight=False,
                      soft_wrap=True)
        if check:
            # The very command `simrun check-runtime --config DIR/simrun.toml` runs, with its exit status.
            root = ctx.find_root().command
            assert isinstance(root, typer.core.TyperGroup)     # the `simrun` app: a group of commands
            check_runtime = root.get_command(ctx, "check-runtime")
            assert check_runtime is not None and check_runtime.callback is not None
            defaults = {p.name: p.default for p in check_runtime.params}
            ctx.invoke(check_runtime.callback, **{**defaults, "config": str(where / "simrun.toml")})
        goto = "" if where.resolve() == Path.cwd().resolve() else f"cd {where} && "
        out.print(f"next: {goto}simrun --budget 5usd", highlight=False)

    @app.command("demo")
    def demo_command(db: Optional[str] = typer.Option(None, "--db", help="DuckDB file (default: "
                                                      "simrun-demo.duckdb, so that your `latest` run stays yours)."),
                     reports: Optional[str] = typer.Option(None, "--reports", help="Folder for the HTML report."),
                     repetitions: Optional[int] = typer.Option(
                         None, "--repetitions", "-n", help="Conversations per persona x goal cell (default 5).")
                     ) -> None:
        """Run the bundled demo with faults planted in its runtime, to see what findings look like:
        a dead end, a loop and a broken guarantee, each with its transcripts, in the report.

        Its own database by default (simrun-demo.duckdb), so your `latest` run stays yours. Exits 1:
        a broken guarantee fails a run."""
        try:
            prepared = prepare_demo(repetitions=repetitions, db=db, reports=reports)
        except SimrunError as exc:
            fail(exc)
        run_and_report(prepared)


def _terminal() -> bool:
    """Whether a person can answer prompts (a test stands in for one)."""
    return sys.stdin.isatty()


def _ask() -> tuple[str, str | None, str | None, str | None]:
    """transport, url, command, target: what `simrun init` needs, asked one at a time."""
    transport = typer.prompt(f"transport ({', '.join(TRANSPORTS)})", default="http")
    url = command = target = None
    if transport in ("python", "callable"):
        target = typer.prompt("target (module:name or file.py:name)")
    elif transport == "stdio":
        command = typer.prompt("command that starts the runtime")
    else:
        command = typer.prompt("command that starts it ({port} is replaced; empty: it is already running)",
                               default="", show_default=False) or None
        if command is None:
            url = typer.prompt("its base URL", default="http://127.0.0.1:8000")
    return transport, url, command, target
