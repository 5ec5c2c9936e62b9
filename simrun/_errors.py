"""simrun's one error hierarchy. Every message says what is wrong, where, and how to fix it.

It lives in `scoring/`, the lower layer: the judge is importable on its own (rescore, import,
workers on other machines), and the simulator, which depends on it, raises the same classes.

    SimrunError                  a user error: the CLI prints the message, no traceback, exit 2
     ├── ConfigError             bad input found before anything runs (file, line, field)
     │    └── BudgetSyntaxError  a --budget value that is not an amount of US dollars
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


class SimrunError(Exception):
    """A problem the user can fix; its message says how."""


class ConfigError(SimrunError):
    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.path, self.line, self.field = path, line, field
        where = path or ""
        if line is not None:
            where += f":{line}"
        if field:
            where += f" ({field})" if where else field
        super().__init__(f"{where}: {message}" if where else message)


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
