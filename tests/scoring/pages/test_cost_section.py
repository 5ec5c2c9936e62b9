"""The report's cost section: amounts with four significant digits, never in exponent form."""

from __future__ import annotations

from decimal import Decimal

import pytest

from simrun.scoring.store._rates import significant


@pytest.mark.parametrize(("amount", "shown"), [
    (Decimal("0.000123456"), "0.0001235"), (Decimal("0.0123456"), "0.01235"), (Decimal("1.23456"), "1.235"),
    (Decimal("12.3456"), "12.35"), (Decimal("1234.56"), "1235"), (Decimal("0.00001"), "0.00001000"),
    (Decimal("0"), "0"), (0.5, "0.5000"), (Decimal("98765.4"), "98765"),
])
def test_four_significant_digits(amount, shown):
    assert significant(amount) == shown
