"""Errors the agent runtime reports on purpose; all part of the one `awb.errors` hierarchy."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from awb.errors import AwbError


class ModelError(AwbError):
    """The model provider failed (HTTP error, unreachable, unusable reply after retries)."""

    code = "model_error"
    http_status = 502


class ModelRefused(AwbError):
    """The model declined the task (an OpenAI `refusal`, an Anthropic `stop_reason: refusal`); `details.refusal`
    holds its words. Not a provider failure: the loop ends the run in `refused`, a finished run's outcome."""

    code = "refused"
    http_status = 422
    #: What `awb agents run` and `awb blueprints run` exit with when the model declined: the run finished
    #: and its JSON is printed, but there is no answer, and a script tells that apart from a failure (1)
    #: and a usage error (2).
    exit_code = 3


class MalformedAction(AwbError):
    """The model replied with something that is not exactly one valid action."""

    code = "malformed_action"
    http_status = 422


class AgentNotFound(AwbError):
    code = "agent_not_found"
    http_status = 404
    exit_code = 2


class AgentDefinitionError(AwbError):
    """An agent class that cannot run as declared: no pydantic Input/Output, a subagent allowed tools
    its parent is not, or a tool namespace no configured server provides."""

    code = "agent_invalid"
    http_status = 422
    exit_code = 2


class TooManyFunctions(AwbError):
    """An agent would offer its model more functions (tools, subagents, `done`, `run_code`) than a
    provider takes in one request (`awb.agents.models.functions.MAX_FUNCTIONS`)."""

    code = "too_many_functions"
    http_status = 422
    exit_code = 2


class ServerUnavailable(AwbError):
    """An MCP server named in the run's configuration could not be reached or listed."""

    code = "server_unavailable"
    http_status = 502


def validation_errors(err: ValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors as plain JSON (lists, not tuples), fit to show a model or print."""
    errors: list[dict[str, Any]] = json.loads(err.json(include_url=False, include_input=False))
    return errors
