"""How a real manager process delivers the dashboard and the API's bytes: hashed assets cached for
a year as immutable and sent precompressed (Brotli or gzip, as the browser takes them), the page
revalidated at every load, JSON gzipped, and streams (exports, the event socket) still streaming.
"""

from __future__ import annotations

import gzip
import json
import zlib

import httpx
import pytest

from tests.support import wait_for

IMMUTABLE = "public, max-age=31536000, immutable"
INDEX = "<!doctype html><title>populace</title>" + "<!-- padding -->" * 100
APP_JS = "export const answer = 42;\n" * 4000  # about 100 KB: compressible
BR_BYTES = b"\x1b pretend brotli bytes: served as they are"
PLAIN_CSS = "body { color: black; }\n" * 200  # no precompressed copies


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    root = tmp_path_factory.mktemp("dist")
    (root / "assets").mkdir()
    (root / "index.html").write_text(INDEX)
    (root / "robots.txt").write_text("User-agent: *\n")
    app = root / "assets" / "index-Ab12_-Yz.js"
    app.write_text(APP_JS)
    (root / "assets" / "index-Ab12_-Yz.js.gz").write_bytes(gzip.compress(APP_JS.encode()))
    (root / "assets" / "index-Ab12_-Yz.js.br").write_bytes(BR_BYTES)
    (root / "assets" / "index-Cd34Ef56.css").write_text(PLAIN_CSS)
    (root / "assets" / "unhashed.js").write_text(APP_JS)
    return root


@pytest.fixture(scope="module")
def manager(module_manager_factory, dist):
    """One manager for the module: the tests only read from it, and the one that deploys and
    plays works on its own population."""
    return module_manager_factory(extra_env={"POPULACE_FRONTEND_DIST": str(dist)}).start()


def _raw(manager, path: str, encoding: str | None, **headers) -> tuple[httpx.Response, bytes]:
    """The response and its bytes as sent (not decoded)."""
    sent = {"Accept-Encoding": encoding or "identity", **headers}
    with (
        httpx.Client(base_url=manager.url, timeout=10) as client,
        client.stream("GET", path, headers=sent) as resp,
    ):
        return resp, b"".join(resp.iter_raw())


def test_hashed_assets_are_immutable_and_sent_precompressed(manager):
    path = "/assets/index-Ab12_-Yz.js"
    resp, body = _raw(manager, path, "gzip, deflate, br, zstd")
    assert resp.status_code == 200
    assert resp.headers["content-encoding"] == "br" and body == BR_BYTES
    assert resp.headers["cache-control"] == IMMUTABLE
    assert resp.headers["content-type"].startswith("text/javascript")
    assert resp.headers["content-length"] == str(len(BR_BYTES))
    assert "accept-encoding" in resp.headers["vary"].lower()

    resp, body = _raw(manager, path, "gzip, deflate")
    assert resp.headers["content-encoding"] == "gzip"
    assert gzip.decompress(body).decode() == APP_JS
    assert len(body) < len(APP_JS) // 20
    assert resp.headers["cache-control"] == IMMUTABLE

    # br refused by its quality: gzip; nothing taken: the file as it is.
    resp, _ = _raw(manager, path, "br;q=0, gzip;q=0.5")
    assert resp.headers["content-encoding"] == "gzip"
    resp, body = _raw(manager, path, None)
    assert "content-encoding" not in resp.headers and body.decode() == APP_JS
    assert resp.headers["cache-control"] == IMMUTABLE

    # A revalidation of the copy it has answers 304.
    resp, _ = _raw(manager, path, "br", **{"If-None-Match": resp.headers["etag"]})
    assert resp.status_code != 304  # that etag was the plain file's, not the Brotli copy's
    etag = _raw(manager, path, "br")[0].headers["etag"]
    resp, body = _raw(manager, path, "br", **{"If-None-Match": etag})
    assert resp.status_code == 304 and body == b""


def test_assets_without_a_precompressed_copy_are_gzipped_as_they_go(manager):
    resp, body = _raw(manager, "/assets/index-Cd34Ef56.css", "gzip, br")
    assert resp.status_code == 200
    assert resp.headers["content-encoding"] == "gzip"
    assert gzip.decompress(body).decode() == PLAIN_CSS
    assert resp.headers["cache-control"] == IMMUTABLE
    # A name without a content hash may change meaning: revalidated, never immutable.
    resp, _ = _raw(manager, "/assets/unhashed.js", "gzip")
    assert resp.headers["cache-control"] == "no-cache"


