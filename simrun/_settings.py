"""simrun's settings: the models of simrun.toml and budgets.toml, with their bounds, read from a file or a store.

One module at the bottom layer, so that the simulator, the judge and the gate take the same
models: a model built with no arguments is the defaults, and every bound is stated once.

- `simrun.toml` (`Project`): what to run (personas, goals, repetitions, seed, user backend) and
  the runtime to run it against. Optional: without it the bundled demo defaults apply.
- `budgets.toml` (`Budgets`): money and judgement (the default budget, model prices, rate
  limits, gate thresholds, the sequential gate, the criteria a run must meet to be released).
  Optional too; a file that exists must be right.

Two boundaries read them. A file (`load_project`, `load_budgets`): every error names the file,
line and field. A store (`stored_sequential`, `stored_release`): a run keeps the settings it was
judged with, and a database may be a crafted file, so what is read back goes through the same
models and bounds, strictly (exactly the types simrun wrote), never rebuilt field by field.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from simrun import _input_files as input_files
from simrun._classes import CeilingClass
from simrun._errors import ConfigError, StoreError
from simrun._field_errors import first_problem
from simrun._labels import clean_labels
from simrun._money import parse_usd
from simrun._storable import BIGINT_MAX, BIGINT_MIN, MAX_REPETITIONS, first_unstorable

# A request or a model call that may wait longer than a day is a hang, not a setting; and an
# unbounded wait (inf) reaches asyncio's deadlines and the run's stored configuration.
MAX_TIMEOUT_S = 86_400


class _Model(BaseModel):
    # No NaN or infinity in any setting: a run's settings are stored with it, as JSON.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


M = TypeVar("M", bound=_Model)


class BudgetSection(_Model):
    default: str = Field(default="5usd", description="Budget of a run when --budget is not given.")
    per_conversation: str | None = Field(default=None, description="Most one conversation may spend.")

    @field_validator("default", "per_conversation")
    @classmethod
    def _amount(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_usd(value, where="budget")
            except ConfigError as exc:
                raise ValueError(str(exc).split(": ", 1)[-1]) from None
        return value


# A dollar a token: far above any model's price, and low enough that every cost is an amount the
# ledger and the store can count.
MAX_PER_MTOK = 1_000_000


class Price(_Model):
    input_per_mtok: Decimal = Field(ge=0, le=MAX_PER_MTOK, description="USD per million input tokens.")
    cached_input_per_mtok: Decimal | None = Field(
        default=None, ge=0, le=MAX_PER_MTOK,
        description="USD per million input tokens read from the prompt cache (default: the input price).")
    cache_write_per_mtok: Decimal | None = Field(
        default=None, ge=0, le=MAX_PER_MTOK,
        description="USD per million input tokens written to the prompt cache (default: the input price).")
    output_per_mtok: Decimal = Field(ge=0, le=MAX_PER_MTOK, description="USD per million output tokens.")


class Limit(_Model):
    requests_per_minute: int | None = Field(default=None, gt=0, description="Most calls a minute to this backend.")
    tokens_per_minute: int | None = Field(default=None, gt=0, description="Most tokens (prompt and answer) a minute.")
    window_s: float = Field(default=60.0, ge=1, le=60, description=(
        "Seconds the limits are held over: any window of this length holds at most its share of a "
        "minute's limits (60: any minute holds them; 1: any second holds a sixtieth)."))


class SequentialSection(_Model):
    max_rounds: int = Field(default=20, ge=1, le=1_000, description=(
        "The sequential gate's round cap: undecided there is inconclusive (exit 3)."))
    per_round: int = Field(default=1, ge=1, le=100, description="Repetitions of every cell per round.")
    spending: float = Field(default=1.0, gt=0, le=10, description=(
        "rho of the alpha-spending function alpha * (round / max_rounds) ** rho: larger spends less early."))
    beta: float = Field(default=0.10, gt=0, lt=0.5, description=(
        "The pass side's error: the chance of passing a class whose rate rose by gate.min_effect."))
    beta_spending: float = Field(default=0.5, gt=0, le=10, description=(
        "rho of the beta-spending function beta * (round / max_rounds) ** rho: smaller lets a clean run pass sooner."))
    exact: bool = Field(default=True, description=(
        "The fail side's level at each look from the looks' joint law, by reassigning the rounds too "
        "(false: each look tests at its increment of alpha, the union bound)."))


class GateSection(_Model):
    alpha: float = Field(default=0.05, gt=0, lt=1,
                         description="The chance of any false alarm, over every class and slice.")
    min_effect: float = Field(default=0.05, ge=0, lt=1, description="Smallest rise of a class rate worth failing on.")
    min_effect_slice: float = Field(default=0.20, ge=0, lt=1, description=(
        "Smallest rise of a class rate within one goal or one persona worth failing on."))
    correction: Literal["max-t", "holm", "bonferroni"] = Field(
        default="max-t", description="How the false-alarm rate is held over every class and slice.")
    permutations: int = Field(default=10_000, ge=1_000, le=1_000_000, description="Reassignments drawn by the test.")
    sequential: SequentialSection = Field(default_factory=SequentialSection, description=(
        "The sequential gate (`simrun --sequential`, `simrun gate --sequential`)."))


# The release criteria's defaults (simrun.scoring.gate._release says why these).
DEFAULT_PROGRESS_CEILING = 0.10
DEFAULT_GOAL_FLOOR = 0.50       # min_goal_reached not set


class ReleaseSection(_Model):
    fail_on_runtime_error: bool = Field(default=True, description="A run with any runtime_error fails.")
    min_goal_reached: float | None = Field(default=None, ge=0, le=1, description=(
        "The goal-reached rate a run must reach (not set: 50%; 0 switches it off)."))
    max_rate: dict[CeilingClass, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=dict, description="Class -> the highest rate a run may have.")
    progress_ceiling: float = Field(default=DEFAULT_PROGRESS_CEILING, ge=0, le=1, description=(
        "The ceiling of each progress class that max_rate does not name (1.0 switches it off)."))


class Budgets(_Model):
    budget: BudgetSection = BudgetSection()
    prices: dict[str, Price] = Field(default_factory=dict, description="Backend spec -> price.")
    limits: dict[str, Limit] = Field(default_factory=dict, description="Backend spec -> rate limits.")
    gate: GateSection = GateSection()
    release: ReleaseSection = ReleaseSection()


class RunSection(_Model):
    personas: str = "personas"
    goals: str = "goals"
    repetitions: int = Field(default=5, ge=1, le=MAX_REPETITIONS)
    # The store keeps the seed as a BIGINT: a larger one is refused here, not at the first write.
    seed: int = Field(default=1, ge=BIGINT_MIN, le=BIGINT_MAX)
    concurrency: int = Field(default=8, ge=1, le=4096)
    user: str = "scripted"
    user_base_url: str | None = Field(
        default=None, description="openai: an OpenAI-compatible server (vLLM, Ollama, a proxy).")
    user_output: Literal["auto", "json_schema", "json_object", "guided_json", "tools", "prompt"] = Field(
        default="auto",
        description="openai: the structured-output form the user model answers in; auto probes the server.")
    db: str = "simrun.duckdb"
    reports: str = "reports"
    labels: list[str] = Field(default_factory=list, description=(
        "Names the run carries (a release, a branch), shown in `simrun runs`, its report and the dashboard "
        "(`--label` replaces them)."))
    history: str | None = Field(default=None, description=(
        "Where `simrun history keep` keeps finished runs, one file each, and where `--history` reads them: a "
        "folder (relative to simrun.toml) or an object-store URL (s3://bucket/prefix; needs simrun[history])."))

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: list[str]) -> list[str]:
        return list(clean_labels(value))


class ToolSection(_Model):
    """How a tool the runtime calls (read from its traces) is turned into a store event."""

    record: str | None = Field(default=None, description=(
        "The argument that names the record it writes (`booking_id`), or a template over its "
        "arguments (`booking:{booking_id}`)."))
    read_only: bool = Field(default=False, description="The tool only reads: its calls are not events.")


FOREIGN = ("callable", "chat", "template")     # transports with no protocol code (docs/any-assistant.md)


class RuntimeSection(_Model):
    transport: Literal["python", "http", "stdio", "callable", "chat", "template"] = Field(
        default="python", description="How the runtime is reached.")
    target: str = Field(default="simrun.examples.tripdesk:TripDesk", description=(
        "python: module:Class (or file.py:Class); callable: module:function."))
    options: dict[str, Any] = Field(default_factory=dict, description="python: keyword arguments for the runtime.")
    url: str | None = Field(default=None, description=(
        "http: the base URL of a runtime that is already running; chat: the OpenAI-compatible base URL "
        "(http://host/v1); template: the endpoint each turn is POSTed to. {port}: the port of a started command."))
    command: list[str] | str | None = Field(
        default=None, description=("http, chat, template: the command simrun starts ({port} is replaced); stdio: the "
                           "child to run."))
    cwd: str | None = Field(default=None, description=(
        "The started command's working directory (default: the folder of simrun.toml; relative to it)."))
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the started command.")
    timeout_s: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT_S,
                             description="Seconds one request may take before it is a runtime_error.")
    startup_timeout_s: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT_S, description=(
        "Seconds a runtime simrun started has to answer first: http, its /v1/health; stdio, its first answer."))
    headers: dict[str, str] = Field(
        default_factory=dict, description=("http, chat, template: request headers; ${VAR} is read from the "
                                           "environment, never stored."))
    max_result_bytes: int = Field(
        default=1 << 20, ge=1024, le=1 << 30,
        description="The most of any one answer simrun reads; a larger one ends its conversation as runtime_error.")
    model: str | None = Field(default=None, description="chat: the model name sent with every request.")
    body: dict[str, Any] | None = Field(default=None, description=(
        "template: the JSON request body; {message}, {messages} and {session} are filled in each turn."))
    reply: str | None = Field(default=None, description=(
        "template: JSON pointer to the reply's text in the answer (chat: /choices/0/message/content)."))
    tools: dict[str, ToolSection] = Field(default_factory=dict, description=(
        "callable, chat, template: tool name -> how its calls (from the runtime's traces) become events."))
    traces: bool | None = Field(default=None, description=(
        "callable, chat, template: receive the runtime's OpenTelemetry traces (default: when tools are set)."))
    trace_wait_s: float = Field(default=6.0, ge=0, le=60, description=(
        "Most seconds to wait after a reply for the turn's spans (the wait ends when the runtime's own span "
        "for the turn has arrived): above the OpenTelemetry SDK's 5 s batch delay, so that a default exporter "
        "is waited for."))
    trace_port: int | None = Field(default=None, ge=1, le=65535, description=(
        "The port of simrun's trace receiver on 127.0.0.1 (default: a free one, which simrun gives the runtimes "
        "it starts). Set it (4318 is OTLP/HTTP's own) for an assistant simrun does not start, whose exporter "
        "must know where to send."))
    state: str | None = Field(default=None, description=(
        "callable, chat, template: a hook that returns the session's records: module:function(session) or "
        "a URL ({session} is filled in)."))
    isolation: Literal["thread", "process"] = Field(default="thread", description=(
        "callable: where a sync function runs. thread (default): a thread of simrun's process, which a "
        "function stuck holding the GIL (a runaway regular expression) holds whole, its timeouts and exit "
        "too; process: worker processes, one per open conversation, killed at timeout_s."))

    @model_validator(mode="after")
    def _transport_needs(self) -> RuntimeSection:
        if self.transport == "http" and (self.url is None) == (self.command is None):
            raise ValueError("the http transport needs exactly one of url (a running server) or command "
                             "(simrun starts it)")
        if self.transport == "stdio" and not self.command:
            raise ValueError("the stdio transport needs command, the program to run")
        if self.transport in ("chat", "template") and self.url is None:
            raise ValueError(f"the {self.transport} transport needs url, the endpoint to send each turn to "
                             "(with command, simrun starts it first; {port} is filled in)")
        if self.transport == "chat" and not self.model:
            raise ValueError("the chat transport needs model, the model name to send")
        if self.transport == "template" and (self.body is None or not self.reply):
            raise ValueError("the template transport needs body (the request, with {message}, {messages} or "
                             "{session} in it) and reply (a JSON pointer to the reply's text, e.g. /output/text)")
        if self.reply is not None and self.reply and not self.reply.startswith("/"):
            raise ValueError(f"reply {self.reply!r} is not a JSON pointer: it starts with / (e.g. /output/text)")
        if self.isolation != "thread" and self.transport != "callable":
            raise ValueError(f"isolation is for the callable transport (a function simrun runs); a {self.transport} "
                             "runtime runs in its own process or simrun's by design: remove isolation")
        if (self.tools or self.traces or self.state or self.trace_port) and self.transport not in FOREIGN:
            raise ValueError(f"tools, traces, trace_port and state are for the {', '.join(FOREIGN)} transports; a "
                             f"{self.transport} runtime gives its events and records through the protocol")
        return self

    @property
    def wants_traces(self) -> bool:
        return bool(self.tools) if self.traces is None else self.traces


class UserSection(_Model):
    """The model that plays the user: how long it may answer, how freely, and how many calls at once."""

    max_tokens: int = Field(default=300, ge=16, le=100_000, description="Most tokens one answer may take; a cut-off "
                            "answer is a simulator_error that says to raise this.")
    temperature: float = Field(default=1.0, ge=0, le=2, description="Sampling temperature of the user model.")
    timeout_s: float = Field(default=60.0, gt=0, le=MAX_TIMEOUT_S,
                             description="Seconds one model call may take before it is retried.")
    concurrency: int | None = Field(default=None, ge=1, le=4096, description=(
        "Most model calls in flight at once (1 for a single-slot local server); conversations wait their turn."))


class ProjectGate(_Model):
    baseline: str | None = Field(default=None, description=(
        "The blessed baseline plain `simrun` gates against: a file (relative to simrun.toml), or REF:PATH as "
        "git holds it (e.g. origin/main:baselines/main.json, the protected branch's, never the pull request's)."))


class Project(_Model):
    run: RunSection = RunSection()
    gate: ProjectGate = ProjectGate()
    runtime: RuntimeSection = RuntimeSection()
    user: UserSection = UserSection()


def _header_path(header: str) -> list[str]:
    return [p.strip().strip('"').strip("'") for p in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', header)]


def _toml_line(text: str, loc: tuple[Any, ...]) -> int | None:
    """The line of the key at `loc` in a TOML text (tables by header, keys by `key =`)."""
    table: list[str] = []
    header_line = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        m = re.match(r"^\[\s*([^\]]+?)\s*\]$", stripped)
        if m:
            table = _header_path(m.group(1))
            if [str(p) for p in loc] == table:
                header_line = number
            continue
        m = re.match(r'^("?[^"=]+"?)\s*=', stripped)
        if m and table + [m.group(1).strip().strip('"')] == [str(p) for p in loc[:len(table) + 1]]:
            return number
    return header_line


def load_toml_model(path: Path, model: type[M]) -> M:
    """`model` from the TOML file at `path` (its defaults when there is none), or a ConfigError
    naming the file, the line and the field."""
    if not path.exists():
        return model()
    try:
        text = input_files.read_text(path, "TOML file")
    except input_files.InputRefused as exc:
        raise ConfigError(str(exc), path=str(path), line=exc.line) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", path=str(path)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise ConfigError(f"not valid TOML: {exc}", path=str(path), line=int(m.group(1)) if m else None) from None
    except RecursionError:
        raise ConfigError("not valid TOML: nested too deep", path=str(path)) from None
    try:
        loaded = model.model_validate(data)
    except ValidationError as exc:
        problem = first_problem(exc, model, noun="setting")
        raise ConfigError(problem.message, path=str(path), line=_toml_line(text, problem.path),
                          field=problem.field) from None
    # What the model leaves open (a python runtime's options, a template's body) is checked by the
    # rule every stored value is: the settings are kept with the run, as JSON.
    found = first_unstorable(data, dates=True)
    if found is not None:
        where, what = found
        raise ConfigError(f"{what}: a run's settings are kept in the store, which cannot hold it", path=str(path),
                          line=_toml_line(text, where), field=".".join(map(str, where)) or None)
    return loaded


def load_budgets(path: Path | str = "budgets.toml") -> Budgets:
    return load_toml_model(Path(path), Budgets)


def load_project(path: Path | str = "simrun.toml") -> Project:
    return load_toml_model(Path(path), Project)


# --- read back from a store ----------------------------------------------------------------------

def from_store(model: type[M], value: object, where: str) -> M:
    """A setting a store kept, through `model` and its bounds as a file's would be, or a StoreError
    that names `where` (the database and the run) and the field. Strict: simrun wrote exactly
    these types, so a "yes" for true, or 20.0 for 20, is not a setting simrun kept."""
    try:
        return model.model_validate(value, strict=True)
    except ValidationError as exc:
        problem = first_problem(exc, model, noun="setting")
        field = f".{input_files.printable(problem.field)}" if problem.field else ""
        raise StoreError(f"{where}{field}: {input_files.printable(problem.message, 200)}: the database was "
                         "changed, or not written by simrun; use a database simrun wrote, or run again") from None


def _config(run: Mapping[str, Any]) -> Mapping[str, Any]:
    config = run.get("config")
    return config if isinstance(config, Mapping) else {}


def stored_sequential(run: Mapping[str, Any], database: str) -> SequentialSection | None:
    """The sequential settings a run made in rounds started with (its config's `sequential`, as
    `Store.run` gives it), checked as budgets.toml's [gate.sequential] is; None for a run not
    made in rounds. A value out of bounds is a StoreError naming the run and the field: a round
    cap of 10**12 would have the gate look at every one of them."""
    kept = _config(run).get("sequential")
    if kept is None:
        return None
    run_id = input_files.printable(run.get("run_id"))
    return from_store(SequentialSection, kept, f"{database}: run {run_id}: runs.config.sequential")


# JSON merge (`Store.set_release_criteria`) leaves out a null: min_goal_reached not set (the default floor).
_KEPT_ALWAYS = frozenset(ReleaseSection.model_fields) - {"min_goal_reached"}


def stored_release(run: Mapping[str, Any]) -> ReleaseSection | None:
    """The release criteria a stored run was judged with when it ran (its config's `release`), or
    None for a run made before they were kept, or with a record that is not criteria: a store
    may be hostile, and what does not pass ReleaseSection, bounds and all, is not used as criteria."""
    kept = _config(run).get("release")
    if not isinstance(kept, Mapping) or not _KEPT_ALWAYS <= set(kept):
        return None
    try:
        return ReleaseSection.model_validate(kept, strict=True)
    except ValidationError:
        return None
