"""The python transport: a runtime object in this process, `module:Class` or `file.py:Class`.

Its methods take and return the same JSON objects as the HTTP operations; each may be sync or
async. A method the runtime lacks (`state`, `audit`) makes the checks that need it
UNVERIFIABLE, as a 404 would over HTTP.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simrun import _secrets as secrets
from simrun._errors import RuntimeFault, RuntimeUnavailable
from simrun.simulator.adapters._base import DEFAULT_MAX_RESULT_BYTES, EXCERPT_BYTES, Transport, as_json, check_health


def load_target(target: str, options: dict[str, Any] | None = None, *, folder: str | Path | None = None) -> Any:
    """Instantiate `module:Class` (or `path/to/file.py:Class`) with `options` as keyword arguments."""
    return instantiated(load_attribute(target, "module:Class", folder=folder), options, target)


def instantiated(factory: Any, options: dict[str, Any] | None, target: str) -> Any:
    """A runtime made by `factory` (its class) with `options` as keyword arguments; `target`
    names it in the errors."""
    try:
        return factory(**(options or {}))
    except TypeError as exc:
        raise RuntimeUnavailable(f"runtime target {target!r}: bad runtime options: {exc}") from None
    except Exception as exc:
        # The runtime's own constructor refused its options (an unknown fault name, say).
        raise RuntimeUnavailable(f"runtime target {target!r} refused [runtime.options]: "
                                 f"{type(exc).__name__}: {exc}") from None


def _on_path(folder: Path) -> None:
    """`folder` first on the import path, as `python file.py` puts a script's folder and uvicorn's
    `--app-dir` an app's: the project's own modules (the target and its siblings) import from it.
    simrun's own modules can never be shadowed by it: `simrun` is imported already (a name in
    sys.modules is never looked up on the path again) and its submodules are found through the
    package's own folder, never through sys.path."""
    where = str(folder)
    if where not in sys.path:
        sys.path.insert(0, where)


def load_attribute(target: str, form: str = "module:name", *, folder: str | Path | None = None) -> Any:
    """The object `module:name` (or `path/to/file.py:name`) names.

    `folder` is the project's (the folder of simrun.toml; else the current one): a module is
    imported from it, and a relative file path is read from it. A file's own folder goes on the
    import path, so that its sibling imports work; it is imported once under its name (a state
    hook in the same file shares the target's module), and never under the name of a module
    already imported from elsewhere (`simrun`, `json`): that is refused, naming the file."""
    module_name, _, attr = target.partition(":")
    if not attr:
        raise RuntimeUnavailable(f"runtime target {target!r} must look like {form!r}")
    base = Path(folder) if folder is not None else Path.cwd()
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            path = (path if path.is_absolute() else base / path).resolve()
            if not path.is_file():
                raise RuntimeUnavailable(f"runtime target {target!r}: no such file {path}")
            module = _file_module(target, path)
        else:
            _on_path(base.resolve())
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RuntimeUnavailable(f"runtime target {target!r}: cannot import {module_name}: {exc} (modules are "
                                 f"imported from {base.resolve()}, the folder of simrun.toml)") from None
    found = getattr(module, attr, None)
    if found is None:
        raise RuntimeUnavailable(f"runtime target {target!r}: {module_name} has no {attr}")
    return found


# The modules loaded here from a file target, by name, with the file's modification time when it
# was loaded: one of them may give way to another file of the same name (a later run's project),
# or to the same file edited since (a later run in the same process: a notebook, the API called
# twice); a module imported any other way never does.
_from_files: dict[str, Any] = {}
_loaded_at: dict[str, int] = {}


def _file_module(target: str, path: Path) -> Any:
    name = path.stem
    known = sys.modules.get(name)
    if known is not None:
        where = getattr(known, "__file__", None)
        if where and Path(where).resolve() == path and (_from_files.get(name) is not known
                                                         or _loaded_at.get(name) == path.stat().st_mtime_ns):
            return known       # the same file, named twice (the target and its state hook), unchanged
        if _from_files.get(name) is not known:
            raise RuntimeUnavailable(f"runtime target {target!r}: {path.name} has the name of the module {name!r} "
                                     f"already imported from {where or 'Python itself'}; rename the file")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RuntimeUnavailable(f"runtime target {target!r}: {path} cannot be imported as a Python module")
    _on_path(path.parent)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = _from_files[name] = module
    _loaded_at[name] = path.stat().st_mtime_ns
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        _from_files.pop(name, None)
        raise
    return module