@pytest.mark.parametrize("path", ["/", "/cluster", "/simulations/3", "/api/docs"])
def test_the_page_is_revalidated_and_compressed(manager, path):
    resp, body = _raw(manager, path, "gzip, br")
    assert resp.status_code == 200
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["content-encoding"] == "gzip"
    assert gzip.decompress(body).decode() == INDEX
    resp, body = _raw(manager, "/robots.txt", "gzip")
    assert resp.headers["cache-control"] == "no-cache" and body == b"User-agent: *\n"


def test_api_json_is_gzipped_for_a_client_that_takes_it(manager):
    headers = {"Authorization": f"Bearer {manager.api_token}"}
    resp, body = _raw(manager, "/api/openapi.json", "gzip", **headers)
    assert resp.status_code == 200 and resp.headers["content-encoding"] == "gzip"
    schema = json.loads(gzip.decompress(body))
    assert "/api/populations" in schema["paths"]
    plain, plain_body = _raw(manager, "/api/openapi.json", None, **headers)
    assert "content-encoding" not in plain.headers and json.loads(plain_body) == schema
    print(f"\n/api/openapi.json: {len(plain_body):,} bytes, {len(body):,} gzipped")
    # Small answers are not worth it.
    resp, body = _raw(manager, "/healthz", "gzip")
    assert "content-encoding" not in resp.headers and json.loads(body)


def test_exports_still_stream_gzipped_and_the_event_socket_is_untouched(manager):
    manager.start_workers(procs=1)
    wait_for(lambda: len(manager.workers(state="online")) == 1, 30, what="a worker online")
    with manager.events(topics="cluster") as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "hello"
    size = 20_000
    with manager.api() as api:
        config = {
            "name": "gzip",
            "size": size,
            "seed": 3,
            "distributions": [
                {"name": "education", "categories": [{"name": "primary", "weight": 1}]}
            ],
            "persona": {"mode": "template", "template": "You went to {education} school."},
        }
        resp = api.post("/api/populations", json=config)
        assert resp.status_code == 202, resp.text
        pid = resp.json()["id"]
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deployed",
            120,
            what="the population deployed",
        )
        resp = api.post(
            "/api/simulations",
            json={
                "population_id": pid,
                "rounds": 2,
                "policy": {"kind": "synthetic", "latency_s": 0},
                "seed": "5",
            },
        )
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]
        done = wait_for(
            lambda: (
                (s := api.get(f"/api/simulations/{sid}").json())["status"]
                in ("completed", "failed", "cancelled")
                and s
            ),
            120,
            what="the run finished",
        )
        assert done["status"] == "completed", done

    auth = {"Authorization": f"Bearer {manager.api_token}"}
    path = f"/api/simulations/{sid}/decisions?format=csv"
    plain, plain_body = _raw(manager, path, None, **auth)
    assert plain.status_code == 200 and "content-encoding" not in plain.headers
    with (
        httpx.Client(base_url=manager.url, timeout=60) as client,
        client.stream("GET", path, headers={"Accept-Encoding": "gzip", **auth}) as resp,
    ):
        assert resp.status_code == 200
        assert resp.headers["content-encoding"] == "gzip"
        assert "content-length" not in resp.headers  # streamed, never buffered whole
        chunks = list(resp.iter_raw())
    # Flushed page by page: the stream comes in pieces, each readable as it arrives.
    assert len(chunks) > 1
    reader = zlib.decompressobj(16 + zlib.MAX_WBITS)
    first = reader.decompress(chunks[0])
    assert first.startswith(b"round,agent_id,value")
    decoded = first + b"".join(reader.decompress(c) for c in chunks[1:]) + reader.flush()
    assert decoded == plain_body and decoded.count(b"\n") == 2 * size + 1
    print(
        f"\nCSV export of {2 * size:,} decisions: {len(plain_body):,} bytes,"
        f" {sum(map(len, chunks)):,} gzipped in {len(chunks)} chunks"
    )

    # Parquet is compressed already: sent as it is.
    resp, body = _raw(manager, f"/api/simulations/{sid}/decisions?format=parquet", "gzip", **auth)
    assert resp.status_code == 200 and "content-encoding" not in resp.headers
    assert body[:4] == b"PAR1"
