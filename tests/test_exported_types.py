"""Every type the Python API hands out is one a caller can name: a public signature (of any name
in `simrun.__all__`: a function's parameters and return, a record's fields and properties, and
the methods of the API's own records) names only types `simrun` exports, read through
`typing.get_type_hints` as a type checker reads them."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing

import simrun


def named_types(annotation: object) -> set[type]:
    """The classes of simrun an annotation names, at any depth (`list[X] | None` names X)."""
    found: set[type] = set()
    for arg in typing.get_args(annotation):
        found |= named_types(arg)
    if isinstance(annotation, type) and not typing.get_args(annotation) \
            and annotation.__module__.split(".")[0] == "simrun":
        found.add(annotation)
    return found


def signatures(obj: object) -> dict[str, object]:
    """`where -> annotation` of the public signature of an exported name."""
    if inspect.isroutine(obj):
        return {f"({name})": hint for name, hint in typing.get_type_hints(obj).items()}
    if not inspect.isclass(obj):
        return {}
    found: dict[str, object] = {}
    if dataclasses.is_dataclass(obj):
        fields = {f.name for f in dataclasses.fields(obj) if not f.name.startswith("_")}
        found |= {f".{name}": hint for name, hint in typing.get_type_hints(obj).items() if name in fields}
    for name, member in vars(obj).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property) and member.fget is not None:
            found[f".{name}"] = typing.get_type_hints(member.fget).get("return")
        elif obj.__module__.startswith("simrun._api") and inspect.isfunction(member):
            # The API's own records: their methods are the API too (`PreparedRun.execute`).
            found |= {f".{name}({arg})": hint for arg, hint in typing.get_type_hints(member).items()}
    return found


def unexported(module: types.ModuleType) -> list[str]:
    exported = {id(getattr(module, name)) for name in module.__all__}
    return sorted(f"{name}{where} names {t.__module__}.{t.__qualname__}"
                  for name in module.__all__ for where, hint in signatures(getattr(module, name)).items()
                  for t in named_types(hint) if id(t) not in exported)


def test_every_type_a_public_signature_names_is_exported():
    assert unexported(simrun) == []


def test_a_record_that_names_a_type_simrun_does_not_export_is_found():
    planted = types.ModuleType("simrun_planted")

    class Hidden:
        pass

    @dataclasses.dataclass(frozen=True)
    class Shown:
        value: list[Hidden] | None
        _private: Hidden

    def handed(shown: Shown) -> dict[str, Hidden]:
        return {}

    Hidden.__module__ = Shown.__module__ = handed.__module__ = "simrun.planted"
    planted.Shown, planted.handed, planted.__all__ = Shown, handed, ["Shown", "handed"]
    Shown.__annotations__ = {"value": list[Hidden] | None, "_private": Hidden}
    handed.__annotations__ = {"shown": Shown, "return": dict[str, Hidden]}
    hidden = f"simrun.planted.{Hidden.__qualname__}"
    assert unexported(planted) == [f"Shown.value names {hidden}", f"handed(return) names {hidden}"]
