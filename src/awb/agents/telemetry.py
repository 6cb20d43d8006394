"""OpenTelemetry spans for runs, model calls and tool calls, named and attributed after the GenAI
semantic conventions (`invoke_agent`, `chat`, `execute_tool`; `gen_ai.*` attributes).

They cost nothing unless an OpenTelemetry SDK is configured (`pip install agent-workbench[otel]`
and a tracer provider of your choosing); without the API installed they are skipped entirely.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from awb.agents.result import Usage

try:
    from opentelemetry import trace
except ImportError:  # pragma: no cover - the API comes with the MCP SDK, but stay optional
    trace = None  # type: ignore[assignment]

TRACER_NAME = "awb.agents"
#: Our attribute beside the GenAI convention's token counts, which have no mark for an estimate.
ESTIMATED_ATTRIBUTE = "awb.usage.estimated"
#: A tracer provider for this runtime only; None uses the global one (`trace.set_tracer_provider`).
_provider: Any = None


def use_tracer_provider(provider: Any) -> None:
    """Send the runtime's spans to `provider` instead of the global tracer provider (None: back to it)."""
    global _provider
    _provider = provider


Attributes = Mapping[str, str | int | float | bool | None]


class SpanLike(Protocol):
    def set_attribute(self, key: str, value: Any) -> None: ...


class _NoSpan:
    def set_attribute(self, key: str, value: Any) -> None:
        """Nothing records spans."""


def set_attributes(span: SpanLike, attributes: Attributes) -> None:
    for key, value in attributes.items():
        if value is not None:
            span.set_attribute(key, value)


@contextmanager
def span(name: str, attributes: Attributes) -> Iterator[SpanLike]:
    """A span named `name` (e.g. `chat gpt-4o-mini`); errors raised inside set `error.type`."""
    if trace is None:
        yield _NoSpan()
        return
    tracer = trace.get_tracer(TRACER_NAME, tracer_provider=_provider)
    with tracer.start_as_current_span(name, record_exception=False) as current:
        set_attributes(current, attributes)
        yield current


def model_attributes(model: object) -> dict[str, str | None]:
    provider = getattr(model, "provider", None)
    name = getattr(model, "model", None)
    return {
        "gen_ai.provider.name": provider if isinstance(provider, str) else None,
        "gen_ai.request.model": name if isinstance(name, str) else None,
    }


def usage_attributes(usage: Usage) -> dict[str, int | bool]:
    """A span's token counts, and whether they hold an estimate (the provider reported no usage): not figures
    to bill by."""
    return {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        ESTIMATED_ATTRIBUTE: usage.estimated,
    }


def chat_attributes(model: object, temperature: float | None, max_tokens: int | None) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        **model_attributes(model),
        "gen_ai.request.temperature": temperature,
        "gen_ai.request.max_tokens": max_tokens,
    }
