"""Uploaded files (edge lists, node tables) under `<data_dir>/uploads/`, by name.

A name is a plain file name (worker_server.graphs.spec.UPLOAD: letters, digits, `.`, `_`, `-`;
no paths), so it can never leave the directory. Files are written to a temporary file in the
same directory, fsynced and renamed: a reader sees the old file or the new one.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from worker_server.graphs.spec import UPLOAD

NAME = re.compile(UPLOAD)


class BadUploadName(ValueError):
    pass


class UnknownUpload(LookupError):
    def __init__(self, name: str):
        super().__init__(f"no upload named {name!r} (POST /api/uploads to add it)")
        self.name = name


@dataclass(frozen=True)
class UploadInfo:
    name: str
    bytes: int
    modified_at: datetime


def uploads_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "uploads"


def check_name(name: str) -> str:
    if not NAME.fullmatch(name) or name in (".", ".."):
        raise BadUploadName(
            f"{name!r} is not an upload name: 1 to 200 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (no paths)"
        )
    return name


def upload_path(data_dir: Path, name: str) -> Path:
    return uploads_dir(data_dir) / check_name(name)


def incoming(data_dir: Path) -> tuple[int, Path]:
    """A new temporary file in the uploads folder for a body as it streams in (hidden: no
    upload name starts with '.'), as an open descriptor and its path."""
    folder = uploads_dir(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=folder, prefix=".incoming.", suffix=".tmp")
    return fd, Path(name)


def commit(data_dir: Path, name: str, written: Path) -> UploadInfo:
    """Store (or replace) an upload from a file written in the uploads folder: fsynced, then
    renamed over the old one (a reader sees the old file or the new one)."""
    path = upload_path(data_dir, name)
    with open(written, "rb+") as out:
        os.fsync(out.fileno())
    os.replace(written, path)
    return info(path)


def save_upload(data_dir: Path, name: str, data: bytes) -> UploadInfo:
    """Store (or replace) an upload atomically."""
    upload_path(data_dir, name)  # a bad name is refused before anything is written
    fd, tmp = incoming(data_dir)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return commit(data_dir, name, tmp)
    finally:
        tmp.unlink(missing_ok=True)


def info(path: Path) -> UploadInfo:
    stat = path.stat()
    return UploadInfo(path.name, stat.st_size, datetime.fromtimestamp(stat.st_mtime, UTC))


def read_upload(data_dir: Path, name: str) -> bytes:
    path = upload_path(data_dir, name)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UnknownUpload(name) from None


def list_uploads(
    data_dir: Path, after: str | None = None, limit: int = 100
) -> tuple[list[UploadInfo], str | None]:
    """One page of uploads ordered by name (names after `after`), and the next page's after."""
    directory = uploads_dir(data_dir)
    if not directory.is_dir():
        return [], None
    names = sorted(
        entry.name
        for entry in os.scandir(directory)
        if entry.is_file() and NAME.fullmatch(entry.name) and (after is None or entry.name > after)
    )
    page = []
    for name in names[:limit]:
        try:
            page.append(info(directory / name))
        except FileNotFoundError:  # deleted since the listing
            continue
    return page, (names[limit - 1] if len(names) > limit else None)


def delete_upload(data_dir: Path, name: str) -> None:
    path = upload_path(data_dir, name)
    try:
        path.unlink()
    except FileNotFoundError:
        raise UnknownUpload(name) from None
