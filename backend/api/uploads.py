"""Uploads: edge lists and node tables a population's `graph:` names (stored under data_dir).

A file comes as the raw body (`?name=` names it) or as multipart/form-data (its `file` part;
the part's file name when `?name=` is left out). The body limit of every request applies
(max_body_bytes: a 413 past it). Names are plain file names: no paths.
"""

from __future__ import annotations

import asyncio
from email.parser import BytesParser
from email.policy import HTTP
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from pydantic import BaseModel

from backend.api.errors import error_responses, invalid_input
from backend.auth import require_api_token
from backend.deps import SettingsDep
from backend.errors import NotFound
from backend.graphs import uploads

router = APIRouter(
    prefix="/api/uploads",
    tags=["uploads"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
)


class UnknownUploadName(NotFound):
    what = "upload"


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


def _multipart(content_type: str, body: bytes) -> tuple[str | None, bytes]:
    """The `file` part (or the only part) of a multipart/form-data body: (file name, bytes)."""
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    if not message.is_multipart():
        raise invalid_input(("body",), "not a multipart/form-data body", "value_error")
    parts = list(message.iter_parts())
    chosen = next(
        (p for p in parts if p.get_param("name", header="content-disposition") == "file"),
        parts[0] if len(parts) == 1 else None,
    )
    if chosen is None:
        raise invalid_input(("body", "file"), "send the file as the form's `file` part", "missing")
    filename = chosen.get_filename()
    return (filename.replace("\\", "/").rsplit("/", 1)[-1] if filename else None), (
        chosen.get_payload(decode=True) or b""
    )


async def _file_of(request: Request) -> tuple[str | None, bytes]:
    """The uploaded file (declared in the route's schema as octet-stream or multipart, not
    JSON): its name when multipart gave one, and its bytes."""
    body = await request.body()
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        return _multipart(content_type, body)
    return None, body


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
    tables, named by a population's `graph.upload` / `graph.nodes.upload`."""
    filename, body = await _file_of(request)
    chosen = name or filename
    loc = ("query", "name")
    if not chosen:
        raise invalid_input(loc, "name the file: ?name=edges.csv", "missing")
    try:
        uploads.check_name(chosen)
    except uploads.BadUploadName as exc:
        raise invalid_input(loc, str(exc), "value_error") from None
    if not body:
        raise invalid_input(("body",), "the file is empty", "value_error")
    info = await asyncio.to_thread(uploads.save_upload, settings.data_dir, chosen, body)
    return _out(info)


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
    "/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404, 422)
)
async def delete_upload(name: str, settings: SettingsDep):
    try:
        await asyncio.to_thread(uploads.delete_upload, settings.data_dir, name)
    except uploads.BadUploadName as exc:
        raise invalid_input(("path", "name"), str(exc), "value_error") from None
    except uploads.UnknownUpload:
        raise UnknownUploadName(name) from None
    return Response(status_code=status.HTTP_204_NO_CONTENT)
