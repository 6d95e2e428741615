"""`populace bench decisions-layout` at a toy size on Postgres: every layout is written both ways
and measured (a smoke test, not a timed one: the figures belong in BENCHMARKS.md)."""

from __future__ import annotations

import pytest

from bench import decisions_layout
from tests.conftest import PG_ADMIN_URL

pytestmark = pytest.mark.postgres


def test_every_layout_is_written_and_sized(postgres_server_url) -> None:
    result = decisions_layout.run(rows=5000, admin_url=PG_ADMIN_URL)
    assert result["benchmark"] == "decisions-layout" and result["rows"] == 5000
    layouts = result["layouts"]
    assert set(layouts) == {"product", "no_key", "narrow", "narrow_no_key"}
    for figures in layouts.values():
        assert figures["copy_s"] > 0 and figures["insert_select_s"] > 0
        assert figures["size_mb"] > 0
    assert layouts["product"]["copy_vs_product"] == 1.0
    # Without its primary key a table holds the heap alone: less on disk.
    assert layouts["no_key"]["size_mb"] < layouts["product"]["size_mb"]
