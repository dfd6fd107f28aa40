"""What a model call costs, from an offline price table: the ``genai-prices`` package.

``genai-prices`` (https://github.com/pydantic/genai-prices, maintained by Pydantic) ships
every provider's published per-token prices, with the dates they applied from, as Python data
inside the package. Only its bundled snapshot is read: its ``UpdatePrices`` (which fetches a
newer table over the network) is never started, so a cost is computed without a network call
and the same log gives the same figures until the pinned version is changed on purpose
(``pyproject.toml``). The package is imported on first use, so commands that show no cost do
not pay for loading the table.

Vocabulary only: this module imports nothing of agenttrail (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import cache
from importlib.metadata import version
from types import ModuleType
from typing import Literal

__all__ = ["PRICE_SOURCE", "PUBLISHED", "long_cache_writes", "price_of"]

PUBLISHED = {"0.2.3": "2026-11"}
"""When each ``genai-prices`` release agenttrail has pinned was published (PyPI), so that a
cost says how recent its prices are; a new pin adds its line (a test checks the installed
release has one)."""

_VERSION = version("genai-prices")

PRICE_SOURCE = f"genai-prices {_VERSION} (published {PUBLISHED.get(_VERSION, 'date unknown')})"
"""The price table named where a cost is shown: the package, its version and its date."""

_PROVIDERS = {"anthropic": "anthropic", "openai": "openai"}
"""Our ``meta.provider`` values and the price table's provider ids; any other provider is
left to the table to find from the model name."""


def price_of(
    model: str,
    provider: str | None,
    *,
    input: int,
    output: int,
    cache_read: int,
    cache_write: int,
    cache_write_1h: int = 0,
    at: datetime,
) -> Decimal | None:
    """The price in US dollars of one model call, or ``None`` when the table has no price for
    the model.

    Args:
        model: the model name the provider reported (``claude-sonnet-4-20250514``).
        provider: ``anthropic`` or ``openai`` (our ``meta.provider``); otherwise ``None`` and
            the table finds the provider from the model name.
        input: prompt tokens neither read from nor written to a cache.
        output: tokens generated.
        cache_read: prompt tokens read from the cache.
        cache_write: prompt tokens written to the cache.
        cache_write_1h: how many of ``cache_write`` were written for an hour, which Anthropic
            charges at a higher rate than five minutes (:func:`long_cache_writes`).
        at: when the call was made: a price that changed is read as it was then.

    The kinds are disjoint (docs/log-format.md, Usage); ``genai-prices`` takes the whole
    prompt as ``input_tokens`` with the cache reads and writes as parts of it, so they are
    added back here, and it applies each kind's own rate.
    """
    provider_id = _PROVIDERS.get(provider or "")
    long = min(cache_write_1h, cache_write)
    rates = _UNDATED.get((model, provider_id)) or _rates_at(model, provider_id, at)
    if rates == "unpriced":
        return None
    if isinstance(rates, _Rates):
        return rates.price(input, output, cache_read, cache_write - long, long)
    genai_prices, _ = _genai_prices()  # a tiered entry: its rate depends on the prompt's size
    usage = genai_prices.Usage(**_usage(input, output, cache_read, cache_write - long, long))
    amount: Decimal = genai_prices.calc_price(
        usage, model, provider_id=provider_id, genai_request_timestamp=at
    ).total_price
    return amount


def _rates_at(model: str, provider_id: str | None, at: datetime) -> _Found:
    """What the table says of ``model`` at ``at``, kept for the next call: per price entry in
    :data:`_RATES`, and per model in :data:`_UNDATED` when its price has no dates."""
    genai_prices, data_snapshot = _genai_prices()
    Usage, calc_price = genai_prices.Usage, genai_prices.calc_price
    try:
        _, found = data_snapshot.get_snapshot().find_provider_model(model, None, provider_id, None)
    except LookupError:
        _UNDATED[(model, provider_id)] = "unpriced"
        return "unpriced"
    prices = found.get_prices(at)
    rates = _RATES.get((model, provider_id, id(prices)))
    if rates is None:
        rates = "tiered"
        if not _tiered(prices):
            basis = [_usage(*(int(k == kind) for k in range(5))) for kind in range(-1, 5)]
            amounts = [
                calc_price(
                    Usage(**usage), model, provider_id=provider_id, genai_request_timestamp=at
                ).total_price
                for usage in basis
            ]
            rates = _Rates(prices, amounts[0], tuple(a - amounts[0] for a in amounts[1:]))
        _RATES[(model, provider_id, id(prices))] = rates
    if found.prices is prices:  # one entry whatever the date (no list of dated entries)
        _UNDATED[(model, provider_id)] = rates
    return rates


@cache
def _genai_prices() -> tuple[ModuleType, ModuleType]:
    """``genai_prices`` and its ``data_snapshot``, imported on the first price asked (the
    table is large) and kept: an import statement in :func:`price_of` cost 8 µs a call."""
    import genai_prices
    import genai_prices.data_snapshot

    return genai_prices, genai_prices.data_snapshot


@dataclass(frozen=True)
class _Rates:
    """The price of a call under one price entry that has no tiers: a fixed part (a price per
    request) and a price per token of each kind (input, output, cache read, cache write for
    five minutes, for an hour), read from ``genai-prices`` itself."""

    prices: object
    """The price entry (held so that its ``id`` in the key is not reused)."""
    fixed: Decimal
    per_token: tuple[Decimal, ...]

    def price(self, input: int, output: int, read: int, write_5m: int, write_1h: int) -> Decimal:
        """The price in US dollars of a call that used these tokens, each kind apart
        (:func:`price_of`'s kinds, the cache writes split by how long they last)."""
        r_input, r_output, r_read, r_write, r_long = self.per_token
        return (
            self.fixed
            + input * r_input
            + output * r_output
            + read * r_read
            + write_5m * r_write
            + write_1h * r_long
        )


_Found = _Rates | Literal["tiered", "unpriced"]
"""What the table says of a model at a date: the rates of its price entry, an entry with
tiers (its rate depends on the prompt's size: the table is asked per call), or no price."""


_RATES: dict[tuple[str, str | None, int], _Found] = {}
"""What the table says per (model, provider id, price entry): a price table without tiers is
linear in the token counts (each kind's count times its rate, plus a price per request), so
the table is asked once per entry instead of once per call (about 0.14 ms a call); a tiered
entry, whose rate depends on the prompt's size, is asked each time."""

_UNDATED: dict[tuple[str, str | None], _Found] = {}
"""The same per (model, provider id), for a model the table does not price or whose price has
no dates: found without the table's lookup (about 4 µs a call, a tenth of a second over the
header of a session of 40,000 model calls)."""


def _tiered(prices: object) -> bool:
    from genai_prices.types import TieredPrices

    return any(isinstance(value, TieredPrices) for value in vars(prices).values())


def _usage(input: int, output: int, read: int, write_5m: int, write_1h: int) -> dict[str, int]:
    """``genai-prices``' usage fields for disjoint counts: the prompt is the input with the
    cache reads and writes as parts of it."""
    return {
        "input_tokens": input + read + write_5m + write_1h,
        "output_tokens": output,
        "cache_read_tokens": read,
        "cache_write_tokens": write_5m + write_1h,
        "cache_write_1h_tokens": write_1h,
    }


def long_cache_writes(usage_raw: object) -> int:
    """Prompt tokens a call wrote to the cache for one hour, from the provider's own usage
    object (``meta.usage_raw``); 0 when it says none.

    Anthropic reports ``usage.cache_creation.ephemeral_1h_input_tokens`` beside the total
    ``cache_creation_input_tokens``, and charges those tokens twice the base input price
    rather than 1.25 times (https://platform.claude.com/docs/en/build-with-claude/prompt-caching#pricing).
    """
    if not isinstance(usage_raw, dict) or not isinstance(usage_raw.get("cache_creation"), dict):
        return 0
    count = usage_raw["cache_creation"].get("ephemeral_1h_input_tokens")
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0
