"""Model adapters behind one protocol: `call(prompt, tools) -> Action`."""

from awb.agents.models.base import Model, Prompt, ScriptedModel
from awb.agents.models.spec import resolve_model

__all__ = ["Model", "Prompt", "ScriptedModel", "resolve_model"]
