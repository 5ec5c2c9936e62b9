"""Amounts of US dollars, exactly: `5usd`, `$5`, `5 USD`, `0.50usd` -> Decimal('5'), ..."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from scoring.errors import BudgetSyntaxError

_AMOUNT = re.compile(r"^\s*(?P<dollar>\$)?\s*(?P<num>[-+]?\d+(?:\.\d+)?|[-+]?\.\d+)\s*(?P<unit>[a-z]+)?\s*$", re.I)


def parse_usd(text: str, *, where: str = "--budget") -> Decimal:
    """Parse an amount of US dollars; anything else is refused with the reason."""
    m = _AMOUNT.match(str(text))
    if not m:
        raise BudgetSyntaxError(f"{text!r} is not an amount of money; write it like 5usd, $5, "
                                "'5 USD' or 0.50usd", field=where)
    unit = (m.group("unit") or "").lower()
    if unit and unit != "usd":
        raise BudgetSyntaxError(f"{text!r}: only US dollars are supported; write it like 5usd",
                                field=where)
    if m.group("dollar") and unit:
        raise BudgetSyntaxError(f"{text!r}: write either $5 or 5usd, not both", field=where)
    try:
        amount = Decimal(m.group("num"))
    except InvalidOperation:  # pragma: no cover - the pattern admits only decimals
        raise BudgetSyntaxError(f"{text!r} is not an amount of money", field=where) from None
    if amount < 0:
        raise BudgetSyntaxError(f"{text!r}: a budget cannot be negative", field=where)
    return amount


def usd(amount: Decimal | float) -> str:
    return f"${Decimal(str(amount)):.2f}"
