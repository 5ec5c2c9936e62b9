"""The python transport's fast paths give exactly what the general paths give.

`as_json` encodes with one module-level encoder (not `json.dumps`, which builds one per call) and
reads its own text back without the reader's hooks when no integer in it can be past the bound
(`_read_own`); `_loads` searches a text's escapes without encoding it first; `_call` tells a plain
value from an awaitable by its type first. Each is held to what it stands for: `as_json` to the
value sent over HTTP and read by the reader every answer goes through, the text search to the
search of its bytes, `_call` and `guarded` to what they must return and raise; on arbitrary
values: JSON's own and what JSON cannot hold (NaN, infinities, huge integers, deep nesting, keys
that are not strings, tuples, sets, NUL characters and lone surrogates, cycles).
"""

from __future__ import annotations

import asyncio
import json
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simrun._errors import RuntimeFault
from simrun._storable import MAX_INT_DIGITS
from simrun.simulator.adapters import _base as base
from simrun.simulator.adapters._python import _call

EXAMPLES = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- the general paths the fast ones must agree with -----------------------------------------

def _as_sent(value, what, limit=base.DEFAULT_MAX_RESULT_BYTES):
    """What `as_json` promises: the value as an HTTP runtime would have sent it (the standard
    library's `json.dumps`, no NaN), bounded the same way, and read back by the reader every
    answer goes through (`_loads` with all its hooks)."""
    try:
        text = json.dumps(value, allow_nan=False)
    except RecursionError:
        raise RuntimeFault("malformed", f"the runtime's {what} is nested too deep to be JSON") from None
    except (TypeError, ValueError) as exc:
        raise RuntimeFault("malformed", f"the runtime's {what} is not JSON: {base.excerpt(str(exc), 300)}") from None
    if len(text) > limit:
        raise base.too_large(f"the runtime's {what}", len(text), limit, text)
    return base._loads(text, text, f"the runtime's {what}")


# --- what is compared ----------------------------------------------------------------------------

def _outcome(fn, *args):
    """A value as its exact shape (repr tells 1 from 1.0 from True, a list from a tuple), or the
    fault it raised: its kind and message."""
    try:
        return "value", repr(fn(*args))
    except RuntimeFault as fault:
        return "fault", fault.kind, str(fault)


texts = st.one_of(st.text(max_size=12), st.sampled_from(["\x00", "a\udc80b", "\ud83d", "\U0001f600", "\\u0000",
                                                         "\\ud800", "1" * 1200, "\u202e"]))
numbers = st.one_of(st.integers(), st.sampled_from([999, 1000, -1000, 5000]).map(lambda digits: 10 ** digits),
                    st.floats(), st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324]))
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
keys = st.one_of(texts, st.integers(), st.floats(), st.booleans(), st.none(), st.tuples(st.integers()))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner), st.frozensets(st.integers(), max_size=2),
    st.sets(st.text(max_size=3), max_size=2), st.dictionaries(keys, inner, max_size=4)), max_leaves=25)


@EXAMPLES
@given(values, st.sampled_from([base.DEFAULT_MAX_RESULT_BYTES, 40, 2]))
def test_as_json_answers_as_the_value_sent_over_http_would_be_read(value, limit):
    assert _outcome(base.as_json, value, "turn result", limit) == _outcome(_as_sent, value, "turn result", limit)


def _nested(depth, leaf):
    for _ in range(depth):
        leaf = [leaf] if depth % 2 else {"k": leaf}
    return leaf


def test_as_json_answers_as_the_value_sent_over_http_would_be_read_at_the_edges():
    cyclic = []
    cyclic.append(cyclic)
    for value in (_nested(50, 1), _nested(5000, 1), _nested(100_000, "x"), cyclic, {"a": object()},
                  {(1, 2): 3}, [10 ** 1000], [10 ** 1001], {"s": "\x00"}, {"\udcff": 1}, float("nan")):
        assert _outcome(base.as_json, value, "state") == _outcome(_as_sent, value, "state")


digit_runs = st.lists(st.tuples(st.integers(0, 2100), st.booleans()), max_size=6).map(
    lambda parts: "".join(("7" if digits else "x") * length for length, digits in parts))


@EXAMPLES
@given(digit_runs)
def test_a_long_run_of_digits_is_found_wherever_it_lies(text):
    """The sampled search (every MAX_INT_DIGITS-th character) answers as searching all the text."""
    whole = re.search(f"[0-9]{{{MAX_INT_DIGITS + 1}}}", text) is not None
    assert base._long_digit_run(text) is whole


