"""Whatever is thrown at them, the loaders and the scorer answer with data or one clear error:
never a traceback, never a hang.

Hypothesis builds random and mutated turn results and stores (for the protocol check and every
scoring check), YAML documents (for the persona and goal loader) and bundles (for import), and
each property says what a correct outcome is. A deadline per example catches a hang.
"""

from __future__ import annotations

import copy
import datetime as dt
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simrun._errors import BundleError, ConfigError, RuntimeFault, SimrunError
from simrun._protocol import State, violations
from simrun._transcript import Transcript, TurnRecord, UserTurn
from simrun.scoring.checks._guarantees import GUARANTEE_CHECKS
from simrun.scoring.checks._progress import PROGRESS_CHECKS
from simrun.scoring.checks._simulated_user import simulator_error
from simrun.scoring.dataset._files import load_dataset, load_model
from simrun.scoring.dataset._models import Goal, Persona
from simrun.scoring.store._bundle import import_bundle, load_bundle
from simrun.scoring.store._database import Store
from simrun.scoring.store._run_ids import new_run_id
from simrun.simulator.adapters._base import check_turn_result, parse_json
from tests.conftest import ROOT

EXAMPLES = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow,
                                                                           HealthCheck.function_scoped_fixture])
DEMO = load_dataset(ROOT / "personas", ROOT / "goals")

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False),
                    st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                            st.dictionaries(st.text(max_size=8), inner, max_size=5)),
                           max_leaves=30)
ids = st.sampled_from(["o-1", "o-2", "trip:T-1", "trip:T-2", "e-1", "c-1"])
offer = st.fixed_dictionaries({"id": ids}, optional={"operation": st.sampled_from(["rebook", "add_bag", None]),
                                                     "record": st.one_of(ids, st.none()), "label": st.text(max_size=10),
                                                     "arguments": st.dictionaries(st.text(max_size=5), scalars,
                                                                                  max_size=3)})
turn_results = st.fixed_dictionaries(
    {"reply": st.text(max_size=40)},
    optional={"understood": st.one_of(st.booleans(), json_values), "taken_offer": st.one_of(ids, st.none()),
              "ask": st.one_of(st.none(), st.fixed_dictionaries({}, optional={
                  "operation": st.one_of(st.text(max_size=8), st.none()), "record": st.one_of(ids, st.none()),
                  "arguments": st.lists(st.text(max_size=5), max_size=3), "repeat_reason": st.text(max_size=5)})),
              "next_steps": st.one_of(st.none(), st.lists(offer, max_size=4), json_values),
              "card": st.one_of(st.none(), st.fixed_dictionaries({"id": ids}, optional={
                  "operation": st.text(max_size=8), "record": ids,
                  "actions": st.lists(st.fixed_dictionaries({"id": ids}, optional={"label": st.text(max_size=8)}),
                                      max_size=3)})),
              "mentions": st.one_of(st.none(), st.lists(ids, max_size=4)),
              "receipts": st.one_of(st.none(), st.lists(ids, max_size=3), json_values),
              "answer": st.sampled_from(["answered", "unavailable", None, "maybe"]),
              "verdicts": st.one_of(st.none(), st.fixed_dictionaries({}, optional={
                  "refusal_emitted": st.one_of(st.booleans(), st.none()),
                  "hedge_injected": st.one_of(st.booleans(), st.none())}), json_values)})
events = st.lists(st.fixed_dictionaries(
    {"id": ids, "turn": st.integers(0, 5), "operation": st.sampled_from(["rebook", "add_bag", "cancel_trip"]),
     "status": st.sampled_from(["committed", "refused"])},
    optional={"record": st.one_of(ids, st.none()), "offer": st.one_of(ids, st.none()),
              "reason": st.one_of(st.text(max_size=8), st.none()),
              "arguments": st.dictionaries(st.text(max_size=5), scalars, max_size=3)}), max_size=4)
states = st.one_of(st.none(), st.fixed_dictionaries({
    "records": st.dictionaries(ids, st.dictionaries(st.text(max_size=8), json_values, max_size=4), max_size=3),
    "events": events}))
user_turns = st.one_of(st.builds(UserTurn, st.just("message"), st.text(max_size=60)),
                       st.builds(lambda o: UserTurn("click", offer=o), ids))


@EXAMPLES
@given(value=st.one_of(turn_results, json_values))
def test_a_turn_result_is_either_checked_or_a_runtime_fault(value):
    try:
        checked = check_turn_result(value)
    except RuntimeFault as fault:
        assert fault.kind in ("malformed", "missing_reply") and fault.evidence["message"]
        return
    assert isinstance(checked["reply"], str)


@EXAMPLES
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                     st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n)))
def test_any_bytes_are_json_or_a_runtime_fault(raw):
    try:
        parse_json(raw, "turn")
    except RuntimeFault as fault:
        assert fault.kind == "malformed"


