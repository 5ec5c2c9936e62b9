"""The layers run one way: `simulator` depends on `scoring`, never the reverse.

The judge (scoring, with the persona and goal models and the error hierarchy) must import on its
own, so that rescore, import and workers on other machines can use it without the simulator.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_no_scoring_module_imports_the_simulator():
    offenders = []
    for path in sorted((ROOT / "scoring").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                          if n == "simulator" or n.startswith("simulator.")]
    assert offenders == []


def test_the_judge_imports_without_the_simulator():
    code = ("import sys, scoring.scorer, scoring.store, scoring.rescore, scoring.bundle, scoring.merge, "
            "scoring.gate, scoring.report, scoring.dataset; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'simulator'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_command_line_starts_without_the_model_sdks_or_scipy():
    """Importing them costs seconds (openai and anthropic about 3 s, scipy.stats 1 s, measured
    with `python -X importtime`), which `simrun --help`, `simrun runs` and every Ray worker would
    pay: each is imported where it is first needed."""
    code = ("import sys, simulator.cli, simulator.ray_worker; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'openai', 'anthropic', 'scipy'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
