"""backend.client.Client against a real manager and worker: typed answers, every page of a
list, refusals as one ApiError naming the field and the reason, and the token only ever in a
header."""

from __future__ import annotations

import httpx
import pytest

from backend.client import ApiError, Client, MissingToken
from backend.populations.schemas import PopulationDetail, PopulationOut
from tests.support import wait_for
from tests.support_populations import population_yaml


class RecordingTransport(httpx.HTTPTransport):
    """A real HTTP transport that keeps every request it sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return super().handle_request(request)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from tests.support import Manager, stop_process

    tmp = tmp_path_factory.mktemp("client")
    manager = Manager(tmp=tmp, database_url=f"sqlite+aiosqlite:///{tmp}/populace.db").start()
    node = manager.start_workers(procs=1)
    try:
        wait_for(lambda: manager.workers(state="online"), 30, what="a worker online")
        yield manager
    finally:
        stop_process(node)
        manager.stop()


@pytest.fixture
def transport():
    return RecordingTransport()


@pytest.fixture
def api(cluster, transport):
    with Client(cluster.url, token=cluster.api_token, transport=transport) as client:
        yield client


def test_deploy_and_list_every_page(api, cluster, transport):
    created = [
        api.create_population(population_yaml("client", name=f"client-{i}")) for i in range(3)
    ]
    assert all(isinstance(p, PopulationOut) and p.status == "deploying" for p in created)
    ids = [p.id for p in created]
    wait_for(
        lambda: all(api.population_status(pid).status == "deployed" for pid in ids),
        60,
        what="three populations deployed",
    )
    before = len(transport.sent)
    listed = [p for p in api.populations(page_size=2) if p.id in ids]
    assert [p.id for p in listed] == ids
    pages = [r for r in transport.sent[before:] if r.url.path == "/api/populations"]
    assert len(pages) >= 2, "a page size of 2 takes more than one request for 3 populations"
    assert "after" not in pages[0].url.params and "after" in pages[1].url.params

    detail = api.population(ids[0])
    assert isinstance(detail, PopulationDetail)
    assert detail.size == 12 and sum(detail.counts["education"].values()) == 12
    assert sum(detail.agents_per_worker.values()) == 12
    agents = api.agents_page(population_id=ids[0], limit=5)
    assert len(agents.items) == 5 and agents.next_after is not None
    assert api.agent(agents.items[0].id).population_id == ids[0]
    assert [w.state for w in api.workers()] == ["online"]
    assert api.info().role == "operator"


def test_a_missing_resource_is_an_api_error_with_status_and_detail(api):
    with pytest.raises(ApiError) as caught:
        api.population(987654)
    error = caught.value
    assert error.status == 404
    assert "987654" in error.reason and error.field is None
    assert str(error).startswith("GET /api/populations/987654 -> 404: ")


def test_an_invalid_body_names_the_field_and_the_reason(api):
    with pytest.raises(ApiError) as caught:
        api.create_population(population_yaml("client", name="bad", size=-1))
    error = caught.value
    assert error.status == 422
    assert error.field == "size"
    assert "greater than" in error.reason
    assert error.issues[0]["loc"][0] == "body"


def test_an_invalid_query_names_the_parameter(api):
    with pytest.raises(ApiError) as caught:
        api.populations_page(limit=0)
    assert (caught.value.status, caught.value.field) == (422, "limit")


def test_the_token_is_only_ever_in_the_authorization_header(api, cluster, transport):
    api.info()
    list(api.populations())
    with pytest.raises(ApiError):
        api.simulation(424242)
    assert transport.sent
    for request in transport.sent:
        assert cluster.api_token not in str(request.url)
        assert request.headers["authorization"] == f"Bearer {cluster.api_token}"
    assert cluster.api_token not in repr(api)


def test_the_event_socket_authenticates_without_the_token_in_its_url(api, cluster):
    with api.events(topics="cluster") as ws:
        hello = ws.recv(timeout=10)
        assert '"hello"' in hello
        assert cluster.api_token not in ws.request.path


def test_a_wrong_token_is_a_401(cluster):
    with Client(cluster.url, token="wrong") as client, pytest.raises(ApiError) as caught:
        client.info()
    assert caught.value.status == 401
    assert "token" in caught.value.reason


def test_no_token_anywhere_says_how_to_give_one(monkeypatch, tmp_path):
    monkeypatch.delenv("POPULACE_API_TOKEN", raising=False)
    monkeypatch.setenv("POPULACE_DATA_DIR", str(tmp_path))
    with pytest.raises(MissingToken, match="POPULACE_API_TOKEN"):
        Client("http://127.0.0.1:9")
    (tmp_path / "api_token").write_text("from-the-data-dir\n")
    with Client("http://127.0.0.1:9") as client:
        assert client._http.headers["authorization"] == "Bearer from-the-data-dir"
