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

from datetime import datetime
from decimal import Decimal
from importlib.metadata import version

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
    from genai_prices import Usage, calc_price  # the table is large: load it on first use

    usage = Usage(
        input_tokens=input + cache_read + cache_write,
        output_tokens=output,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        cache_write_1h_tokens=min(cache_write_1h, cache_write),
    )
    try:
        found = calc_price(
            usage, model, provider_id=_PROVIDERS.get(provider or ""), genai_request_timestamp=at
        )
    except LookupError:
        return None
    return found.total_price


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
