"""The built dashboard (frontend/dist), served by the manager at / and /assets.

Vite names every file under assets/ after a hash of its content, so a name never changes
meaning: those files are cached for a year as immutable, and the page itself (index.html,
which names the current ones) is revalidated at every load (`no-cache`), so a new build is
picked up at once. The build also writes each large asset precompressed beside it (`.br` and
`.gz`, vite.config.ts); a browser that takes one of those encodings gets those bytes as they
are, with no compression work per request. Anything else (API JSON, an asset without a
precompressed copy, the page) is gzipped on the fly by the app's GZipMiddleware.
"""

from __future__ import annotations

import os
import re
import stat
from mimetypes import guess_type
from os import PathLike

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers
from starlette.staticfiles import NotModifiedResponse
from starlette.types import Scope

from backend.settings import ManagerSettings

# Vite's default asset names: `[name]-[hash].[ext]`, the hash 8 characters of base64url.
HASHED_NAME = re.compile(r"-[A-Za-z0-9_-]{8}\.[A-Za-z0-9]+$")
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
# Precompressed copies, the smallest first: (the Content-Encoding, the file's suffix).
PRECOMPRESSED = (("br", ".br"), ("gzip", ".gz"))

# The dashboard's page with Swagger UI, the one /api path that is not the JSON API.
API_DOCS_PAGE = "api/docs"
DOC_REDIRECTS = {
    "/docs": "/api/docs",
    "/redoc": "/api/docs",
    "/openapi.json": "/api/openapi.json",
}


def accepted_encodings(header: str) -> set[str]:
    """The codings an Accept-Encoding header takes (lower case; `q=0` refuses one)."""
    accepted = set()
    for item in header.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        quality = 1.0
        for param in params.split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if coding and quality > 0:
            accepted.add(coding)
    return accepted


def cache_control(name: str) -> str:
    return IMMUTABLE if HASHED_NAME.search(name) else REVALIDATE


class DashboardAssets(StaticFiles):
    """StaticFiles for assets/: the cache policy by name, and a precompressed copy when the
    request takes its encoding (an If-None-Match still answers 304)."""

    def file_response(
        self,
        full_path: PathLike,
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        request_headers = Headers(scope=scope)
        path = os.fspath(full_path)
        media_type = guess_type(path)[0] or "application/octet-stream"
        served, encoding = path, None
        if not path.endswith((".br", ".gz")):
            accepted = accepted_encodings(request_headers.get("accept-encoding", ""))
            for coding, suffix in PRECOMPRESSED:
                if coding not in accepted:
                    continue
                try:
                    found = os.stat(path + suffix)
                except OSError:
                    continue
                if stat.S_ISREG(found.st_mode):
                    served, stat_result, encoding = path + suffix, found, coding
                    break
        response = FileResponse(
            served, status_code=status_code, stat_result=stat_result, media_type=media_type
        )
        if encoding is not None:
            response.headers["content-encoding"] = encoding
        response.headers["vary"] = "Accept-Encoding"
        response.headers["cache-control"] = cache_control(os.path.basename(path))
        if self.is_not_modified(response.headers, request_headers):
            return NotModifiedResponse(response.headers)
        return response


def _redirect_to(target: str):
    async def redirect() -> RedirectResponse:
        return RedirectResponse(target, status_code=307)

    return redirect


def mount_dashboard(app: FastAPI, settings: ManagerSettings) -> None:
    """The dashboard's files, FastAPI's usual doc paths redirected, and every other path that
    is not the API answered with the single-page app."""
    dist = settings.frontend_dist
    index = dist / "index.html"
    if (dist / "assets").is_dir():
        app.mount("/assets", DashboardAssets(directory=dist / "assets"), name="assets")

    # FastAPI's usual doc paths never answer with the dashboard: the docs live at /api/docs
    # (the dashboard's page, signed in like the rest), the schema at /api/openapi.json.
    for old_path, new_path in DOC_REDIRECTS.items():
        app.add_api_route(
            old_path, _redirect_to(new_path), methods=["GET", "HEAD"], include_in_schema=False
        )

    @app.get("/{path:path}", include_in_schema=False)
    async def dashboard(path: str):
        # Unknown API paths stay JSON 404s; everything else (and the API docs page, which the
        # dashboard renders) is the single-page app.
        is_api = path.startswith(("api/", "ws/")) or path in ("api", "ws")
        if is_api and path != API_DOCS_PAGE:
            raise HTTPException(404, f"no such route: /{path}")
        try:  # a name too long for the filesystem is no file, not a 500
            candidate = (dist / path).resolve()
            found = bool(path) and candidate.is_file() and candidate.is_relative_to(dist.resolve())
        except OSError:
            found = False
        # Files beside index.html are not hashed: revalidated like the page.
        headers = {"Cache-Control": REVALIDATE}
        if found:
            return FileResponse(candidate, headers=headers)
        if not index.is_file():
            return PlainTextResponse(
                f"The dashboard is not built ({index} is missing): run `make frontend`.",
                status_code=503,
            )
        return FileResponse(index, headers=headers)
