"""Uploads: edge lists and node tables a population's `graph:` names (stored under data_dir).

A file comes as the raw body (`?name=` names it) or as multipart/form-data (its `file` part;
the part's file name when `?name=` is left out), streamed to disk (backend.api.upload_body).
Uploads have a body limit of their own, max_upload_bytes (a 413 past it): every other request
keeps max_body_bytes. Names are plain file names: no paths.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from pydantic import BaseModel

from backend.api import upload_body
from backend.api.errors import error_responses, invalid_input
from backend.auth import require_api_token
from backend.deps import SessionDep, SettingsDep
from backend.errors import Conflict, NotFound
from backend.graphs import uploads
from backend.populations import store as population_store

router = APIRouter(
    prefix="/api/uploads",
    tags=["uploads"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
)


class UnknownUploadName(NotFound):
    what = "upload"


class UploadInUse(Conflict):
    template = (
        "upload {0} is read by population {1} (its graph's file): delete the population first"
    )


class UploadOut(BaseModel):
    name: str
    bytes: int
    modified_at: str


class UploadPage(BaseModel):
    items: list[UploadOut]
    next_after: str | None


def _out(info: uploads.UploadInfo) -> UploadOut:
    iso = info.modified_at.isoformat().replace("+00:00", "Z")
    return UploadOut(name=info.name, bytes=info.bytes, modified_at=iso)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=UploadOut,
    responses=error_responses(403, 413, 422),
    openapi_extra={
        "requestBody": {
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {"file": {"type": "string", "format": "binary"}},
                    }
                },
            },
            "required": True,
        }
    },
)
async def create_upload(
    request: Request,
    settings: SettingsDep,
    name: Annotated[
        str | None,
        Query(max_length=200, description="the file's name (no paths); multipart: its file name"),
    ] = None,
):
    """Store a file (replacing one of the same name): CSV or Parquet edge lists and node
    tables, named by a population's `graph.upload` / `graph.nodes.upload`. The body streams to
    disk as it arrives, up to max_upload_bytes (a 413 past it); nothing is kept of a refused
    one."""
    loc = ("query", "name")
    if name is not None:
        _check_name(name, loc)  # before a byte of a large body is read
    try:
        received = await upload_body.receive(request, settings.data_dir)
    except upload_body.BadMultipart as exc:
        raise invalid_input(("body",), str(exc), "value_error") from None
    try:
        chosen = name or received.filename
        if not chosen:
            raise invalid_input(loc, "name the file: ?name=edges.csv", "missing")
        _check_name(chosen, loc)
        if not received.size:
            raise invalid_input(("body",), "the file is empty", "value_error")
        info = await asyncio.to_thread(uploads.commit, settings.data_dir, chosen, received.path)
    finally:
        received.path.unlink(missing_ok=True)  # gone already once committed
    return _out(info)


def _check_name(name: str, loc: tuple[str, ...]) -> None:
    try:
        uploads.check_name(name)
    except uploads.BadUploadName as exc:
        raise invalid_input(loc, str(exc), "value_error") from None


@router.get("", response_model=UploadPage)
async def list_uploads(
    settings: SettingsDep,
    after: Annotated[
        str | None, Query(max_length=200, description="name of the last item of the previous page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="items per page")] = 100,
):
    items, next_after = await asyncio.to_thread(
        uploads.list_uploads, settings.data_dir, after, limit
    )
    return UploadPage(items=[_out(i) for i in items], next_after=next_after)


@router.delete(
    "/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404, 409, 422)
)
async def delete_upload(name: str, settings: SettingsDep, session: SessionDep):
    """Delete an upload no deployed population reads (a 409 names those that do: the keeper
    reads their graph's files again to re-place agents after a worker loss)."""
    users = await population_store.populations_using_upload(session, name)
    if users:
        raise UploadInUse(name, ", ".join(map(str, users)))
    try:
        await asyncio.to_thread(uploads.delete_upload, settings.data_dir, name)
    except uploads.BadUploadName as exc:
        raise invalid_input(("path", "name"), str(exc), "value_error") from None
    except uploads.UnknownUpload:
        raise UnknownUploadName(name) from None
    return Response(status_code=status.HTTP_204_NO_CONTENT)