@EXAMPLES
@given(turns=st.lists(st.tuples(user_turns, turn_results, states), min_size=1, max_size=4),
       audit=st.one_of(st.none(), st.lists(st.fixed_dictionaries({"turn": st.integers(0, 5)}), max_size=4)),
       goal=st.sampled_from(DEMO.goals), persona=st.sampled_from(DEMO.personas))
def test_every_check_reads_any_protocol_answer_without_failing(turns, audit, goal, persona):
    records = []
    for index, (user, result, state) in enumerate(turns, 1):
        try:
            result = check_turn_result(result)
        except RuntimeFault:
            result = None                      # the loop never scores a malformed answer
        if state is not None and violations(State, state):
            state = None
        records.append(TurnRecord(index, user, result, state))
    transcript = Transcript(persona.id, goal.id, 1, 0, tuple(records), "turn_cap", initial_state=None,
                            final_state=records[-1].state, audit=audit)
    for check in (*PROGRESS_CHECKS.values(), *GUARANTEE_CHECKS.values()):
        result = check(transcript, goal, persona)        # unguarded: a crash here is a bug
        assert result.checked_turns >= 0 and result.unverifiable_turns >= 0
    simulator_error(transcript, goal, persona, None)


# --- YAML -----------------------------------------------------------------------------------

GOAL_TEXT = (ROOT / "goals" / "new-trip-full.yaml").read_text()
PERSONA_TEXT = (ROOT / "personas" / "typo-theo.yaml").read_text()


def _mutations(text: str):
    lines = text.splitlines()
    return st.one_of(
        st.text(max_size=300),
        st.tuples(st.integers(0, len(lines) - 1), st.text(max_size=40)).map(
            lambda p: "\n".join(lines[:p[0]] + [p[1]] + lines[p[0] + 1:])),
        st.tuples(st.integers(0, len(text)), st.sampled_from(["&a ", "*a", "{", "[", ": ", "- ", "!!python/object ",
                                                              "\t", "'", '"', "{x:>99999999}", "10:30", "\xff"])).map(
            lambda p: text[:p[0]] + p[1] + text[p[0]:]),
        st.integers(0, len(lines)).map(lambda n: "\n".join(lines[:n])))


@EXAMPLES
@given(text=st.one_of(_mutations(GOAL_TEXT), _mutations(PERSONA_TEXT)))
def test_any_yaml_document_loads_or_is_one_config_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("yaml") / "doc.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    for model in (Goal, Persona):
        try:
            load_model(path, model)
        except ConfigError as exc:
            assert "\n" not in str(exc).split(": ", 1)[0] and str(exc).startswith(str(path))


# --- bundles --------------------------------------------------------------------------------

def _bundle() -> dict:
    from simrun.scoring.store._bundle import item_of
    from tests.conftest import run_demo

    demo_run = run_demo(DEMO, repetitions=1)
    items = [item_of(c.cell.id, c.transcript, {"started_at": dt.datetime(2026, 1, 1), "duration_ms": 5})
             for c in demo_run.conversations[:6]]
    return {"format_version": 1, "producer": "test", "dataset_hash": DEMO.hash, "dataset": DEMO.item_hashes,
            "items": json.loads(json.dumps(items, default=str))}


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


@pytest.fixture(scope="module")
def base_bundle():
    return _bundle()


@EXAMPLES
@given(data=st.data())
def test_any_mutated_bundle_loads_or_is_one_bundle_error(tmp_path_factory, base_bundle, data):
    bundle = copy.deepcopy(base_bundle)
    paths = [p for p in _paths(bundle) if p]
    for _ in range(data.draw(st.integers(1, 4))):
        path = data.draw(st.sampled_from(paths))
        parent = bundle
        try:
            for key in path[:-1]:
                parent = parent[key]
            if data.draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = data.draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue
    folder = tmp_path_factory.mktemp("bundle")
    file = folder / "b.json"
    file.write_text(json.dumps(bundle))
    try:
        loaded = load_bundle(file)
    except BundleError as exc:
        assert str(exc).startswith(str(file)) and "\n" not in str(exc)
        return
    with Store(folder / "s.duckdb") as store:       # what loads, the scorer takes
        try:
            result = import_bundle(store, loaded, DEMO, run_id=new_run_id(), source=str(file), simrun_version="t")
        except SimrunError as exc:
            assert "\n" not in str(exc)
            assert store.con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
            return
        assert result.conversations == len(loaded.items)


@pytest.mark.parametrize("key", ["\n", "a\nb", "x\r\ny", "\u2028"])
def test_a_key_of_the_files_own_text_stays_on_one_line_in_the_error(tmp_path, base_bundle, key):
    """Found by the property above: a dataset key holding a newline broke the error in two."""
    bundle = {**copy.deepcopy(base_bundle), "dataset": {key: 1}}
    file = tmp_path / "b.json"
    file.write_text(json.dumps(bundle))
    with pytest.raises(BundleError) as caught:
        load_bundle(file)
    assert len(str(caught.value).splitlines()) == 1 and repr(key) in str(caught.value)
