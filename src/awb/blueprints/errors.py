"""Errors of the blueprint runtime, in the one `awb.errors` hierarchy."""

from __future__ import annotations

from awb.errors import AwbError


class BlueprintInvalid(AwbError):
    """The blueprint breaks a rule; `details.errors` lists each field with its message."""

    code = "blueprint_invalid"
    http_status = 400
    exit_code = 2


class BlueprintNotFound(AwbError):
    code = "blueprint_not_found"
    http_status = 404
    exit_code = 2


class GuardrailViolated(AwbError):
    """A spine limit ended the run; `details.guardrail` names it."""

    code = "guardrail_violated"
    http_status = 422


class RunFailed(AwbError):
    """The run ended without an answer for a reason that is neither the provider nor a guardrail."""

    code = "run_failed"
    http_status = 500
