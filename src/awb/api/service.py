"""How endpoints reach the blueprint service the app was built with."""

from __future__ import annotations

from typing import cast

from fastapi import Request

from awb.blueprints.service import BlueprintService


def blueprint_service(request: Request) -> BlueprintService:
    return cast(BlueprintService, request.app.state.blueprints)
