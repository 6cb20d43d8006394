"""What the visual builder asks besides blueprints: component schemas and instruction improvement."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from awb.api.errors import ERRORS, ErrorBody, GuardedRoute
from awb.api.run_share import RUN_BUSY, RunShare, run_share
from awb.api.service import blueprint_service
from awb.blueprints.improve import Improvement, ImproveRequest
from awb.blueprints.service import BlueprintService

router = APIRouter(prefix="/api", tags=["builder"], route_class=GuardedRoute)
Service = Annotated[BlueprintService, Depends(blueprint_service)]
Runs = Annotated[RunShare, Depends(run_share)]


class ImproveReply(Improvement):
    original_instructions: str


@router.get("/components/schemas", responses=ERRORS)
async def component_schemas(service: Service) -> dict[str, Any]:
    """Per part: providers and models with parameter ranges, tool types with options, execution modes with
    requirements, memory and knowledge options, guardrail ranges; and the JSON Schema of each part."""
    return service.schemas()


@router.post(
    "/instructions/improve",
    responses={
        **ERRORS,
        429: RUN_BUSY,
        502: {"model": ErrorBody, "description": "Failed; `details.original_instructions` is the input unchanged."},
    },
)
async def improve_instructions(service: Service, runs: Runs, request: ImproveRequest, http: Request) -> ImproveReply:
    """Improve a system prompt toward the goals, with an explanation of the changes; a model that declines
    is answered 200 with `status: "refused"`, the instructions unchanged and its words as the explanation."""
    async with runs.hold(http):  # a model run like any other
        improved = await service.improve(request)
    return ImproveReply(**improved.model_dump(), original_instructions=request.instructions)
