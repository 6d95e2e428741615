"""The docs name files that exist: every repository path written in backticks, and every
relative link, in docs/*.md, examples/README.md and README.md. Moving or renaming a file the
docs point at fails here, so the pages stay true as the code moves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "examples" / "README.md", ROOT / "README.md"]
# A backticked word is a repository path when it starts with one of the tree's source folders
# (so `/api/workers`, `populace.v1` or `http://llm:8081` are not).
SOURCE_ROOTS = (
    "backend",
    "worker_server",
    "frontend",
    "proto",
    "tests",
    "bench",
    "scripts",
    "alembic",
    "deploy",
    "docs",
    "examples",
    ".ci",
)
# Root files the docs name by themselves.
ROOT_FILES = re.compile(r"^(?:[A-Za-z-]+\.(?:md|yml|toml)|Makefile|Dockerfile)$")
FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Build outputs the docs may name; they exist only after a build.
BUILT = ("frontend/dist",)


def _exists(path: str) -> bool:
    """A path, or a glob (`backend/cli_*.py`) that matches at least one file."""
    if "*" in path:
        return any(ROOT.glob(path))
    return path.startswith(BUILT) or (ROOT / path).exists()


def _text(page: Path) -> str:
    return FENCED.sub("", page.read_text())


def repository_paths(text: str) -> list[str]:
    found = []
    for span in INLINE.findall(text):
        word = span.strip()
        if " " in word:
            continue
        first = word.split("/", 1)[0]
        if ("/" in word and first in SOURCE_ROOTS) or ROOT_FILES.match(word):
            found.append(word)
    return found


def test_the_finder_sees_paths_and_skips_routes_and_urls():
    text = (
        "`backend/app.py`, `worker_server/`, `Makefile`, `docker-compose.yml`, `/api/workers`, "
        "`populace.v1`, `http://llm:8081`, `populace simulate FILE`, `backend`, `tests/nope/*.py`"
    )
    assert repository_paths(text) == [
        "backend/app.py",
        "worker_server/",
        "Makefile",
        "docker-compose.yml",
        "tests/nope/*.py",
    ]
    assert _exists("backend/cli_*.py") and not _exists("tests/nope/*.py")
    assert not _exists("backend/no_such_module.py")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_backticked_path_exists(page: Path):
    paths = repository_paths(_text(page))
    missing = [p for p in dict.fromkeys(paths) if not _exists(p)]
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_exists(page: Path):
    links = [
        link.split("#", 1)[0]
        for link in LINK.findall(page.read_text())
        if "://" not in link and not link.startswith(("#", "mailto:"))
    ]
    missing = [link for link in links if link and not (page.parent / link).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_the_architecture_page_names_many_files():
    # A guard on the finder itself: the page is written around the tree's files.
    assert len(repository_paths(_text(ROOT / "docs" / "architecture.md"))) > 40
