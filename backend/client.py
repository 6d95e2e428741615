"""A typed Python client of the manager's REST API, for scripts, notebooks and the CLI.

    from backend.client import ApiError, Client

    with Client("http://127.0.0.1:8000", token="...") as api:
        for population in api.populations():
            print(population.id, population.status, population.hosted)

Answers come back as the manager's own pydantic models (backend.*.schemas), lists as
iterators that follow `next_after` page by page. Every refusal (4xx, 5xx) is an `ApiError`
with the status and the manager's `detail`; a 422 also says which field and why. A manager
that cannot be reached raises httpx's transport errors as they are. The token travels only in
the Authorization header (and in the event socket's subprotocols), never in a URL.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import httpx
from pydantic import BaseModel

from backend.client_tls import manager_ssl_context
from backend.plugins.schemas import PluginOut, PluginPage
from backend.populations.schemas import (
    AgentOut,
    AgentPage,
    PopulationDetail,
    PopulationOut,
    PopulationPage,
)
from backend.simulations.schemas import (
    GroupOut,
    GroupPage,
    GroupSeries,
    RoundOut,
    RoundPage,
    SimulationDetail,
    SimulationOut,
    SimulationPage,
    TimelineEntryOut,
    TimelinePage,
)
from backend.sweeps.schemas import SweepDetail, SweepOut, SweepPage
from backend.workers.schemas import WorkerOut, WorkerPage

if TYPE_CHECKING:  # their modules bring FastAPI's routes: imported when first asked for
    from backend.api.cluster import CleanWorkerOut
    from backend.api.info import InfoOut

DEFAULT_MANAGER = "http://127.0.0.1:8000"
# The largest page the list routes serve.
MAX_PAGE = 1000
ExportFormat = Literal["csv", "jsonl", "parquet"]
Model = TypeVar("Model", bound=BaseModel)
Item = TypeVar("Item")


class ApiError(Exception):
    """The manager refused a request: its HTTP status and `detail` (a message, or for a 422
    the list of {loc, msg, type} issues)."""

    def __init__(self, method: str, path: str, status: int, detail: Any) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.detail = detail
        super().__init__(f"{method} {path} -> {status}: {self.message}")

    @property
    def issues(self) -> list[dict]:
        """A 422's validation issues ([] for any other refusal)."""
        return [i for i in self.detail if isinstance(i, dict)] if self.is_validation else []

    @property
    def is_validation(self) -> bool:
        return isinstance(self.detail, list)

    @property
    def field(self) -> str | None:
        """The first invalid field, dotted, without its "body"/"query"/"path" part."""
        if not self.issues:
            return None
        return ".".join(str(p) for p in self.issues[0].get("loc", [])[1:]) or None

    @property
    def reason(self) -> str:
        """Why: the first issue's message for a 422, else the detail."""
        if self.issues:
            return str(self.issues[0].get("msg", ""))
        return str(self.detail)

    @property
    def message(self) -> str:
        """The detail on one line: `field: message; ...` for a 422."""
        if self.is_validation:
            return "; ".join(
                f"{'.'.join(str(p) for p in i.get('loc', [])[1:])}: {i.get('msg', '')}"
                for i in self.issues
            )
        return str(self.detail)


class MissingToken(ValueError):
    """No API token was given and none is stored in the data directory."""


def stored_token(data_dir: Path | str | None = None) -> str:
    """The API token the manager wrote to POPULACE_DATA_DIR/api_token (see backend.tokens)."""
    directory = Path(data_dir or os.environ.get("POPULACE_DATA_DIR", ".populace"))
    path = directory / "api_token"
    if not path.is_file():
        raise MissingToken(
            f"no API token: pass --token or set POPULACE_API_TOKEN ({path} does not exist)"
        )
    return path.read_text().strip()


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        detail = response.json()["detail"]
    except (ValueError, KeyError, TypeError):
        detail = response.text
    request = response.request
    raise ApiError(request.method, request.url.path, response.status_code, detail)


def _query(**params: Any) -> dict[str, Any]:
    """Query parameters without the unset ones."""
    return {k: v for k, v in params.items() if v is not None}


