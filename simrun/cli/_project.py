"""The commands that check a project before a run: `validate`, `check-runtime`, `plan`, `schema`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import typer
from rich.table import Table

from simrun import ConfigError, Conformance, SimrunError, check_runtime, estimate_cost, text, validate, write_schemas
from simrun.cli._common import (
    BUDGETS,
    CONFIG,
    GOALS,
    HEADER,
    PERSONAS,
    RUNTIME_COMMAND,
    TIMEOUT,
    TRANSPORT,
    URL,
    demo_said,
    fail,
    out,
    runtime_settings,
)
from simrun.cli._tables import fit, tokens


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate_command(
            config: Optional[str] = CONFIG, budgets: Optional[str] = BUDGETS,
            personas: Optional[str] = PERSONAS, goals: Optional[str] = GOALS,
            transport: Optional[str] = TRANSPORT, url: Optional[str] = URL,
            runtime_command: Optional[str] = RUNTIME_COMMAND, timeout: Optional[float] = TIMEOUT,
            header: Optional[list[str]] = HEADER,
            live: bool = typer.Option(False, "--runtime", help=(
                "Also play each goal once with the scripted user (free) against the runtime, and name "
                "the goals that name record fields, record types or operations it never held."))) -> None:
        """Check personas, goals, simrun.toml and budgets.toml, and that the runtime answers."""
        settings = runtime_settings(transport, url, runtime_command, timeout, header)
        try:
            validated = validate(config=config, budgets=budgets, personas=personas, goals=goals,
                                 runtime_settings=settings, play_goals=live, demo_if_no_project=True)
        except SimrunError as exc:
            fail(exc)
        plan, health, checked = validated.plan, validated.health, validated.goals
        demo_said(plan.bundled_demo)
        files = ", ".join(f"{p} ok" for p in plan.files) or "no simrun.toml or budgets.toml (defaults)"
        out.print(f"ok: {len(plan.dataset.personas)} personas, {len(plan.dataset.goals)} goals "
                  f"(dataset {plan.dataset.hash}); {files}; runtime {identity(health)} speaks protocol "
                  f"{health['protocol']}", highlight=False, soft_wrap=True)
        if checked is None:
            return
        played = f"{checked.conversations} conversations with the scripted user, nothing spent"
        if not checked.problems:
            out.print(f"goals ok against the runtime ({played}): every field, type and operation they name "
                      "was held", highlight=False, soft_wrap=True)
            return
        for line in checked.problems:
            out.print(f"goal file: {line}", style="red", highlight=False, markup=False, soft_wrap=True)
        fail(ConfigError(f"{len(checked.problems)} goal problem(s) above, found against the runtime ({played}): "
                         "fix the goal files"))


    @app.command("check-runtime")
    def check_runtime_command(
            config: Optional[str] = CONFIG, personas: Optional[str] = PERSONAS, goals: Optional[str] = GOALS,
            goal: Optional[str] = typer.Option(None, "--goal", help="The goal whose setup and words to use."),
            transport: Optional[str] = TRANSPORT, url: Optional[str] = URL,
            runtime_command: Optional[str] = RUNTIME_COMMAND, timeout: Optional[float] = TIMEOUT,
            header: Optional[list[str]] = HEADER) -> None:
        """Hold a short conformance conversation with the runtime and report what it supplies.

        Exit 0 when it keeps protocol 1, 1 on a protocol violation, 2 when it cannot be reached."""
        settings = runtime_settings(transport, url, runtime_command, timeout, header)
        try:
            checked = check_runtime(config=config, personas=personas, goals=goals, goal=goal,
                                    runtime_settings=settings, demo_if_no_project=True)
        except SimrunError as exc:
            fail(exc)
        report = checked.report
        demo_said(checked.plan.bundled_demo)
        health = report.health or {}
        out.print(f"runtime {report.runtime}: {identity(health)}, protocol "
                  f"{health.get('protocol')}; probe goal {checked.goal}, {len(report.turns)} turns", highlight=False,
                  soft_wrap=True)
        ops = Table(title="operations", title_justify="left")
        ops.add_column("operation")
        ops.add_column("")
        for op in ("health", "start", "turn", "state", "audit", "close"):
            ops.add_row(op, report.operations.get(op, "not called"))
        out.print(ops)
        if report.crash is not None:
            crash = report.crash
            where = f"in turn {crash['turn']}" if crash.get("turn") else "at start"
            out.print(f"CRASH {where} ({crash['kind']}): {crash['message']}", style="red", highlight=False,
                      markup=False, soft_wrap=True)
            tail = crash.get("traceback") or crash.get("stderr")
            if tail:
                out.print("    " + tail.strip().replace("\n", "\n    "), highlight=False, markup=False, soft_wrap=True)
        fields = Table(title="turn-result fields (turns that carried each)", title_justify="left")
        fields.add_column("field")
        fields.add_column("turns", justify="right")
        answered = sum(1 for t in report.turns if t.result is not None)
        for name, n in report.field_presence().items():
            fields.add_row(name, f"{n}/{answered}", style=None if n == answered else "yellow")
        out.print(fields)
        print_ladder(report)
        unverifiable = report.unverifiable()
        if unverifiable:
            out.print("UNVERIFIABLE in a run (never counted as passes):", style="yellow")
            for cls, lacking in unverifiable.items():
                out.print(f"  {cls}: needs {', '.join(lacking)}", highlight=False, markup=False)
        else:
            out.print("every class and guarantee can be checked", style="green")
        for v in report.violations:
            out.print(f"VIOLATION at {v.where}: {v.problem}\n    {v.json}", style="red", highlight=False,
                      markup=False, soft_wrap=True)
        if report.violations:
            raise typer.Exit(1)
        out.print("protocol 1 kept", style="green")


    def print_ladder(report: Conformance) -> None:
        """The evidence ladder: the rung the runtime reaches, what each rung checks, how to climb."""
        level = report.level()
        ladder = Table(title=f"evidence: level {level} of 4 ({report.ladder()[level].name})", title_justify="left")
        for col in ("level", "evidence", "", "checks in full", "in part"):
            ladder.add_column(col)
        for rung in report.ladder():
            mark = "reached" if rung.level <= level else ("given" if rung.given else "not given")
            ladder.add_row(str(rung.level), rung.name, mark, ", ".join(rung.checks) or "–",
                           "; ".join(rung.partly) or "–", style=None if rung.level <= level else "yellow")
        out.print(ladder)
        # What the trace receiver saw: the conventions, the tool calls read from each, what was unread.
        for line, style in report.trace_lines():
            out.print(line, style=style, highlight=False, markup=False, soft_wrap=True)
        receipts = report.receipts_line()
        if receipts is not None:
            out.print(receipts, highlight=False, markup=False, soft_wrap=True)
        if level + 1 < len(report.ladder()):
            rung = report.ladder()[level + 1]
            out.print(f"to reach level {rung.level} ({rung.name}): {rung.how}", highlight=False, markup=False,
                      soft_wrap=True)

    @app.command("plan")
    def plan_command(
            budget: Optional[str] = typer.Option(None, "--budget", help="The budget to compare with, e.g. 5usd."),
            config: Optional[str] = CONFIG, budgets: Optional[str] = BUDGETS, personas: Optional[str] = PERSONAS,
            goals: Optional[str] = GOALS,
            repetitions: Optional[int] = typer.Option(None, "--repetitions", "-n"),
            seed: Optional[int] = typer.Option(None, "--seed"),
            user: Optional[str] = typer.Option(None, "--user", help="Price only this backend (default: every "
                                               "priced one)."),
            transport: Optional[str] = TRANSPORT, url: Optional[str] = URL,
            runtime_command: Optional[str] = RUNTIME_COMMAND, timeout: Optional[float] = TIMEOUT,
            header: Optional[list[str]] = HEADER) -> None:
        """Estimate what the matrix costs per model backend, before spending anything.

        A free dry run with the scripted user gives the conversations' lengths; their prompts are
        priced with budgets.toml, the stable prefix as cached after each conversation's first call."""
        settings = runtime_settings(transport, url, runtime_command, timeout, header)
        try:
            priced = estimate_cost(budget=budget, config=config, budgets=budgets, personas=personas, goals=goals,
                                   repetitions=repetitions, seed=seed, user=user, runtime_settings=settings,
                                   demo_if_no_project=True)
        except SimrunError as exc:
            fail(exc)
        plan, estimates = priced.plan, priced.estimates
        demo_said(plan.bundled_demo)
        rows = [["scripted", "0", "0", "0", "0", "0", "$0.00", "$0.00", f"{plan.conversations} (all)"]]
        for e in estimates:
            share = f"{e.affordable} ({e.affordable / e.conversations:.0%})" if e.conversations else "–"
            rows.append([e.backend, str(e.calls), tokens(e.usage.input_tokens), tokens(e.usage.cached_input_tokens),
                         tokens(e.usage.cache_write_tokens), tokens(e.usage.output_tokens), e.range_text,
                         f"${e.per_conversation:.5f}", share])
        out.print(f"{plan.conversations} conversations, budget {text.usd(plan.budget)}; tokens: input, read from the "
                  "cache, written to it, output", highlight=False, soft_wrap=True)
        headers = ["backend", "calls", "input", "cached", "writes", "output", "cost p50–p90", "per conv.",
                   "budget buys"]
        title, lines = fit(headers, rows, right=set(range(1, 9)))   # `header` is the --header option
        for line in (title, *lines):
            out.print(line, highlight=False, soft_wrap=True)
        for e in estimates:
            out.print(f"{e.backend}: {e.basis}", highlight=False, soft_wrap=True)
        out.print("a prior counts tokens as characters / 4; a run prints its actual spend beside its estimate",
                  highlight=False)


    @app.command()
    def schema(out_dir: str = typer.Option("schemas", "--out", help="Folder to write the JSON Schemas to.")) -> None:
        """Write the JSON Schemas of persona and goal files, for editors."""
        try:
            written = write_schemas(out_dir)
        except SimrunError as exc:
            fail(exc)
        for path in written:
            out.print(f"wrote {path}", highlight=False)


def identity(health: Mapping[str, Any]) -> str:
    """The runtime's name and version as its health gave them, leaving out what it did not give
    (an assistant with no protocol code has neither)."""
    return " ".join(str(health[key]) for key in ("runtime", "version") if health.get(key)) or "(unnamed)"
