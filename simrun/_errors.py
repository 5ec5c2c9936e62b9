"""simrun's one error hierarchy. Every message says what is wrong, where, and how to fix it.

It is part of simrun's base layer: the judge, the store, the simulator and the API raise the
same classes, and the judge stays importable on its own (rescore, import, workers on other
machines).

    SimrunError                  a user error: the CLI prints the message, no traceback, exit 2
     ├── ConfigError             bad input found before anything runs (file, line, field or parameter)
     │    └── BudgetSyntaxError  a budget that is not an amount of US dollars
     ├── RuntimeUnavailable      the runtime cannot be started or does not speak protocol 1
     ├── UserModelUnavailable    the user model's server answers no output form (or not at all)
     ├── StoreError              the DuckDB file cannot be used (wrong schema version, no such run)
     ├── BundleError             a bundle to import that is unreadable or not a simrun bundle
     ├── RescoreError            a stored run that cannot be scored again (its dataset is gone)
     ├── BaselineError           a baseline that is missing, unreadable, or not a simrun baseline
     ├── GateError               two runs that must not be compared
     └── ClusterLost             the Ray cluster a run was on went away: the run is interrupted

Failures *during* a run are not exceptions that escape: they are recorded as the conversation's
end reason, with their evidence, and the run goes on. These carry them to the conversation loop:

    RuntimeFault      the runtime failed          -> runtime_error
    ProviderFailure   the model API failed, after its retries (or a replay miss) -> provider_error
    BudgetCut         what is left of the budget cannot cover the next call      -> budget_cut
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Parameter:
    """A parameter of the call that an error's message names. Python names it by its name
    (`repetitions`), the command line by its flag (`--repetitions`): the message is kept in parts
    (`SimrunError.parts`), so that each surface spells it its own way and none reads the other's
    words back. `value`: a value the message suggests for it (`executor='ray'`, `--executor ray`;
    `force=True`, `--force`)."""

    name: str
    value: str | bool | None = None

    def __str__(self) -> str:
        return self.name if self.value is None else f"{self.name}={self.value!r}"


Spelling = Callable[[Parameter], str]


class SimrunError(Exception):
    """A problem the user can fix; its message says how.

    The message is text, or parts of which some are the caller's `Parameter`s: `str(error)`
    names each as Python does, and `spelled(spell)` as another surface does (the command line
    gives its flags)."""

    parts: tuple[str | Parameter, ...]

    def __init__(self, message: str | Sequence[str | Parameter] = "", *args: object) -> None:
        self.parts = (message,) if isinstance(message, str) else tuple(message)
        super().__init__(self.spelled(str), *args)

    def spelled(self, spell: Spelling) -> str:
        """The message, with each parameter it names spelled by `spell`."""
        return "".join(part if isinstance(part, str) else spell(part) for part in self.parts)


class ConfigError(SimrunError):
    """Bad input, found before anything runs. `path` and `line`: the file and line it is in;
    `field`: the setting of that file, or, with no file, the parameter of the call (which the
    command line spells as its flag)."""

    def __init__(self, message: str | Sequence[str | Parameter], *, path: str | None = None,
                 line: int | None = None, field: str | None = None) -> None:
        self.path, self.line, self.field = path, line, field
        super().__init__(message)

    def spelled(self, spell: Spelling) -> str:
        where = self.path or ""
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            named = self.field if self.path is not None else spell(Parameter(self.field))
            where += f" ({named})" if where else named
        message = super().spelled(spell)
        return f"{where}: {message}" if where else message


class BudgetSyntaxError(ConfigError):
    pass


class RuntimeUnavailable(SimrunError):
    pass


class StoreError(SimrunError):
    pass


class UserModelUnavailable(SimrunError):
    pass


class BundleError(SimrunError):
    pass


class RescoreError(SimrunError):
    pass


class BaselineError(SimrunError):
    """A baseline that is missing, unreadable, or not a simrun baseline."""


class GateError(SimrunError):
    """Two runs that must not be compared, or a baseline the gate cannot use."""


class ClusterLost(SimrunError):
    """The Ray cluster cannot go on (every worker died, or the budget actor is gone): the run
    stops as interrupted, with what finished stored, and the same command finishes it later."""


class RuntimeFault(Exception):
    """The runtime failed mid-conversation. Recorded as `runtime_error` with this evidence."""

    def __init__(self, kind: str, message: str, **evidence: object) -> None:
        super().__init__(message)
        self.kind = kind
        self.evidence = {"kind": kind, "message": message, **evidence}


class ProviderFailure(Exception):
    """The model API failed after its retries. Recorded as `provider_error`, never a pass."""

    def __init__(self, kind: str, message: str, **evidence: object) -> None:
        super().__init__(message)
        self.kind = kind
        self.evidence = {"kind": kind, "message": message, **evidence}


class BudgetCut(Exception):
    """The budget cannot cover the next call. Recorded as `budget_cut`, kept out of the rates."""
