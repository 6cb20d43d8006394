"""`/api/blueprints`: validate and compile, save as YAML, list the saved files, fetch one by id."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import anyio
import yaml
from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel

from awb.api.errors import ERRORS, ErrorBody, GuardedRoute
from awb.api.service import blueprint_service
from awb.blueprints.compile import CompiledBlueprint
from awb.blueprints.files import LIST_PAGE_MAX, BlueprintFile, load_yaml
from awb.blueprints.service import BlueprintService
from awb.errors import AwbError

router = APIRouter(prefix="/api/blueprints", tags=["blueprints"], route_class=GuardedRoute)
Service = Annotated[BlueprintService, Depends(blueprint_service)]


class MalformedBody(AwbError):
    code = "bad_request"
    http_status = 400


YAML_TYPES = ("application/yaml",)


async def _read_blueprint(request: Request) -> object:
    """The raw body as JSON, or YAML when sent as `application/yaml`; the blueprint rules (with field-level
    errors) are the service's to apply."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    # Only types a browser cannot send cross-site without asking first: no form posts that save files.
    if media != "application/json" and media not in YAML_TYPES:
        raise MalformedBody(
            f"send the blueprint as application/json or application/yaml, not {media or 'no content type'}",
            errors=[{"path": "(content-type)", "message": "must be application/json or application/yaml"}],
        )
    body = await request.body()
    if media in YAML_TYPES:
        try:
            # Parsing a large document takes a while (seconds of pure Python without libyaml): off the loop.
            return await anyio.to_thread.run_sync(load_yaml, body)
        except yaml.YAMLError as err:
            raise MalformedBody(
                f"the body is not YAML: {err}", errors=[{"path": "(body)", "message": str(err)}]
            ) from None
    try:
        return await anyio.to_thread.run_sync(json.loads, body)
    except RecursionError:
        raise MalformedBody(
            "the body nests too deeply to read", errors=[{"path": "(body)", "message": "nested too deeply"}]
        ) from None
    except ValueError as err:
        raise MalformedBody(f"the body is not JSON: {err}", errors=[{"path": "(body)", "message": str(err)}]) from None


BlueprintBody = Annotated[object, Depends(_read_blueprint)]
#: The body is read by hand (to report field-level errors), so its schema is declared here.
BLUEPRINT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A blueprint: head, arms, legs, heart, spine.",
        "content": {
            media: {"schema": {"$ref": "#/components/schemas/Blueprint"}} for media in ("application/json", *YAML_TYPES)
        },
    }
}
BlueprintId = Annotated[str, Path(max_length=64, description="The id validate-and-compile or save returned (`bp_…`).")]


class CompiledSummary(BaseModel):
    mode: str
    model: str
    settings: dict[str, Any]
    agents: list[str]
    tools: list[str]


class CompileReply(BaseModel):
    valid: bool = True
    blueprint_id: str
    blueprint: dict[str, Any]
    compiled: CompiledSummary


class SaveReply(CompileReply):
    file: str


class BlueprintList(BaseModel):
    blueprints: list[BlueprintFile]
    #: Give it as `after` for the files that follow; null when `blueprints` ends the listing.
    next_after: str | None = None


class BlueprintReply(BaseModel):
    blueprint_id: str
    blueprint: dict[str, Any]
    cached: bool


def _summary(compiled: CompiledBlueprint) -> CompiledSummary:
    return CompiledSummary(
        mode=compiled.blueprint.legs.mode,
        model=compiled.model_spec,
        settings=compiled.settings,
        agents=[agent.mode for agent in compiled.agents],
        tools=sorted({ns for agent in compiled.agents for ns in agent.tools}),
    )


def _reply(compiled: CompiledBlueprint) -> CompileReply:
    return CompileReply(
        blueprint_id=compiled.blueprint_id,
        blueprint=compiled.blueprint.model_dump(mode="json"),
        compiled=_summary(compiled),
    )


@router.post("/validate-and-compile", responses=ERRORS, openapi_extra=BLUEPRINT_BODY)
async def validate_and_compile(service: Service, blueprint: BlueprintBody) -> CompileReply:
    """Validate a blueprint, compile it and cache it under its id (a run may then name `blueprint_id`)."""
    return _reply(service.validate_and_compile(blueprint))


@router.post("", responses=ERRORS, openapi_extra=BLUEPRINT_BODY)
async def save_blueprint(service: Service, blueprint: BlueprintBody) -> SaveReply:
    """Validate, compile and write the blueprint as YAML to `<name>-<timestamp>.yaml` in the blueprints directory."""
    compiled, file = await service.save(blueprint)
    return SaveReply(**_reply(compiled).model_dump(), file=file)


@router.get(
    "",
    responses={**ERRORS, 404: {"model": ErrorBody, "description": "No file `after` names."}},
    response_model=BlueprintList,
)
async def list_blueprints(
    service: Service,
    limit: Annotated[
        int | None, Query(ge=1, le=LIST_PAGE_MAX, description="Most files in this reply; absent: all of them.")
    ] = None,
    after: Annotated[
        str | None,
        Query(min_length=1, max_length=256, description="The `next_after` of the previous page; absent: the newest."),
    ] = None,
) -> BlueprintList:
    """The blueprint files in the blueprints directory, newest first: all of them, or with `limit` a page at a
    time (`next_after` is where the next page starts, null on the last); files that no longer validate carry
    `error`."""
    if limit is None:
        # One scan: a file's entry is a few names (its content is read once and kept), so the whole listing
        # is small; paging it as the logs are would scan the directory again for every page.
        files, _ = await service.list_page(after=after, limit=sys.maxsize)
        return BlueprintList(blueprints=files, next_after=None)
    files, next_after = await service.list_page(after=after, limit=limit)
    return BlueprintList(blueprints=files, next_after=next_after)


@router.get("/{blueprint_id}", responses={**ERRORS, 404: {"model": ErrorBody, "description": "Unknown id."}})
async def get_blueprint(service: Service, blueprint_id: BlueprintId) -> BlueprintReply:
    """A compiled blueprint by id: from the cache, else from the saved files."""
    compiled, cached = await service.get(blueprint_id)
    return BlueprintReply(
        blueprint_id=compiled.blueprint_id, blueprint=compiled.blueprint.model_dump(mode="json"), cached=cached
    )
