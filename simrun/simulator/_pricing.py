"""What a model call costs: its usage times the prices in budgets.toml, in exact decimals.

A model with no price refuses to start: it is never counted as $0. Amounts are rounded up to
the store's precision (`simrun._money`). Before a call the ledger
holds its worst case: every byte of the prompt counted as a token (no tokenizer yields more
tokens than bytes) at the dearest input rate, plus `max_tokens` of output.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from simrun._errors import ConfigError
from simrun._money import stored_usd
from simrun._settings import Budgets, Price

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Usage:
    input_tokens: int            # billed at the input rate (not read from or written to the cache)
    cached_input_tokens: int     # read from the prompt cache
    cache_write_tokens: int      # written to the prompt cache (Anthropic)
    output_tokens: int

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cached_input_tokens + self.cache_write_tokens


def price_for(budgets: Budgets, spec: str, where: str = "budgets.toml") -> Price:
    price = budgets.prices.get(spec)
    if price is None:
        raise ConfigError(
            f"no price for {spec!r}, so its spend cannot be counted; add [prices.\"{spec}\"] with "
            "input_per_mtok, cached_input_per_mtok and output_per_mtok (USD per million tokens)", path=where)
    return price


def cost(price: Price, usage: Usage) -> Decimal:
    cached = price.cached_input_per_mtok if price.cached_input_per_mtok is not None else price.input_per_mtok
    write = price.cache_write_per_mtok if price.cache_write_per_mtok is not None else price.input_per_mtok
    return stored_usd((usage.input_tokens * price.input_per_mtok + usage.cached_input_tokens * cached
                       + usage.cache_write_tokens * write + usage.output_tokens * price.output_per_mtok) / MILLION)


def worst_case(price: Price, prompt_bytes: int, max_tokens: int) -> Decimal:
    dearest = max(p for p in (price.input_per_mtok, price.cached_input_per_mtok, price.cache_write_per_mtok)
                  if p is not None)
    return stored_usd((prompt_bytes * dearest + max_tokens * price.output_per_mtok) / MILLION)
