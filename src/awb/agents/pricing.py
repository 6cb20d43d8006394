"""Prices of model tokens from an offline table (the `genai-prices` package ships its data).

A model is priced by its `provider` and `model` attributes; a model the table does not know
(a local vLLM model, the scripted model) has no price, and `max_cost_usd` refuses it up front.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


def _identity(model: object) -> tuple[str | None, str | None]:
    provider = getattr(model, "provider", None)
    name = getattr(model, "model", None)
    return (provider if isinstance(provider, str) else None), (name if isinstance(name, str) else None)


@lru_cache(maxsize=256)
def _calc(provider: str | None, name: str, input_tokens: int, output_tokens: int) -> float | None:
    from genai_prices import Usage, calc_price  # imported on first use: the table is large

    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    attempts: list[dict[str, Any]] = [{"provider_id": provider}] if provider else []
    attempts.append({})
    for options in attempts:
        try:
            return float(calc_price(usage, model_ref=name, **options).total_price)
        except LookupError:
            continue
    return None


def price_usd(model: object, input_tokens: int, output_tokens: int) -> float | None:
    """What these tokens cost on `model`, in US dollars; None when its price is unknown."""
    provider, name = _identity(model)
    if name is None:
        return None
    return _calc(provider, name, input_tokens, output_tokens)


def has_price(model: object) -> bool:
    return price_usd(model, 0, 0) is not None