def test_an_integer_past_the_bound_is_refused_at_every_offset_of_a_long_text():
    """A turn result longer than MAX_INT_DIGITS is read back without hooks when it holds no long
    integer: one past the bound is still refused, wherever it starts (around each sampled
    position), and one at the bound is read back as it was."""
    for padding in (*range(990, 1010), *range(1990, 2010), 2500):
        for digits, refused in ((MAX_INT_DIGITS + 1, True), (MAX_INT_DIGITS, False)):
            value = {"reply": "x" * padding, "n": 10 ** (digits - 1)}
            assert _outcome(base.as_json, value, "turn result") == _outcome(_as_sent, value, "turn result")
            assert (_outcome(base.as_json, value, "turn result")[0] == "fault") is refused


def test_a_failed_encoding_leaves_nothing_behind():
    """The shared encoder keeps no state between calls: a value that failed half-way (its markers
    of circular references left set) does not make the next value look circular."""
    inner = {"x": 1}
    with_set = {"a": inner, "b": {1, 2}}
    assert _outcome(base.as_json, with_set, "state")[0] == "fault"
    assert base.as_json({"a": inner}, "state") == {"a": {"x": 1}}


@EXAMPLES
@given(st.one_of(texts, st.binary(max_size=30)))
def test_loads_finds_the_same_suspect_escapes_in_a_text_as_in_its_bytes(raw):
    """A text is searched for suspect escapes as it is, not encoded first: what it finds is what
    searching its UTF-8 bytes finds, and the answer read is the same either way."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    quoted = json.dumps(text, ensure_ascii=False)
    for t in (quoted, json.dumps(text)):
        as_bytes = t.encode("utf-8", "replace")
        assert bool(base._SUSPECT_ESCAPE_TEXT.search(t)) == bool(base._SUSPECT_ESCAPE.search(as_bytes))
        assert _outcome(base._loads, t, t, "state") == _outcome(base._loads, t, as_bytes, "state")


class _Awaitable:
    def __await__(self):
        return iter(())


class _Dict(dict):
    def __await__(self):
        yield from ()
        return {"reply": "from a dict that is awaitable"}


async def _coroutine():
    return {"reply": "async"}


def test_call_returns_a_plain_value_as_it_is_and_awaits_an_awaitable():
    for answer in ({"reply": "x"}, [1], "s", 1, 1.5, True, None, (1, 2)):
        assert asyncio.run(_call(lambda answer=answer: answer)) is answer
    assert asyncio.run(_call(_Awaitable)) is None
    assert asyncio.run(_call(lambda: _Dict(a=1))) == {"reply": "from a dict that is awaitable"}   # awaited
    assert asyncio.run(_call(_coroutine)) == {"reply": "async"}


class _Counting:
    """A proxy that builds each attribute on access (as benchmarks/harness.py's Metered does)."""

    def __init__(self, runtime, lacks=()):
        self.runtime, self.lacks, self.looked_up = runtime, lacks, []

    def __getattr__(self, name):
        if name in self.lacks:
            raise AttributeError(name)
        self.looked_up.append(name)
        return getattr(self.runtime, name)


def test_optional_methods_are_looked_up_once_with_the_same_answers():
    from simrun.examples.tripdesk import TripDesk
    from simrun.simulator.adapters._python import PythonRuntime

    async def use(runtime):
        session = await runtime.start({"seed": 1, "persona": "p", "goal": "g", "setup": {"records": {}}})
        return await runtime.state(session), await runtime.audit(session), await runtime.close(session)

    proxy = _Counting(TripDesk())
    assert asyncio.run(use(PythonRuntime(proxy))) == asyncio.run(use(PythonRuntime(TripDesk())))
    assert proxy.looked_up == ["start", "state", "audit", "close"]
    lacking = _Counting(TripDesk(), lacks=("state", "audit", "close"))
    assert asyncio.run(use(PythonRuntime(lacking))) == (None, None, None)


def test_guarded_answers_as_call_does_and_fails_as_a_crash():
    from simrun.simulator.adapters._python import guarded

    def raises(*_):
        raise KeyError("trip")

    async def raises_later(*_):
        raise ValueError("no such session")

    for fn in (lambda *a: {"reply": "x", "args": list(a)}, lambda *a: None, lambda *a: _Dict(a=1), _coroutine,
               lambda *a: _Awaitable()):
        args = () if fn is _coroutine else ("s-1", {"message": "hi"})
        assert repr(asyncio.run(guarded("turn", fn, *args))) == repr(asyncio.run(_call(fn, *args)))
    for fn, said in ((raises, "KeyError: 'trip'"), (raises_later, "ValueError: no such session")):
        with pytest.raises(RuntimeFault) as fault:
            asyncio.run(guarded("turn", fn, "s-1", {"message": "hi"}))
        assert fault.value.kind == "crash" and str(fault.value) == f"the runtime raised in turn: {said}"
        assert fn.__name__ in fault.value.evidence["traceback"]
