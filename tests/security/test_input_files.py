"""Goal, persona and configuration files from an untrusted contributor: each trap is refused in
one line that names the file (and the line where there is one), quickly, before anything runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from simrun._errors import ConfigError
from simrun._input_files import MAX_DEPTH, MAX_FILE_BYTES, load_yaml
from simrun.scoring.dataset._files import load_dataset
from tests.security.conftest import one_line_error

GOAL = "goals/cancel-trip.yaml"


def refused(project: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_dataset(project / "personas", project / "goals")
    return info.value


BILLION_LAUGHS = "\n".join(["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
                           + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]) + "\n"


def test_a_billion_laughs_goal_is_refused_in_under_a_second(run_cli, project):
    (project / "goals" / "laughs.yaml").write_text(BILLION_LAUGHS)
    started = time.monotonic()
    code, output = run_cli("validate")
    assert time.monotonic() - started < 1.0 + 0.5        # the CLI's own start-up aside
    assert code == 2
    line = one_line_error(output)
    assert "goals/laughs.yaml:" in line and "expands to more than" in line


def test_deep_nesting_is_refused_with_its_line(project):
    depth = 100_000
    (project / "goals" / "deep.yaml").write_text("id: deep\nfacts: " + "[" * depth + "]" * depth + "\n")
    exc = refused(project)
    assert exc.line == 2 and f"nested more than {MAX_DEPTH} levels deep" in str(exc)


def test_a_file_that_is_not_utf8_is_refused_in_one_line(run_cli, project):
    path = project / GOAL
    path.write_bytes(path.read_bytes().replace(b"cancelled", b"cancel\xe9d"))
    code, output = run_cli("validate")
    assert code == 2
    assert "not UTF-8 text (byte 0xe9" in one_line_error(output)


def test_an_oversized_file_is_refused_before_it_is_parsed(project):
    (project / "personas" / "huge.yaml").write_text("id: huge\nname: " + "x" * MAX_FILE_BYTES + "\n")
    assert "at most 1,000,000 are read" in str(refused(project))


@pytest.mark.parametrize("template, says", [
    ("Cancel {trip:>1500000000}.", "asks for 1500000000 characters"),
    ("Cancel {trip:{trip}}.", "nested"),
    ("Cancel {trip.__class__.__mro__}.", "must name a fact plainly"),
    ("Cancel {trip[0]}.", "must name a fact plainly"),
    ("Cancel {0}.", "must name a fact plainly"),
    ("Cancel {trip.", "not a valid template"),
])
def test_a_hostile_template_is_refused_before_it_is_filled(project, template, says):
    path = project / GOAL
    text = path.read_text()
    first_say = next(line for line in text.splitlines() if line.strip().startswith("say:"))
    path.write_text(text.replace(first_say, f"    say: [{template!r}]", 1))
    started = time.monotonic()
    exc = refused(project)
    assert time.monotonic() - started < 1.0
    assert says in str(exc) and exc.path.endswith(GOAL) and exc.line is not None


def test_a_catastrophic_pattern_is_matched_in_linear_time():
    from simrun.scoring.dataset import _patterns as patterns

    started = time.monotonic()
    assert not patterns.search("(a+)+$", "a" * 50_000 + "!")     # Python's re would never return
    assert time.monotonic() - started < 1.0


def test_a_pattern_linear_matching_cannot_run_is_refused_at_load(project):
    path = project / "goals" / "ask-bags.yaml"
    path.write_text(path.read_text().replace('match: "how many bags"', 'match: "(?<=how) many bags"'))
    exc = refused(project)
    assert "lookarounds and backreferences are not supported" in str(exc) and exc.field == "questions.0.match"


@pytest.mark.parametrize("text, expected", [
    ("time: 10:30\n", {"time": "10:30"}),             # YAML 1.1 would say 630
    ("answer: no\n", {"answer": "no"}),               # ... False
    ("code: 0755\n", {"code": "0755"}),               # ... 493
    ("on: yes\n", {"on": "yes"}),
    ("ok: true\nn: 12\nx: 0x1f\nf: 1.5\ne: 1e3\n", {"ok": True, "n": 12, "x": 31, "f": 1.5, "e": 1000.0}),
    ("day: 2027-02-20\n", {"day": __import__("datetime").date(2027, 2, 20)}),
])
def test_plain_scalars_are_typed_as_yaml_1_2_types_them(text, expected):
    assert load_yaml(text)[0] == expected


def test_an_impossible_date_names_its_line(project):
    path = project / "goals" / "open-and-ask-date.yaml"
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "20" in line and line.strip()[:1].isalpha() and "-" in line
              and line.split(":", 1)[1].strip()[:2] == "20")
    key = lines[at].split(":", 1)[0]
    lines[at] = f"{key}: 2027-02-30"
    path.write_text("\n".join(lines) + "\n")
    exc = refused(project)
    assert exc.line == at + 1 and "a value cannot be read" in str(exc)


@pytest.mark.parametrize("name, body, says", [
    ("simrun.toml", b"[run]\nrepetitions = 5\nuser = \"scr\xffipted\"\n", "not UTF-8 text"),
    ("budgets.toml", b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deep"),
    ("simrun.toml", b"# " + b"x" * (MAX_FILE_BYTES + 1) + b"\n", "at most 1,000,000 are read"),
])
def test_a_hostile_toml_file_is_one_line(run_cli, project, name, body, says):
    (project / name).write_bytes(body)
    code, output = run_cli("validate")
    assert code == 2
    line = one_line_error(output)
    assert name in line and says in line
