"""Every transport, user backend and model API in the package states the whole contract its callers use.

The runner, the conversation loop, check-runtime and the Ray executor reach a runtime only through
`RuntimeAdapter`'s members, and a user backend only through `UserBackend`'s and `UserSession`'s,
with no probing (`hasattr`, `getattr` with a default): a member a class lacks would fail a run
part-way. So every such class in the package is found (a new one too), built, and checked against
each member of its Protocol: present on the instance, and for a method, one that can be called
as the Protocol calls it, sync or async alike.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from typing_extensions import get_protocol_members, is_protocol

import simrun.simulator.adapters as adapters_package
import simrun.simulator.users as users_package
from simrun.simulator._ledger import Ledger
from simrun.simulator.adapters._base import RuntimeAdapter, Transport
from simrun.simulator.users._base import UserBackend, UserSession
from simrun.simulator.users._providers import Provider


def classes_of(package: Any, has: Callable[[type], bool]) -> dict[str, type]:
    """The classes defined in the package's modules (not imported into them) that `has` picks."""
    found = {}
    for module_info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if module_info.name.endswith(".supervisor"):     # a script of its own, run by ManagedProcess
            continue
        module = importlib.import_module(module_info.name)
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and cls.__module__ == module.__name__ and not is_protocol(cls) and has(cls):
                found[f"{module.__name__}.{name}"] = cls
    return found


def missing(instance: Any, protocol: type) -> list[str]:
    """Each member of `protocol` that `instance` does not state, or states in a form its callers
    cannot use, with why."""
    problems = []
    for name in sorted(get_protocol_members(protocol)):
        if not hasattr(instance, name):
            problems.append(f"{name}: absent")
            continue
        wanted = inspect.getattr_static(protocol, name, None)
        if not inspect.isfunction(wanted):
            continue         # an attribute or a property: present is what its callers need
        given = getattr(instance, name)
        if not callable(given):
            problems.append(f"{name}: not a method")
            continue
        if inspect.iscoroutinefunction(wanted) != inspect.iscoroutinefunction(given):
            problems.append(f"{name}: {'async' if inspect.iscoroutinefunction(wanted) else 'sync'} in the Protocol")
            continue
        # Called as the Protocol declares it: with every parameter, and with only the required ones.
        params = list(inspect.signature(wanted).parameters.values())[1:]      # less self
        required = [p for p in params if p.default is inspect.Parameter.empty]
        for args in (params, required):
            try:
                inspect.signature(given).bind(*[None] * len(args))
            except TypeError as exc:
                problems.append(f"{name}: cannot be called with ({', '.join(p.name for p in args)}): {exc}")
                break
    return problems


def is_transport(cls: type) -> bool:
    # A subclass of the base, or anything else that looks like a transport (and then must be one).
    return (issubclass(cls, Transport) and cls is not Transport) or all(
        callable(getattr(cls, op, None)) for op in ("start", "turn", "state", "audit"))


def is_backend(cls: type) -> bool:
    return callable(getattr(cls, "session", None))


def is_session(cls: type) -> bool:
    return callable(getattr(cls, "next_turn", None))


# How each transport is built for the check: no process is started, no connection made. A class
# found that is not here fails the test, which says to add it.
TRANSPORTS: dict[str, Callable[[], Any]] = {
    "simrun.simulator.adapters._python.PythonRuntime": lambda: _python(),
    "simrun.simulator.adapters._http.HttpRuntime": lambda: _http(),
    "simrun.simulator.adapters._stdio.StdioRuntime": lambda: _stdio(),
    "simrun.simulator.adapters._foreign.ForeignRuntime": lambda: _foreign(),
    "simrun.simulator.adapters._callable.CallableRuntime": lambda: _callable(),
    "simrun.simulator.adapters._template.TemplateRuntime": lambda: _template(),
    "simrun.simulator.adapters._template.ChatRuntime": lambda: _chat(),
}


def _python() -> Any:
    from simrun.examples.tripdesk import TripDesk
    from simrun.simulator.adapters._python import PythonRuntime

    return PythonRuntime(TripDesk())


def _http() -> Any:
    from simrun.simulator.adapters._http import HttpRuntime

    return HttpRuntime(url="http://127.0.0.1:1")


def _stdio() -> Any:
    from simrun.simulator.adapters._stdio import StdioRuntime

    return StdioRuntime(["true"])


def _foreign() -> Any:
    from simrun.simulator.adapters._foreign import ForeignRuntime

    return ForeignRuntime()


def _callable() -> Any:
    from simrun.simulator.adapters._callable import CallableRuntime

    return CallableRuntime("json:dumps")


def _template() -> Any:
    from simrun.simulator.adapters._template import TemplateRuntime

    return TemplateRuntime(url="http://127.0.0.1:1/reply", body={"text": "{message}"}, reply="/text")


def _chat() -> Any:
    from simrun.simulator.adapters._template import ChatRuntime

    return ChatRuntime(url="http://127.0.0.1:1/v1", model="m")


def _scripted() -> Any:
    from simrun.simulator.users._scripted import ScriptedUser

    return ScriptedUser()


def _model() -> Any:
    from simrun.simulator.users import _model as model

    price = model.Price(input_per_mtok=Decimal(1), output_per_mtok=Decimal(2))
    return model.ModelUser("openai:m", object(), price, Ledger(Decimal(1)))


