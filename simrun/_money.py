"""Amounts of US dollars, exactly: `5usd`, `$5`, `5 USD`, `0.50usd` -> Decimal('5'), ...

The store keeps money as DECIMAL(18, 8): below ten billion dollars, to the hundred-millionth.
Every amount the ledger counts has that precision (`stored_usd`), so that what a run reports,
what it stores as spent, and the sum of its stored calls are one number, not three roundings
of it.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Context, Decimal, InvalidOperation

from simrun._errors import BudgetSyntaxError
from simrun._storable import MONEY_CEILING, MONEY_PLACES

PLACES = MONEY_PLACES
UNIT = Decimal(1).scaleb(-PLACES)                   # the smallest amount the store keeps
CEILING = Decimal(MONEY_CEILING)                    # the store holds amounts below this
_ROOMY = Context(prec=400)

_AMOUNT = re.compile(r"^\s*(?P<dollar>\$)?\s*(?P<num>[-+]?\d+(?:\.\d+)?|[-+]?\.\d+)\s*(?P<unit>[a-z]+)?\s*$", re.I)


def parse_usd(text: str, *, where: str = "budget") -> Decimal:
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
    return _held(repr(text), amount, where)


Money = Decimal | int | float | str


def amount_of(value: Money, *, where: str = "budget") -> Decimal:
    """An amount of US dollars given as a number (`5`, `0.5`, `Decimal("5")`) or as text
    (`"5usd"`, parsed by `parse_usd`), held to the same rules either way."""
    if isinstance(value, str):
        return parse_usd(value, where=where)
    if isinstance(value, bool) or not isinstance(value, (Decimal, int, float)):
        raise BudgetSyntaxError(f"{value!r} is not an amount of money; give a number of US dollars (5, 0.5) "
                                "or text such as '5usd'", field=where)
    # A float as it is written (0.1, not the binary fraction nearest it): str() gives that.
    amount = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    if not amount.is_finite():
        raise BudgetSyntaxError(f"{value!r} is not an amount of money", field=where)
    return _held(repr(value), amount, where)


def _held(shown: str, amount: Decimal, where: str) -> Decimal:
    """`amount`, if the store can count it: not negative, under the ceiling, to its precision."""
    if amount < 0:
        raise BudgetSyntaxError(f"{shown}: a budget cannot be negative", field=where)
    if amount >= CEILING:
        raise BudgetSyntaxError(f"{shown}: simrun counts budgets below {CEILING:,} USD", field=where)
    if amount != amount.quantize(UNIT):
        raise BudgetSyntaxError(f"{shown}: simrun counts money to {PLACES} decimal places; write at most "
                                f"{PLACES} digits after the point", field=where)
    return amount


def stored_usd(amount: Decimal) -> Decimal:
    """`amount` to the store's precision, rounded up: a cost or a hold is never under-counted,
    and never by more than UNIT."""
    # With room for any amount (the default context's 28 digits would refuse 10**20 USD to
    # eight places): one past the budget is refused by the ledger, not here.
    return amount.quantize(UNIT, rounding=ROUND_CEILING, context=_ROOMY)


def usd(amount: Decimal | float) -> str:
    return f"${Decimal(str(amount)):.2f}"
