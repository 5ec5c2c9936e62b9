"""The runtime role: start, turn, state, audit, close; async, one adapter per transport.

Adapters return plain JSON values. A runtime that fails mid-conversation raises `RuntimeFault`
with its evidence; the conversation loop records it as `runtime_error` and the run goes on.

A runtime's answers are untrusted, so every transport reads them the same way: at most
`max_result_bytes` of them (a larger answer is cut there, and the cut is the fault's evidence),
strict UTF-8, JSON that Python can read without running out of stack, and then protocol 1.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from simrun import _secrets as secrets
from simrun._errors import RuntimeFault, RuntimeUnavailable
from simrun._protocol import SNAPSHOT, Audit, Started, State, TurnResult, violations
from simrun._storable import MAX_INT_DIGITS, SUSPECT_ESCAPE, Json, unstorable
from simrun._untrusted_text import one_line

if TYPE_CHECKING:
    from simrun.simulator.adapters._spans import TraceBook

PROTOCOL_VERSION = 1
DEFAULT_MAX_RESULT_BYTES = 1 << 20      # runtime.max_result_bytes
EXCERPT_BYTES = 2000                    # of an answer, kept as a fault's evidence
OFF_LOOP_BYTES = 1 << 18                # answers larger than this are read in a worker thread
# A kept-alive connection idle longer than this is not used again. A server closes an idle one
# when its own timeout ends (uvicorn and Node: 5 s, gunicorn: 2 s); a request sent on it at that
# moment is dropped unanswered, which would read as the runtime's fault. A new connection to a
# runtime costs far less than a conversation lost that way.
KEEPALIVE_S = 1.0


class RuntimeAdapter(Protocol):
    """Everything the runner, the conversation loop and `simrun check-runtime` use of a transport.

    A new transport inherits `Transport` (below), which gives the optional members their
    defaults and the protocol checks, and writes the operations. Sessions: `turn`, `state`,
    `audit` and `close` are given the session exactly as `start` returned it (a transport may
    return a `str` subclass that carries more, as `SessionId` carries its process's start).
    """

    description: str     # what it is, as the user will recognise it (with the port it got)
    # Checked against protocol 1 (True, for runs), or handed back as they came (False: `simrun
    # check-runtime` sets it, to list every violation itself).
    strict: bool
    # Whether simrun builds the runtime's store itself (from its traces and a state hook), as
    # for an assistant with no protocol code: a `state` field in its turn result is then its
    # own, not protocol 1's snapshot, and what its store lacks is a rung not reached, not a
    # violation. Default False.
    builds_state: bool
    # The trace book of a runtime whose spans simrun reads (check-runtime reports what its
    # receiver saw); None for every other. Default None.
    book: TraceBook | None

    @property
    def identity(self) -> str:
        """What it is across runs: part of a run's key, so never a random port."""

    async def health(self) -> dict[str, Any]: ...
    async def start(self, request: dict[str, Any]) -> str: ...

    def first_state(self, session: str) -> dict[str, Any] | None:
        """The store the start reply carried (protocol 1's optional `state`), once, right after
        `start`; None when it carried none, and the loop then asks `state`. Default None."""

    async def turn(self, session: str, payload: dict[str, Any]) -> dict[str, Any]: ...
    async def state(self, session: str) -> dict[str, Any] | None: ...
    async def audit(self, session: str) -> list[dict[str, Any]] | None: ...

    async def close(self, session: str) -> list[dict[str, Any]] | None:
        """Close the session; the audit its answer carried, if any (check-runtime compares it
        with what `audit` answered), else None."""

    async def aclose(self) -> None:
        """Release the transport (connections, the process simrun started); called once, at the end."""


def exit_text(returncode: int | None) -> str:
    """How a process ended, in words: 'status 1', 'killed by SIGKILL', 'still running'."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"status {returncode}"


_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning|Fault|Panic)\b")


def stderr_said(text: str) -> str:
    """'; its stderr says: KeyError: 'trip'', to put in a fault's message: the last line of what a
    runtime wrote that names an exception (a traceback's last line), else its last line with words
    in it (not a row of dashes); '' when it wrote nothing."""
    lines = [line.strip() for line in text.splitlines() if re.search(r"[A-Za-z0-9]", line)]
    named = [line for line in lines if _EXCEPTION.match(line)]
    last = (named or lines or [""])[-1]
    return f"; its stderr says: {last[:300]}" if last else ""


def excerpt(raw: bytes | str, limit: int = EXCERPT_BYTES) -> str:
    """The start of an answer, as text, for a fault's evidence: secrets cut out of all of it
    first, so that none that straddles the cut is kept in part (`secrets.cut`)."""
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    return secrets.cut(text, limit)


def json_excerpt(value: Any) -> str:
    try:
        return excerpt(json.dumps(value, default=str))
    except (ValueError, RecursionError):
        return _repr(value)


def too_large(what: str, seen: int, limit: int, head: bytes | str) -> RuntimeFault:
    """The fault of an answer cut at the limit: how much there was (at least), and its start."""
    return RuntimeFault("too_large", f"{what}: the answer is {seen:,} bytes or more; simrun reads at most "
                        f"{limit:,} (runtime.max_result_bytes)", limit=limit, bytes_read=seen, body=excerpt(head))


# Where a JSON text can hold what the store cannot: a NUL or a surrogate, written as an escape
# (raw bytes are strict UTF-8, so it is the only way in). Most answers have none, and are not walked.
_SUSPECT_ESCAPE = re.compile(SUSPECT_ESCAPE.encode("ascii"))
# The same, for a text not yet encoded: the pattern is ASCII, and UTF-8 keeps ASCII as it is (and
# makes no ASCII byte of anything else), so searching the text finds what searching its bytes
# would, without encoding every answer the python transport copies (`as_json`).
_SUSPECT_ESCAPE_TEXT = re.compile(_SUSPECT_ESCAPE.pattern.decode("ascii"))


class _Unstorable(ValueError):
    pass


def _not_a_constant(name: str) -> Any:
    raise _Unstorable(f"the number {name}, which JSON cannot hold")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):              # 1e999: JSON's syntax, but no number JSON can hold
        raise _Unstorable(f"the number {text[:40]}, which is not finite")
    return number


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _Unstorable(f"an integer of more than {MAX_INT_DIGITS} digits")
    return int(digits)


def refuse_unstorable(value: Any, what: str, raw: bytes | str | None = None, **evidence: Any) -> Any:
    """`value`, or a RuntimeFault when it holds what the store cannot (`unstorable`)."""
    problem = unstorable(value)
    if problem is not None:
        raise RuntimeFault("malformed", f"{what}: the answer holds {problem}, which simrun cannot store",
                           body=excerpt(raw if raw is not None else json_excerpt(value)), **evidence)
    return value


def parse_json(raw: bytes, what: str, **evidence: Any) -> Any:
    """An answer's bytes as JSON; a RuntimeFault with its evidence for anything else."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RuntimeFault("malformed", f"{what}: the answer is not UTF-8 (byte 0x{raw[exc.start]:02x} at offset "
                           f"{exc.start})", body=excerpt(raw), **evidence) from None
    return _loads(text, raw, what, **evidence)


# Every answer is read with these hooks: one decoder for all, not one built per answer.
_DECODER = json.JSONDecoder(parse_constant=_not_a_constant, parse_int=_bounded_int, parse_float=_finite_float)


# For a text this module's encoder wrote: no hooks, so numbers are read in C, not by a Python call each.
_PLAIN_DECODER = json.JSONDecoder()
_A_DIGIT = re.compile("[0-9]")
_LONG_DIGIT_RUN = re.compile(f"[0-9]{{{MAX_INT_DIGITS + 1}}}")


def _long_digit_run(text: str) -> bool:
    """Whether `text` has a run of more than MAX_INT_DIGITS ASCII digits. Any such run covers a
    position that is a multiple of MAX_INT_DIGITS, so only around those of them that hold a digit
    is the text searched: a turn result is looked at in two places, not all through."""
    for hit in _A_DIGIT.finditer(text[::MAX_INT_DIGITS]):
        at = hit.start() * MAX_INT_DIGITS
        if _LONG_DIGIT_RUN.search(text, max(0, at - MAX_INT_DIGITS), at + MAX_INT_DIGITS + 1):
            return True
    return False


def _read_own(text: str) -> Any:
    """`_DECODER.decode` of a text this module's encoder wrote (`as_json`). Its encoder writes no
    NaN or infinity (allow_nan=False), so the one hook such a text can need is the integer bound,
    and a text with no run of more than MAX_INT_DIGITS digits cannot break it: read by a decoder
    without hooks (half the time; the documented `decode`, no scanner internals). A text with such
    a run (an integer past the bound, or only a string of digits) is read with them, which tell
    the two apart."""
    return (_DECODER if _long_digit_run(text) else _PLAIN_DECODER).decode(text)


def _loads(text: str, raw: bytes | str, what: str, read: Callable[[str], Any] = _DECODER.decode, /,
           **evidence: Any) -> Any:
    """JSON text as a value the store can hold (`unstorable`), or a RuntimeFault that says why."""
    try:
        value = read(text)
    except _Unstorable as exc:
        raise RuntimeFault("malformed", f"{what}: the answer holds {exc}, which simrun cannot store",
                           body=excerpt(raw), **evidence) from None
    except RecursionError:
        raise RuntimeFault("malformed", f"{what}: the answer is JSON nested too deep to read", body=excerpt(raw),
                           **evidence) from None
    except ValueError:
        raise RuntimeFault("malformed", f"{what}: the answer is not JSON", body=excerpt(raw), **evidence) from None
    suspect = _SUSPECT_ESCAPE.search(raw) if isinstance(raw, bytes) else _SUSPECT_ESCAPE_TEXT.search(raw)
    return refuse_unstorable(value, what, raw, **evidence) if suspect else value


async def read_answer(raw: bytes, what: str, check: Callable[[Any], Any] | None = None, **evidence: Any) -> Any:
    """Parse an answer, and check it against protocol 1. A large one is read off the event loop,
    each step on its own, so that a runtime's 5 MB reply stalls the other conversations in flight
    for one step's time at most, not for all of them (tests/security/test_reply_scale.py)."""
    value = await by_size(len(raw), parse_json, raw, what, **evidence)
    return await by_size(len(raw), check, value) if check else value


async def by_size(size: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(...)` here, or in a worker thread when the answer it works on is large."""
    if size < OFF_LOOP_BYTES:
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


# What `json.dumps(value, allow_nan=False)` builds anew on every call (a third of its time on a
# turn result). An encoder keeps nothing between calls (each `encode` makes its own markers for
# circular references), so one serves every answer, from any thread.
_ENCODER = json.JSONEncoder(allow_nan=False)


def as_json(value: Any, what: str, limit: int = DEFAULT_MAX_RESULT_BYTES) -> Any:
    """A deep copy through JSON: what an HTTP runtime would have sent, bounded the same way."""
    try:
        text = _ENCODER.encode(value)
    except RecursionError:
        raise RuntimeFault("malformed", f"the runtime's {what} is nested too deep to be JSON",
                           body=_repr(value)) from None
    except (TypeError, ValueError) as exc:
        raise RuntimeFault("malformed", f"the runtime's {what} is not JSON: {excerpt(str(exc), 300)}",
                           body=_repr(value)) from None
    if len(text) > limit:
        raise too_large(f"the runtime's {what}", len(text), limit, text)
    return _loads(text, text, f"the runtime's {what}", _read_own)


def _repr(value: Any) -> str:
    """A value's repr for evidence, or what it is when even that fails (a huge integer, a
    nesting too deep, an object whose __repr__ raises)."""
    try:
        return excerpt(repr(value), 500)
    except Exception:
        return f"a {type(value).__name__} that cannot be shown"


def _checked(model: type, value: Json, what: str) -> Json:
    """`value`, checked against `model` (a protocol shape): what the callers cast it to."""
    problems = violations(model, value)
    if problems:
        raise RuntimeFault("malformed", f"the runtime's {what} breaks protocol 1: {'; '.join(problems[:3])}",
                           body=json_excerpt(value))
    return value


def check_turn_result(result: Any) -> dict[str, Any]:
    """A turn result (parsed JSON) must be an object with a string `reply`; present fields well typed."""
    if not isinstance(result, dict):
        raise RuntimeFault("malformed", "the turn result is not a JSON object", body=json_excerpt(result))
    if not isinstance(result.get("reply"), str):
        raise RuntimeFault("missing_reply", "the turn result has no string 'reply'", body=json_excerpt(result))
    return cast("dict[str, Any]", _checked(TurnResult, result, "turn result"))


def check_started(reply: Any) -> str:
    return cast(str, _checked(Started, reply, "start reply")["session"])


def check_state(state: Any) -> dict[str, Any]:
    return cast("dict[str, Any]", _checked(State, state, "state"))


def check_audit(audit: Any) -> list[dict[str, Any]]:
    return cast("list[dict[str, Any]]", _checked(Audit, audit, "audit")["turns"])


class Transport:
    """What every transport inherits: the optional members of the contract (`RuntimeAdapter`)
    with their defaults, and how it hands back what a runtime said: checked against protocol 1
    (`strict`, the default for runs), or as it came, for `simrun check-runtime` to list every
    violation. A transport sets `description` and writes the operations."""

    description: str
    strict: bool = True
    builds_state: bool = False
    book: TraceBook | None = None

    @property
    def identity(self) -> str:
        return self.description

    def _turn(self, raw: Any) -> dict[str, Any]:
        return check_turn_result(raw) if self.strict else raw

    def _started(self, raw: Any) -> str:
        if self.strict:
            session = check_started(raw)
        elif not isinstance(raw, dict) or not isinstance(raw.get("session"), str):
            raise RuntimeFault("malformed", "start did not answer {\"session\": \"...\"}", body=json_excerpt(raw))
        else:
            session = raw["session"]
        if raw.get(SNAPSHOT) is not None:
            # Kept until the conversation loop takes it, right after start returns (`first_state`).
            # (In the instance's own dict: a transport need not call an __init__ of this class.)
            self.__dict__.setdefault("_first_states", {})[session] = raw[SNAPSHOT]
        return session

    def first_state(self, session: str) -> dict[str, Any] | None:
        """The store the start reply carried (protocol 1's optional `state`, checked with the reply),
        once; None when it carried none, and then the loop asks `state`."""
        first: dict[str, Any] | None = self.__dict__.get("_first_states", {}).pop(session, None)
        return first

    def _state(self, raw: Any) -> dict[str, Any] | None:
        return check_state(raw) if self.strict else raw

    def _audit(self, raw: Any) -> list[dict[str, Any]] | None:
        if self.strict:
            return check_audit(raw)
        return raw.get("turns") if isinstance(raw, dict) else raw


IDENTITY_CHARS = 100                    # a runtime's name or version, as stored and shown


def check_health(health: Any, where: str) -> dict[str, Any]:
    """A health answer, checked where every transport reads it: `protocol` must be exactly the
    integer 1 (not `true`, not 1.0, not "1"), and the runtime's `runtime` name and `version` are
    kept as one line each of at most IDENTITY_CHARS characters, without control, bidi or
    zero-width characters (or left out), before anything stores or shows them."""
    if not isinstance(health, dict) or "protocol" not in health:
        raise RuntimeUnavailable(f"{where}: health did not answer with a 'protocol' field; "
                                 "a runtime must return {\"protocol\": 1, ...}")
    protocol = health["protocol"]
    if type(protocol) is not int:
        # Not a version at all: the runtime wrote the field wrong, and upgrading will not help.
        raise RuntimeUnavailable(f"{where}: protocol must be the number {PROTOCOL_VERSION}, got "
                                 f"{_json_kind(protocol)}; fix the runtime's /v1/health answer")
    if protocol != PROTOCOL_VERSION:
        shown = one_line(json_excerpt(protocol), 40)
        raise RuntimeUnavailable(
            f"{where}: the runtime speaks protocol {shown}; this simrun speaks protocol {PROTOCOL_VERSION} "
            "(the integer 1). Upgrade simrun or pin the runtime to protocol 1.")
    return {"protocol": protocol, "runtime": one_line(health.get("runtime"), IDENTITY_CHARS),
            "version": one_line(health.get("version"), IDENTITY_CHARS)}


def _json_kind(value: Any) -> str:
    """A JSON value that is not an integer, named by its type and shown short ("the text '1'")."""
    if isinstance(value, str):
        return f"the text {one_line(repr(value), 40) or repr('')}"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return f"the fraction {one_line(json_excerpt(value), 40)}"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else "a value of another type"
