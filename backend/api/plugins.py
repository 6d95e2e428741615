"""The installed simulation plugins (populace.registry): what each declares, for the launch
form, the CLI and anyone writing a config."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query

from backend.api.errors import error_responses
from backend.api.params import Limit
from backend.auth import require_api_token
from backend.plugins.schemas import BrokenPluginOut, PluginOut, PluginPage
from populace.plugin import NAME
from populace.registry import installed

router = APIRouter(
    prefix="/api/plugins",
    tags=["plugins"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
)
PluginName = Annotated[str, Path(pattern=NAME, description="a plugin's name")]


@router.get("", response_model=PluginPage)
async def list_plugins(
    limit: Limit = 100,
    after: Annotated[
        str | None, Query(pattern=NAME, description="name of the last plugin of the previous page")
    ] = None,
):
    registry = installed()
    names = sorted(n for n in registry.plugins if after is None or n > after)
    page = names[:limit]
    return PluginPage(
        items=[PluginOut(**registry.plugins[n].describe()) for n in page],
        next_after=page[-1] if len(names) > limit else None,
        broken=[]
        if after is not None
        else [BrokenPluginOut(name=n, error=e) for n, e in sorted(registry.broken.items())],
    )


@router.get("/{name}", response_model=PluginOut, responses=error_responses(404))
async def get_plugin(name: PluginName):
    try:
        plugin = installed().get(name)
    except KeyError as exc:
        raise HTTPException(404, exc.args[0]) from None
    return PluginOut(**plugin.describe())
