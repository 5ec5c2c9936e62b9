"""The suite's own scheduling (tests/conftest.py): the modules it starts first still exist, so that
renaming one cannot quietly send its long tests back to the end of a pytest-xdist run."""

from __future__ import annotations

from tests.conftest import LONGEST_FIRST, ROOT


def test_every_module_started_first_exists_once():
    missing = [module for module in LONGEST_FIRST if not (ROOT / module).is_file()]
    assert not missing, f"tests/conftest.py's LONGEST_FIRST names modules that are gone: {missing}"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
