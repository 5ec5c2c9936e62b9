"""Names a package exports from its private modules, each module imported on first use.

A package's `__init__` lists what it exports (`__all__`, and the same names under TYPE_CHECKING
for the type checker) and hands the rest to `exported`: `import simrun.scoring` then costs
nothing, and a command or a worker loads only the modules it uses (the model SDKs and scipy
take seconds to import). A name is looked up once; the package keeps it after.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping


def exported(package: str, exports: Mapping[str, tuple[str, str | None]], name: str) -> object:
    """`package`'s export `name`: (module, attribute) in `exports`; attribute None: the module."""
    try:
        module, attribute = exports[name]
    except KeyError:
        raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
    value: object = importlib.import_module(module)
    if attribute is not None:
        value = getattr(value, attribute)
    setattr(sys.modules[package], name, value)
    return value
