"""Budgets in US dollars, and the TOML files: every mistake named with its place."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simrun._errors import BudgetSyntaxError, ConfigError
from simrun._money import parse_usd
from simrun._settings import load_budgets, load_project
from simrun.simulator._ledger import Ledger


@pytest.mark.parametrize("text, amount", [
    ("5usd", "5"), ("$5", "5"), ("5 USD", "5"), ("0.50usd", "0.50"), ("12.25 usd", "12.25"), ("3", "3"),
    ("0.00000001usd", "0.00000001"), ("9999999999.99999999usd", "9999999999.99999999"), ("1.500000000usd", "1.5"),
])
def test_accepted_budgets(text, amount):
    assert parse_usd(text) == Decimal(amount)


@pytest.mark.parametrize("text, says", [
    ("5eur", "only US dollars"), ("-1usd", "cannot be negative"), ("five", "not an amount"),
    ("$5usd", "either"), ("", "not an amount"),
    # What the store cannot keep (DECIMAL(18, 8)) is refused before the run, not met at its first write.
    ("0.000000001usd", "8 decimal places"), ("1.123456789usd", "8 decimal places"),
    ("10000000000usd", "below 10,000,000,000 USD"), ("1" + "0" * 40 + "usd", "below"),
])
def test_refused_budgets(text, says):
    with pytest.raises(BudgetSyntaxError) as info:
        parse_usd(text)
    assert says in str(info.value) and str(info.value).startswith("budget: ")


def test_budgets_toml_typo_names_line_and_key(tmp_path):
    path = tmp_path / "budgets.toml"
    path.write_text("[budget]\ndefault = \"5usd\"\n\n[gate]\nalpha = 0.05\nmin_efect = 0.05\n")
    with pytest.raises(ConfigError) as info:
        load_budgets(path)
    exc = info.value
    assert (exc.path, exc.line, exc.field) == (str(path), 6, "gate.min_efect")
    assert "unknown setting 'min_efect'" in str(exc)


def test_budgets_toml_bad_value_and_bad_syntax(tmp_path):
    path = tmp_path / "budgets.toml"
    path.write_text('[budget]\ndefault = "5eur"\n')
    with pytest.raises(ConfigError) as info:
        load_budgets(path)
    assert info.value.line == 2 and "only US dollars" in str(info.value)
    path.write_text('[gate\nalpha = 0.05\n')
    with pytest.raises(ConfigError) as info:
        load_budgets(path)
    assert info.value.line == 1 and "not valid TOML" in str(info.value)


@pytest.mark.parametrize("value, says", [("nan", "finite number"), ("inf", "finite number"),
                                         ("1000001", "less than or equal to 1000000"), ("1e300", "less than or equal")])
def test_a_price_no_ledger_can_count_is_refused_naming_its_line(tmp_path, value, says):
    """TOML writes nan and inf; a price past a dollar a token is no model's, and its costs would be
    past what the ledger and the store count (a worst case of 10**300 USD raised mid-run)."""
    path = tmp_path / "budgets.toml"
    path.write_text(f'[prices."openai:gpt-x"]\ninput_per_mtok = 1\noutput_per_mtok = {value}\n')
    with pytest.raises(ConfigError) as info:
        load_budgets(path)
    assert info.value.line == 3 and says in str(info.value), str(info.value)


@pytest.mark.parametrize("line, field, says", [
    ("timeout_s = inf", "runtime.timeout_s", "finite number"),
    ("startup_timeout_s = nan", "runtime.startup_timeout_s", "finite number"),
    ("timeout_s = 1e9", "runtime.timeout_s", "less than or equal to 86400"),
    ("options = {scale = inf}", "runtime.options.scale", "the number inf"),
    ("options = {name = \"a\\u0000b\"}", "runtime.options.name", "NUL"),
    (f"options = {{big = {10 ** 19}}}", "runtime.options.big", None),
    ("options = {deep = [1, [2, -inf]]}", "runtime.options.deep.1.1", "the number -inf"),
])
def test_a_setting_the_store_cannot_keep_is_refused_naming_its_line(tmp_path, line, field, says):
    """A run's settings are stored with it, as JSON: a setting holding NaN, an infinity or a NUL
    (TOML writes all three), or a wait no run means (a timeout past a day), is refused at load,
    naming the file, line and field; it had raised mid-run, after the banner, from the store."""
    path = tmp_path / "simrun.toml"
    path.write_text(f'[run]\nuser = "scripted"\n\n[runtime]\ntransport = "python"\n{line}\n')
    if says is None:        # within what TOML and the store hold: loaded as written
        assert load_project(path).runtime.options == {"big": 10 ** 19}
        return
    with pytest.raises(ConfigError) as info:
        load_project(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 6, field), info.value
    assert says in str(info.value), str(info.value)


def test_a_model_call_timeout_is_finite_and_at_most_a_day(tmp_path):
    path = tmp_path / "simrun.toml"
    for value, says in (("inf", "finite number"), ("86401", "less than or equal to 86400")):
        path.write_text(f"[user]\ntimeout_s = {value}\n")
        with pytest.raises(ConfigError) as info:
            load_project(path)
        assert info.value.line == 2 and says in str(info.value), str(info.value)
    path.write_text("[user]\ntimeout_s = 86400\n")
    assert load_project(path).user.timeout_s == 86400


def test_price_table_keys_with_quotes(tmp_path):
    path = tmp_path / "budgets.toml"
    path.write_text('[prices."openai:gpt-x"]\ninput_per_mtok = 1\noutput_per_mtok = -2\n')
    with pytest.raises(ConfigError) as info:
        load_budgets(path)
    assert info.value.line == 3 and info.value.field == "prices.openai:gpt-x.output_per_mtok"


def test_missing_files_mean_defaults(tmp_path):
    assert load_budgets(tmp_path / "nope.toml").budget.default == "5usd"
    assert load_project(tmp_path / "nope.toml").runtime.target == "simrun.examples.tripdesk:TripDesk"


def test_the_bundled_files_are_valid():
    from tests.conftest import ROOT

    assert load_budgets(ROOT / "budgets.toml").gate.alpha == 0.05
    assert load_project(ROOT / "simrun.toml").run.user == "scripted"


def test_ledger_never_lets_reservations_overshoot():
    ledger = Ledger(Decimal("1.00"))
    first = ledger.reserve(Decimal("0.60"))
    assert first is not None and ledger.reserve(Decimal("0.60")) is None
    ledger.settle(first, Decimal("0.25"))
    assert ledger.spent == Decimal("0.25") and ledger.remaining == Decimal("0.75")
    ledger.settle(ledger.reserve(Decimal("0.10")), Decimal("0.20"))
    assert ledger.overruns == 1 and ledger.spent == Decimal("0.45")   # counted exactly, and seen


prices = st.one_of(st.decimals(min_value=0, max_value=1000, places=12, allow_nan=False, allow_infinity=False),
                   st.decimals(min_value=0, max_value=1_000_000, places=2, allow_nan=False, allow_infinity=False))
tokens = st.integers(min_value=0, max_value=20_000_000)


@settings(max_examples=500, deadline=None)
@given(prices, prices, prices, prices, tokens, tokens, tokens, tokens, st.integers(0, 4_000_000))
def test_a_cost_is_counted_to_the_store_s_precision_never_below_and_never_above_its_worst_case(
        input_price, cached_price, write_price, output_price, uncached, cached, written, output, extra_bytes):
    from simrun._money import UNIT
    from simrun._settings import Price
    from simrun.simulator._pricing import Usage, cost, worst_case

    price = Price(input_per_mtok=input_price, cached_input_per_mtok=cached_price,
                  cache_write_per_mtok=write_price, output_per_mtok=output_price)
    counted = cost(price, Usage(uncached, cached, written, output))
    exact = (uncached * input_price + cached * cached_price + written * write_price + output * output_price) / 10**6
    assert counted.as_tuple().exponent >= -8 and exact <= counted < exact + UNIT
    # A prompt of at least as many bytes as tokens, and max_tokens at least the output: the hold covers it.
    worst = worst_case(price, uncached + cached + written + extra_bytes, output)
    assert worst.as_tuple().exponent >= -8 and worst >= counted