class Client:
    """The manager's REST API over one HTTP connection pool (sync, httpx)."""

    def __init__(
        self,
        base_url: str = DEFAULT_MANAGER,
        token: str | None = None,
        *,
        verify: ssl.SSLContext | bool | None = None,
        timeout: float | None = 60,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`token` defaults to POPULACE_API_TOKEN, then POPULACE_DATA_DIR/api_token; `verify`
        to the CA in POPULACE_TLS_CA (the system's roots when unset)."""
        self.base_url = base_url.rstrip("/")
        self._token = token or os.environ.get("POPULACE_API_TOKEN") or stored_token()
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {self._token}"},
            timeout=timeout,
            verify=manager_ssl_context() if verify is None else verify,
            transport=transport,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:  # never the token
        return f"Client({self.base_url!r})"

    # The plumbing: one request, its refusal as ApiError, its answer as a model.

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of one request (None for 204); a refusal raises ApiError."""
        response = self._http.request(method, path, **kwargs)
        _raise_for(response)
        return response.json() if response.content else None

    def _model(self, model: type[Model], method: str, path: str, **kwargs: Any) -> Model:
        return model.model_validate(self.request(method, path, **kwargs))

    @contextmanager
    def _stream(self, method: str, path: str, **kwargs: Any) -> Iterator[httpx.Response]:
        with self._http.stream(method, path, **kwargs) as response:
            if response.status_code >= 400:
                response.read()
                _raise_for(response)
            yield response

    @staticmethod
    def _all(fetch: Callable[[Any], Any], items: Callable[[Any], list[Item]]) -> Iterator[Item]:
        """Every item of a paginated list, one page (one request) at a time."""
        after = None
        while True:
            page = fetch(after)
            yield from items(page)
            after = page.next_after
            if after is None:
                return

    def events(self, open_timeout: float = 10, **params: Any):
        """The live event socket (`topics=`, `since=`, `epoch=`); the token goes in its
        subprotocols, not its URL."""
        from backend.events.socket_auth import connect_events

        return connect_events(self.base_url, self._token, open_timeout, **params)

    def info(self) -> InfoOut:
        from backend.api.info import InfoOut

        return self._model(InfoOut, "GET", "/api/info")

    # Workers.

    def workers_page(
        self, after: int | None = None, limit: int = MAX_PAGE, **filters: Any
    ) -> WorkerPage:
        params = _query(after=after, limit=limit, **filters)
        return self._model(WorkerPage, "GET", "/api/workers", params=params)

    def workers(self, page_size: int = MAX_PAGE, **filters: Any) -> Iterator[WorkerOut]:
        """Every worker (`state=` filters), all pages."""
        return self._all(lambda a: self.workers_page(a, page_size, **filters), lambda p: p.items)

    def worker(self, worker_id: int) -> WorkerOut:
        return self._model(WorkerOut, "GET", f"/api/workers/{worker_id}")

    def drain_worker(self, worker_id: int) -> WorkerOut:
        return self._model(WorkerOut, "POST", f"/api/workers/{worker_id}/drain")

    def undrain_worker(self, worker_id: int) -> WorkerOut:
        return self._model(WorkerOut, "POST", f"/api/workers/{worker_id}/undrain")

    def remove_worker(self, worker_id: int) -> None:
        self.request("DELETE", f"/api/workers/{worker_id}")

    def clean_worker(self, worker_id: int) -> CleanWorkerOut:
        """Move a worker's agents to other workers (DELETE /api/workers/{id}/agents)."""
        from backend.api.cluster import CleanWorkerOut

        return self._model(CleanWorkerOut, "DELETE", f"/api/workers/{worker_id}/agents")

    # Populations and agents.

    def create_population(self, document: str | bytes) -> PopulationOut:
        """Deploy a population from its config, YAML or JSON text (202: deploying)."""
        headers = {"Content-Type": "application/yaml"}
        return self._model(
            PopulationOut, "POST", "/api/populations", content=document, headers=headers
        )

    def populations_page(
        self, after: int | None = None, limit: int = 500, include_deleted: bool = False
    ) -> PopulationPage:
        params = _query(after=after, limit=limit, include_deleted=include_deleted)
        return self._model(PopulationPage, "GET", "/api/populations", params=params)

    def populations(
        self, include_deleted: bool = False, page_size: int = 500
    ) -> Iterator[PopulationOut]:
        return self._all(
            lambda a: self.populations_page(a, page_size, include_deleted), lambda p: p.items
        )

    def population(self, population_id: int) -> PopulationDetail:
        """The population with its config and agents per worker (counts its agents)."""
        return self._model(PopulationDetail, "GET", f"/api/populations/{population_id}")

    def population_status(self, population_id: int) -> PopulationOut | None:
        """Its list entry, deleted or not: cheap, unlike `population` (None: no such one)."""
        page = self.populations_page(after=population_id - 1, limit=1, include_deleted=True)
        return next((p for p in page.items if p.id == population_id), None)

    def repair_population(self, population_id: int) -> PopulationOut:
        return self._model(PopulationOut, "POST", f"/api/populations/{population_id}/repair")

    def delete_population(self, population_id: int) -> PopulationOut:
        """Start deleting (202): its agents leave the workers, its rows the store."""
        return self._model(PopulationOut, "DELETE", f"/api/populations/{population_id}")

    def agents_page(
        self,
        population_id: int | None = None,
        worker_id: int | None = None,
        attribute: str | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> AgentPage:
        params = _query(
            population_id=population_id,
            worker_id=worker_id,
            attribute=attribute,
            after=after,
            limit=limit,
        )
        return self._model(AgentPage, "GET", "/api/agents", params=params)

    def agent(self, agent_id: int) -> AgentOut:
        return self._model(AgentOut, "GET", f"/api/agents/{agent_id}")

    @contextmanager
    def interview(
        self, agent_id: int, simulation_id: int, question: str, timeout: float = 300
    ) -> Iterator[Iterator[str]]:
        """The agent's answer as NDJSON lines ({"type": "delta"|"done"|"error", ...}), as
        they stream in."""
        body = {"simulation_id": simulation_id, "question": question}
        path = f"/api/agents/{agent_id}/interviews"
        with self._stream("POST", path, json=body, timeout=timeout) as response:
            yield response.iter_lines()

    # Simulations.

    def create_simulation(self, document: str | bytes) -> SimulationOut:
        """Launch a simulation from its config, YAML or JSON text (202: pending)."""
        headers = {"Content-Type": "application/yaml"}
        return self._model(
            SimulationOut, "POST", "/api/simulations", content=document, headers=headers
        )

    def simulations_page(
        self, after: int | None = None, limit: int = 500, population_id: int | None = None
    ) -> SimulationPage:
        params = _query(after=after, limit=limit, population_id=population_id)
        return self._model(SimulationPage, "GET", "/api/simulations", params=params)

    def simulations(
        self, population_id: int | None = None, page_size: int = 500
    ) -> Iterator[SimulationOut]:
        return self._all(
            lambda a: self.simulations_page(a, page_size, population_id), lambda p: p.items
        )

    def simulation(self, simulation_id: int) -> SimulationDetail:
        return self._model(SimulationDetail, "GET", f"/api/simulations/{simulation_id}")

    def rounds_page(
        self, simulation_id: int, after: int | None = None, limit: int = MAX_PAGE
    ) -> RoundPage:
        params = _query(after=after, limit=limit)
        path = f"/api/simulations/{simulation_id}/rounds"
        return self._model(RoundPage, "GET", path, params=params)

    def rounds(self, simulation_id: int) -> Iterator[RoundOut]:
        """Every kept round's statistics, in order."""
        return self._all(lambda a: self.rounds_page(simulation_id, a), lambda p: p.items)

    def timeline_page(
        self, simulation_id: int, after: int | None = None, limit: int = 200
    ) -> TimelinePage:
        params = _query(after=after, limit=limit)
        path = f"/api/simulations/{simulation_id}/timeline"
        return self._model(TimelinePage, "GET", path, params=params)

    def timeline(self, simulation_id: int) -> Iterator[TimelineEntryOut]:
        """What happened to the run, oldest first (launched, rounds, faults, the end)."""
        return self._all(lambda a: self.timeline_page(simulation_id, a), lambda p: p.items)

    def pause_simulation(self, simulation_id: int) -> SimulationOut:
        return self._model(SimulationOut, "POST", f"/api/simulations/{simulation_id}/pause")

    def resume_simulation(
        self, simulation_id: int, allow_partial: bool | None = None
    ) -> SimulationOut:
        body = None if allow_partial is None else {"allow_partial": allow_partial}
        path = f"/api/simulations/{simulation_id}/resume"
        return self._model(SimulationOut, "POST", path, json=body)

    def cancel_simulation(self, simulation_id: int, reason: str | None = None) -> SimulationOut:
        body = None if reason is None else {"reason": reason}
        path = f"/api/simulations/{simulation_id}/cancel"
        return self._model(SimulationOut, "POST", path, json=body)

    def delete_simulation(self, simulation_id: int) -> None:
        self.request("DELETE", f"/api/simulations/{simulation_id}")

    def record(self, simulation_id: int) -> dict[str, Any]:
        """The run's reproducibility record (what a Parquet export carries)."""
        return self.request("GET", f"/api/simulations/{simulation_id}/record")

    @contextmanager
    def export_decisions(
        self,
        simulation_id: int,
        format: ExportFormat = "csv",
        round: int | None = None,
        attributes: bool = False,
        persona: bool = False,
    ) -> Iterator[Iterator[bytes]]:
        """Every decision of a run (a round's with `round`), as the bytes stream in: memory
        stays bounded however large the run."""
        params = _query(
            format=format,
            round=round,
            attributes="true" if attributes else None,
            persona="true" if persona else None,
        )
        path = f"/api/simulations/{simulation_id}/decisions"
        with self._stream("GET", path, params=params, timeout=None) as response:
            yield response.iter_bytes()

    def groups_page(
        self,
        simulation_id: int,
        round: int | None = None,
        after: int | None = None,
        limit: int = MAX_PAGE,
    ) -> GroupPage:
        params = _query(round=round, after=after, limit=limit)
        path = f"/api/simulations/{simulation_id}/groups"
        return self._model(GroupPage, "GET", path, params=params)

    def groups(self, simulation_id: int, round: int | None = None) -> Iterator[GroupOut]:
        """Every group's metrics in a round (the last kept one by default), in group order."""
        return self._all(lambda a: self.groups_page(simulation_id, round, a), lambda p: p.items)

    def group_series(
        self, simulation_id: int, group: int, after: int | None = None, limit: int = MAX_PAGE
    ) -> GroupSeries:
        params = _query(after=after, limit=limit)
        path = f"/api/simulations/{simulation_id}/groups/{group}"
        return self._model(GroupSeries, "GET", path, params=params)

    @contextmanager
    def export_groups(
        self, simulation_id: int, format: Literal["csv", "jsonl"] = "csv", round: int | None = None
    ) -> Iterator[Iterator[bytes]]:
        """Every group's metrics in every kept round (a round's with `round`), streamed."""
        params = _query(format=format, round=round)
        path = f"/api/simulations/{simulation_id}/groups/export"
        with self._stream("GET", path, params=params, timeout=None) as response:
            yield response.iter_bytes()

    # Sweeps.

    def create_sweep(self, document: str | bytes) -> SweepOut:
        headers = {"Content-Type": "application/yaml"}
        return self._model(SweepOut, "POST", "/api/sweeps", content=document, headers=headers)

    # Simulation plugins.

    def plugins_page(self, after: str | None = None, limit: int = MAX_PAGE) -> PluginPage:
        return self._model(
            PluginPage, "GET", "/api/plugins", params=_query(after=after, limit=limit)
        )

    def plugin(self, name: str) -> PluginOut:
        return self._model(PluginOut, "GET", f"/api/plugins/{name}")

    def sweeps_page(self, after: int | None = None, limit: int = 500) -> SweepPage:
        params = _query(after=after, limit=limit)
        return self._model(SweepPage, "GET", "/api/sweeps", params=params)

    def sweeps(self, page_size: int = 500) -> Iterator[SweepOut]:
        return self._all(lambda a: self.sweeps_page(a, page_size), lambda p: p.items)

    def sweep(self, sweep_id: int, after: int | None = None, limit: int = 500) -> SweepDetail:
        """The sweep with one page of its results table (`results.next_after` for more)."""
        params = _query(after=after, limit=limit)
        return self._model(SweepDetail, "GET", f"/api/sweeps/{sweep_id}", params=params)

    def cancel_sweep(self, sweep_id: int) -> SweepOut:
        return self._model(SweepOut, "POST", f"/api/sweeps/{sweep_id}/cancel")

    def delete_sweep(self, sweep_id: int) -> None:
        self.request("DELETE", f"/api/sweeps/{sweep_id}")
