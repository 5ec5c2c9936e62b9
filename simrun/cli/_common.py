"""What the `simrun` commands share: the console, one-line errors (parameters spelled as flags),
the common options, and how a run's records are printed."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import IO, Any, NoReturn, cast

import typer
from rich import box
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from simrun import GateResult, Parameter, RunFacts, RunVerdict, Sequential, SimrunError, Status, text


class ClosableStdout:
    """Standard output whose reader may go away (`simrun | head`). What can no longer be written
    is dropped and the run goes on: its outcome, its store and its exit status do not depend on
    who reads its output."""

    def __init__(self) -> None:
        self.gone = False
        self.guard = text.CommandGuard()

    def write(self, written: str) -> int:
        if not self.gone:
            # The one way to standard output: secrets cut out, and no line a CI runner would take
            # for a workflow command (`::add-mask::`), whatever text it quotes.
            shown = self.guard(text.redact(written))
            try:
                sys.stdout.write(shown)
            except BrokenPipeError:
                self._drop()
        return len(written)

    def flush(self) -> None:
        if not self.gone:
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self.gone = True
        # The interpreter flushes stdout again at exit; pointed at /dev/null, that flush is quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)

    def isatty(self) -> bool:
        return sys.stdout.isatty()

    def fileno(self) -> int:
        return sys.stdout.fileno()

    @property
    def encoding(self) -> str:
        return sys.stdout.encoding


# Named here once: the console's `render_str` takes a parameter called `text`, as Rich names it.
escaped = text.escaped


class TextOnlyConsole(Console):
    """The one console every command prints through, and the one boundary for what it prints:
    whatever the text came from (a runtime's reply, a store, a file), its escape and control
    sequences, bidi and zero-width characters are shown escaped (`simrun.text.escaped`), and
    Rich markup is read from no text unless a call asks for it (`markup=False` by default). Rich's
    own styling is untouched: it is added after, to the segments this yields."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        # Escaped before Rich measures it, so that a table sizes its columns to what is shown.
        return super().render_str(escaped(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        # Text built elsewhere (rich.text.Text) reaches here unescaped: the last line of defence.
        for segment in super().render(renderable, options):
            if segment.control or not segment.text:
                yield segment
            else:
                yield Segment(escaped(segment.text), segment.style, segment.control)


def _console(**options: Any) -> Console:
    # ClosableStdout is the file-like object Rich writes to (write, flush, isatty, fileno, encoding).
    return TextOnlyConsole(file=cast(IO[str], ClosableStdout()), markup=False, emoji=False, **options)


out = _console()
if not out.is_terminal:
    out = _console(width=120)   # CI logs: keep class names whole


def err_line(line: str) -> None:
    # One line, never wrapped: editors and CI annotations jump to "file:line". Escaped as the
    # console's text is: an error may quote a file's name or a runtime's words.
    typer.secho(text.without_commands(text.escaped(text.redact(line), keep="")), err=True, fg="red", bold=True)


def say(line: str) -> None:
    """A line that may quote a server's words: printed as it is, never read as markup."""
    out.print(line, highlight=False, markup=False, soft_wrap=True)


def say_styled(line: str, style: str | None) -> None:
    out.print(line, highlight=False, soft_wrap=True, markup=False, style=style)


# The one translation from the Python API's parameters to the command line's flags: an error
# names the parameter it is about (`repetitions`), and the command line shows the flag that gives
# it (`--repetitions`). A parameter no command gives is shown by its name.
FLAGS = {
    "config": "--config", "budget": "--budget", "budgets": "--budgets", "db": "--db", "personas": "--personas",
    "goals": "--goals", "repetitions": "--repetitions", "seed": "--seed", "concurrency": "--concurrency",
    "user": "--user", "reports": "--reports", "labels": "--label", "replay": "--replay",
    "replay_only": "--replay-only", "shard": "--shard", "fresh": "--fresh", "sequential": "--sequential",
    "executor": "--executor", "ray_address": "--ray-address", "ray_workers": "--ray-workers",
    "verdict_json": "--verdict-json", "runtime_settings.transport": "--transport", "runtime_settings.url": "--url",
    "runtime_settings.command": "--runtime-command", "runtime_settings.timeout_s": "--timeout",
    "runtime_settings.headers": "--header", "baseline": "--baseline", "baseline_ref": "--baseline-ref",
    "history": "--history", "candidate": "--candidate", "markdown_file": "--markdown", "junit_file": "--junit",
    "out": "--out", "partial": "--partial", "shards": "SHARDS", "run": "RUN", "cls": "--class", "goal": "--goal",
    "play_goals": "--runtime", "threshold": "--threshold", "transport": "--transport", "url": "--url",
    "command": "--runtime-command", "target": "--target", "model": "--model", "package": "--package",
    "force": "--force",
}


def flag(parameter: Parameter) -> str:
    """A parameter of the API as the command line gives it: its flag, with the value a message
    suggests (`--executor ray`; a switch alone: `--force`)."""
    name = FLAGS.get(parameter.name, parameter.name)
    return name if parameter.value is None or parameter.value is True else f"{name} {parameter.value}"


def said(exc: SimrunError) -> str:
    """An error's message as the command line says it: each parameter it names, as its flag."""
    return exc.spelled(flag)


def fail(exc: SimrunError) -> NoReturn:
    err_line(f"error: {said(exc)}")
    raise typer.Exit(2)


CONFIG = typer.Option(None, "--config", help="Project file (default: ./simrun.toml if there is one).")
BUDGETS = typer.Option(None, "--budgets", help="Prices, default budget and gate thresholds (default: ./budgets.toml).")
DB = typer.Option(None, "--db", help="DuckDB file (default: run.db of simrun.toml, else simrun.duckdb).")
PERSONAS = typer.Option(None, "--personas", help="Folder of persona YAML files.")
TRANSPORT = typer.Option(None, "--transport", help="python, http or stdio (over simrun.toml's runtime.transport).")
URL = typer.Option(None, "--url", help="http: the base URL of a running runtime.")
RUNTIME_COMMAND = typer.Option(None, "--runtime-command", help="http or stdio: the command that starts the runtime.")
TIMEOUT = typer.Option(None, "--timeout", help="Seconds one runtime request may take (at most 86,400).")
HEADER = typer.Option(None, "--header", help="http: NAME=VALUE request header; ${VAR} is read from the environment.")
GOALS = typer.Option(None, "--goals", help="Folder of goal YAML files.")
EXECUTOR = typer.Option(None, "--executor", help="in-process (default), or ray: the conversations on the "
                        "workers of a Ray cluster (pip install 'simrun[ray]').")
RAY_ADDRESS = typer.Option(None, "--ray-address", help="ray: the cluster to join (default auto: the one running "
                           "on this machine, else a new one on its cores; local: always a new one).")
RAY_WORKERS = typer.Option(None, "--ray-workers", help="ray: workers to start (default: one per CPU of the cluster).")


def runtime_settings(transport: str | None, url: str | None, command: str | None, timeout: float | None,
                     headers: list[str] | None) -> dict[str, Any]:
    """Runtime settings given as flags, over simrun.toml's [runtime] (`runtime_settings` of the
    API): --url in place of the file's command, --runtime-command in place of its url."""
    flags: dict[str, Any] = {}
    if transport:
        flags["transport"] = transport
    if url:
        flags |= {"url": url, "command": None, "transport": transport or "http"}
    if command:
        flags |= {"command": command, "url": None}
    if timeout is not None:
        flags["timeout_s"] = timeout
    for item in headers or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            fail(SimrunError(f"--header: {name.strip() or item[:20]!r}...: write a header as NAME=VALUE (VALUE may "
                             "use ${VAR})"))
        flags.setdefault("headers", {})[name.strip()] = value
    return flags


def demo_said(bundled: bool) -> None:
    """The first line of a command that found no project here and took the bundled demo's."""
    if bundled:
        say("no simrun.toml here, and no personas/ or goals/: running the bundled demo (`simrun init` starts a "
            "project of your own)")


def print_summary(verdict: RunVerdict, facts: RunFacts) -> None:
    """The run's rates, the gate against the baseline if there was one, its rounds if it ran in
    rounds, and its verdict last; beside the rates, what `facts` holds (the first provider error,
    the user model's check-user result). Every figure is the library's (`simrun.RunVerdict`):
    this only prints it."""
    run_id = verdict.run_id
    outcome = verdict.outcome
    if outcome is None:     # a verdict made without its rates (`run_verdict` given no outcome): nothing to tabulate
        print_verdict(verdict)
        return
    table = Table(title=f"run {run_id}", title_justify="left")
    for col in ("class", "kind", "rate", "95% interval", "conversations", "UNVERIFIABLE"):
        table.add_column(col, justify="left" if col in ("class", "kind") else "right")
    for r in [*verdict.rates, outcome.runtime_error_rate]:
        low, high = r.interval
        style = "bold red" if r.occurrences and r.kind == "guarantee" else ("yellow" if r.occurrences else None)
        table.add_row(r.cls, r.kind, text.pct(r.rate), f"{text.pct(low)} – {text.pct(high)}",
                      f"{r.occurrences}/{r.scored}", str(r.unverifiable), style=style)
    out.print(table)
    low, high = outcome.goal_interval
    ends = ", ".join(f"{k} {v}" for k, v in outcome.ends.items())
    unverifiable = f", UNVERIFIABLE in {outcome.goal_unverifiable}" if outcome.goal_unverifiable else ""
    rate = (f"{text.pct(outcome.goal_rate)} ({outcome.goal_reached}/{outcome.goal_scored}, 95% {text.pct(low)} – "
            f"{text.pct(high)}")
    if text.rate_bounds_shown(outcome.goal_scored, outcome.goal_unverifiable):
        # Much undecided: the rate over the decided alone could be far from the truth; its bounds lead.
        said = (f"{text.rate_bounds(outcome.goal_reached, outcome.goal_scored, outcome.goal_unverifiable)}; "
                + (f"{rate} of the decided)" if outcome.goal_scored else "no conversation decided it"))
    else:
        said = f"{rate}{unverifiable})"
    out.print(f"goal reached: {said}; ends: {ends}", highlight=False, soft_wrap=True)
    if outcome.runtime_errors:
        out.print(f"the runtime failed in {outcome.runtime_errors} conversation(s): `simrun show {run_id} "
                  "--class runtime_error` lists them, and `simrun show RUN CONVERSATION` shows each one's evidence",
                  style="yellow", highlight=False, markup=False, soft_wrap=True)
    first = facts.first_provider_error
    if first is not None:
        message = first.get("server_message") or first.get("message")
        out.print(f"first provider error ({first['conversation_id']}, turn {first.get('turn')}): {message}",
                  style="yellow", highlight=False, markup=False, soft_wrap=True)
    print_competence(facts)
    if verdict.gate is not None:
        print_gate(verdict.gate)
    if verdict.sequential is not None:
        print_rounds(verdict.sequential)
    print_verdict(verdict)


def print_rounds(rounds: Sequential) -> None:
    """The sequential gate's looks, one line each (`simrun.text.round_line`)."""
    say(f"sequential gate: {len(rounds.looks)} look(s), cap {rounds.settings.max_rounds} rounds of "
        f"{rounds.settings.per_round} repetition(s) per cell")
    for look in rounds.looks:
        say(f"  round {text.round_line(look, rounds.settings)}")


STYLES = {"status": "bold", "reason": "bold red", "held": "green", "not_checked": "yellow"}
STATUS_STYLES = {Status.PASSED: "bold green", Status.INCONCLUSIVE: "bold yellow",
                 Status.INCOMPLETE: "bold yellow"}     # else bold red


def print_verdict(verdict: RunVerdict) -> None:
    """The run's verdict, the last lines a run prints: one line per reason, per thing that held,
    and per thing not checked. A run nothing judged also says so on stderr, as an error."""
    for part, line in verdict.lines():
        style = STYLES[part] if part != "status" else STATUS_STYLES.get(verdict.status, "bold red")
        out.print(line, style=style, highlight=False, markup=False, soft_wrap=True)
    if verdict.status is Status.NOT_JUDGED and verdict.reasons:
        err_line(f"error: {verdict.reasons[0].text}; see the lines above")


def print_gate(result: GateResult) -> None:
    """The gate's table and lists; narrower than the Markdown table, so that a CI log of 120
    columns keeps every row on a line."""
    table = Table(title=f"gate: candidate {result.candidate.run_id} vs baseline {result.baseline.run_id} "
                        f"({result.baseline.source})", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    cols = [("class", "class"), ("rates", "base → candidate"), *[c for c in text.gate_columns(result)
                                                                     if c[0] not in ("class", "kind", "baseline",
                                                                                     "candidate")]]
    for key, title in cols:
        table.add_column(title, justify="left" if key in ("class", "verdict") else "right", no_wrap=True)
    for row, c in zip(text.gate_rows(result), result.classes):
        row["rates"] = f"{row['baseline']} → {row['candidate']}"
        table.add_row(*(row[key] for key, _ in cols), style="bold red" if c.failed else None)
    out.print(table)
    if result.left_out:
        say_styled(text.gate_left_out(result), "yellow")
        for line in text.gate_sharing(result):
            say_styled(f"  {line}", "yellow")
    for line in result.regressions():
        say_styled(line, "bold red")
    moved, more = text.gate_moved(result)
    say("cells whose rate rose most (descriptive, not tested):" if moved else more)
    for line in moved:
        say(f"  {line}")
    if moved and more:
        say(f"  {more}")
    say(text.gate_flip_summary(result))
    flips, rest = text.gate_flips(result)
    for line in flips + ([rest] if rest else []):
        say(f"  {line}")
    say_styled(text.gate_method(result), "dim")
    say_styled(result.headline(), "green" if result.passed else "bold red")


def print_competence(facts: RunFacts) -> None:
    """The user model's check-user result beside the rates, or how to get one."""
    if facts.user == "scripted":
        return
    found = facts.competence
    if found is None:
        out.print(f"no check-user result for {facts.user}: `simrun check-user --user {facts.user}` measures how "
                  "often it reaches goals that are known to be reachable", highlight=False, soft_wrap=True)
        return
    out.print(found.headline(), style="yellow" if found.low else None, highlight=False, soft_wrap=True)
    if found.warning():
        out.print(f"WARNING: {found.warning()}", style="bold yellow", highlight=False, soft_wrap=True)