# What a sync method returns, JSON's own types: none is awaitable, and telling so by its type
# costs a tenth of `inspect.isawaitable`, which tries the Awaitable ABC. Anything else (a subclass
# too) is asked the long way.
_PLAIN = frozenset((dict, list, str, int, float, bool, type(None)))


def _awaitable(value: Any) -> bool:
    return type(value) not in _PLAIN and inspect.isawaitable(value)


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    value = fn(*args)
    return await value if _awaitable(value) else value


TRACEBACK_CHARS = 2000


async def guarded(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, sync or async; whatever it raises is a `crash` fault with its traceback: the
    innermost frames, where the runtime went wrong, under the usual header, with secrets cut out
    of the whole traceback before its tail is taken."""
    started = time.perf_counter()
    try:
        # `_call`, written out: one coroutine fewer on every call to the runtime.
        value = fn(*args)
        return await value if _awaitable(value) else value
    except Exception as exc:
        text = secrets.redact("".join(traceback.format_exception(exc)))
        if len(text) > TRACEBACK_CHARS:
            text = "Traceback (most recent call last):\n  …\n" + text[-TRACEBACK_CHARS:].split("\n", 1)[-1]
        raise RuntimeFault("crash", f"the runtime raised in {what}: {type(exc).__name__}: "
                           f"{secrets.cut(str(exc), EXCERPT_BYTES)}", traceback=text,
                           elapsed_ms=round((time.perf_counter() - started) * 1000, 3)) from None


_ABSENT: Any = object()     # (an optional method the runtime lacks: compared by identity)


class PythonRuntime(Transport):
    """The adapter states the whole contract (`RuntimeAdapter`); the runtime object it wraps, a
    team's own, may lack the optional methods (`state`, `audit`, `close`), and is asked for them here."""

    def __init__(self, runtime: Any, *, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> None:
        self.runtime = runtime
        self.max_result_bytes = max_result_bytes
        self.description = f"python:{type(runtime).__module__}.{type(runtime).__name__}"

    @classmethod
    def from_target(cls, target: str, options: dict[str, Any] | None = None, *, folder: str | Path | None = None,
                    **settings: Any) -> PythonRuntime:
        return cls(load_target(target, options, folder=folder), **settings)

    async def health(self) -> dict[str, Any]:
        if not hasattr(self.runtime, "health"):
            raise RuntimeUnavailable(f"{self.description}: the runtime has no health() method")
        return check_health(await _call(self.runtime.health), self.description)

    def _answer(self, value: Any, what: str) -> Any:
        return as_json(value, what, self.max_result_bytes)

    # What simrun sends (a start request, a turn's payload) is made anew for each call, of JSON's
    # own types, and not read again: it is passed as it is, for the runtime to keep or change.
    # What the runtime answers is copied through JSON (`_answer`), as a wire would copy it.
    async def start(self, request: dict[str, Any]) -> str:
        return self._started(self._answer(await guarded("start", self.runtime.start, request), "start reply"))

    async def turn(self, session: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self._turn(self._answer(await guarded("turn", self.runtime.turn, session, payload),
                                       "turn result"))

    # Each optional method is looked up once, not asked for with hasattr and then again: a
    # runtime's attribute may be computed on every access (a proxy's __getattr__ builds one).
    async def state(self, session: str) -> dict[str, Any] | None:
        method = getattr(self.runtime, "state", _ABSENT)
        if method is _ABSENT:
            return None
        return self._state(self._answer(await guarded("state", method, session), "state"))

    async def audit(self, session: str) -> list[dict[str, Any]] | None:
        method = getattr(self.runtime, "audit", _ABSENT)
        if method is _ABSENT:
            return None
        return self._audit(self._answer(await guarded("audit", method, session), "audit"))

    async def close(self, session: str) -> None:
        method = getattr(self.runtime, "close", _ABSENT)
        if method is not _ABSENT:
            await guarded("close", method, session)

    async def aclose(self) -> None:
        return None