BACKENDS: dict[str, Callable[[], Any]] = {
    "simrun.simulator.users._scripted.ScriptedUser": _scripted,
    "simrun.simulator.users._model.ModelUser": _model,
}
# Each backend's sessions, made by the backend itself; the classes they are must be all there are.
SESSIONS = {
    "simrun.simulator.users._scripted.ScriptedSession": "simrun.simulator.users._scripted.ScriptedUser",
    "simrun.simulator.users._model.ModelSession": "simrun.simulator.users._model.ModelUser",
}


def _openai() -> Any:
    from simrun.simulator.users._providers import OpenAIProvider

    return OpenAIProvider("m", offline=True)


def _anthropic() -> Any:
    from simrun.simulator.users._providers import AnthropicProvider

    return AnthropicProvider("m", offline=True)


# The model APIs a model-played user calls (`Provider`).
PROVIDERS: dict[str, Callable[[], Any]] = {
    "simrun.simulator.users._providers.OpenAIProvider": _openai,
    "simrun.simulator.users._providers.AnthropicProvider": _anthropic,
}


def is_provider(cls: type) -> bool:
    return all(callable(getattr(cls, op, None)) for op in ("request", "complete"))


def test_every_transport_in_the_package_states_the_whole_runtime_contract():
    found = classes_of(adapters_package, is_transport)
    assert set(found) == set(TRANSPORTS), (
        f"transports found {sorted(set(found) - set(TRANSPORTS))}, gone {sorted(set(TRANSPORTS) - set(found))}: "
        "say in TRANSPORTS how to build each one, so that it is checked against RuntimeAdapter")
    for name, cls in found.items():
        assert issubclass(cls, Transport), f"{name} must inherit Transport (the contract's defaults and checks)"
        runtime = TRANSPORTS[name]()
        try:
            assert missing(runtime, RuntimeAdapter) == [], f"{name} does not state all of RuntimeAdapter"
        finally:
            asyncio.run(runtime.aclose())


def test_every_user_backend_and_its_sessions_state_the_whole_user_contract(demo):
    found = classes_of(users_package, is_backend)
    assert set(found) == set(BACKENDS), (
        f"user backends found {sorted(set(found) - set(BACKENDS))}, gone {sorted(set(BACKENDS) - set(found))}: "
        "say in BACKENDS how to build each one, so that it is checked against UserBackend")
    sessions = classes_of(users_package, is_session)
    assert set(sessions) == set(SESSIONS), f"sessions found {sorted(sessions)}: name each one's backend in SESSIONS"
    persona, goal = demo.personas[0], demo.goals[0]
    for name in found:
        backend = BACKENDS[name]()
        assert missing(backend, UserBackend) == [], f"{name} does not state all of UserBackend"
        session = backend.session(persona, goal, 1, 0)
        assert f"{type(session).__module__}.{type(session).__name__}" in SESSIONS
        assert missing(session, UserSession) == [], f"{type(session).__name__} does not state all of UserSession"


def test_every_model_api_states_what_a_model_played_user_asks_of_it():
    found = classes_of(users_package, is_provider)
    assert set(found) == set(PROVIDERS), (
        f"model APIs found {sorted(set(found) - set(PROVIDERS))}, gone {sorted(set(PROVIDERS) - set(found))}: "
        "say in PROVIDERS how to build each one, so that it is checked against Provider")

    async def check(name: str) -> list[str]:
        provider = PROVIDERS[name]()        # (built on a loop: the SDKs' aiohttp clients want one)
        try:
            return missing(provider, Provider)
        finally:
            await provider.client.close()

    for name in found:
        assert asyncio.run(check(name)) == [], f"{name} does not state all of Provider"


def test_the_check_finds_what_a_transport_or_backend_leaves_out():
    """The check above can fail: a member absent, a method sync where the callers await it, and
    one that takes fewer arguments than the callers pass are each reported."""

    class Partial(Transport):
        description = "partial"

        async def health(self) -> dict:
            return {"protocol": 1}

        def start(self, request: dict) -> str:     # not async: the loop awaits it
            return "s"

        async def turn(self, session: str) -> dict:     # the payload is not taken
            return {"reply": ""}

    problems = missing(Partial(), RuntimeAdapter)
    assert "start: async in the Protocol" in problems
    assert any(p.startswith("turn: cannot be called with (session, payload)") for p in problems)
    assert {p for p in problems if p.endswith("absent")} == {f"{op}: absent" for op in
                                                             ("aclose", "audit", "close", "state")}

    class Plain:
        name, paid = "plain", False

        def session(self, *args: Any) -> Any:
            return self

    assert {"stopped: absent", "start: absent", "ledger: absent", "output: absent"} <= set(
        missing(Plain(), UserBackend))


# The modules that reach a runtime or a user backend: none asks whether a member is there.
CALLERS = ("_conversation.py", "_runner.py", "_conformance.py", "cluster/_worker.py", "cluster/_executor.py")
REACHED = ("runtime", "user", "talker", "session")


def test_the_runner_and_the_loop_use_the_contracts_without_probing_for_members():
    simulator = Path(importlib.import_module("simrun.simulator").__file__).resolve().parent
    for relative in CALLERS:
        tree = ast.parse((simulator / relative).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("hasattr", "getattr"):
                target = ast.unparse(node.args[0]) if node.args else ""
                assert not any(word in target for word in REACHED), (
                    f"{relative}:{node.lineno}: {ast.unparse(node)} probes a contract member; state it in the "
                    "Protocol (with its default in the base) and read it plainly")
