"""Every JSON route of the manager has its request and response bodies in the OpenAPI schema,
so the docs at /api/docs, the generated frontend types and the Python client see them all."""

from __future__ import annotations

import inspect

import pytest
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, SecretStr

from backend.app import ROUTERS, create_app
from backend.settings import ManagerSettings

# Media types a streamed or file answer may declare instead of a JSON schema (exports, NDJSON).
STREAMED_MEDIA = ("text/", "application/x-ndjson", "application/vnd.", "application/octet-stream")
# What a route's code calls when it reads its body itself (config documents, YAML or JSON):
# such a route must declare the body with openapi.config_body.
RAW_BODY_READS = ("read_config(", "request.body()", "request.json()", "request.stream()")
# JSON answers that are free-form by design: the run's reproducibility record (a Parquet
# export's `populace.record`, whose shape follows the stored settings).
FREE_FORM = {("GET", "/api/simulations/{simulation_id}/record")}


@pytest.fixture(scope="module")
def app():
    return create_app(ManagerSettings(api_token=SecretStr("x"), join_token=SecretStr("y")))


def _api_routes(app) -> list[APIRoute]:
    """Every documented route of every router the app includes (the app's list is private)."""
    return [
        route
        for router in ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute) and route.include_in_schema
    ]


def _operations(app):
    schema = app.openapi()
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            yield method.upper(), path, op


def _streams(route: APIRoute) -> bool:
    # FastAPI keeps an unset response_class as a placeholder around the default (JSON).
    response_class = getattr(route.response_class, "value", route.response_class)
    return not issubclass(response_class, JSONResponse) and route.response_model is None


def _bare_object(schema: dict) -> bool:
    """`-> dict`: an object with no properties named, which documents nothing."""
    return schema.get("type") == "object" and "properties" not in schema


def test_the_walk_sees_the_routes(app):
    paths = {route.path for route in _api_routes(app)}
    assert {"/api/populations", "/api/simulations/{simulation_id}/decisions"} <= paths
    assert len(paths) >= 20


def test_every_json_route_declares_a_response_model(app):
    missing = [
        f"{sorted(route.methods)} {route.path}"
        for route in _api_routes(app)
        if route.response_model is None and not _streams(route) and route.status_code != 204
    ]
    assert not missing, f"routes without response_model= or a return annotation: {missing}"


def test_every_success_response_has_a_schema(app):
    problems = []
    for method, path, op in _operations(app):
        for code, response in op["responses"].items():
            if not code.startswith("2") or code == "204":
                continue
            content = response.get("content")
            if not content:
                problems.append(f"{method} {path} {code}: no content declared")
                continue
            for media, body in content.items():
                if not body.get("schema"):
                    problems.append(f"{method} {path} {code} {media}: no schema")
                elif media == "application/json" and body["schema"] == {}:
                    problems.append(f"{method} {path} {code}: an empty JSON schema")
                elif media == "application/json" and _bare_object(body["schema"]):
                    if (method, path) not in FREE_FORM:
                        problems.append(f"{method} {path} {code}: a dict, not a model")
                elif media != "application/json" and not media.startswith(STREAMED_MEDIA):
                    problems.append(f"{method} {path} {code}: unexpected media type {media}")
    assert not problems, problems


def test_streamed_routes_declare_their_media_types(app):
    streamed = [route for route in _api_routes(app) if _streams(route)]
    # The decisions export and the interview's NDJSON at least.
    assert len(streamed) >= 2
    ops = {(m, p): op for m, p, op in _operations(app)}
    for route in streamed:
        for method in route.methods - {"HEAD"}:
            content = ops[(method, route.path)]["responses"]["200"].get("content", {})
            assert content, f"{method} {route.path} streams without declaring its media types"
            assert "application/json" not in content, f"{method} {route.path} is not JSON"
            assert all(m.startswith(STREAMED_MEDIA) for m in content), content


def test_every_body_is_a_model(app):
    problems = []
    for route in _api_routes(app):
        field = route.body_field
        if field is not None:
            annotation = field.field_info.annotation
            models = [a for a in (annotation, *getattr(annotation, "__args__", ())) if a]
            if not any(inspect.isclass(a) and issubclass(a, BaseModel) for a in models):
                problems.append(f"{route.path}: body is {annotation!r}, not a model")
    assert not problems, problems


def test_bodies_read_by_hand_are_declared(app):
    ops = {(m, p): op for m, p, op in _operations(app)}
    missing = []
    for route in _api_routes(app):
        source = inspect.getsource(route.endpoint)
        if any(read in source for read in RAW_BODY_READS):
            for method in route.methods:
                body = ops[(method, route.path)].get("requestBody", {})
                schema = body.get("content", {}).get("application/json", {}).get("schema")
                if not schema:
                    missing.append(f"{method} {route.path}")
    assert not missing, f"bodies read from the raw request but not in the schema: {missing}"
    # The config documents are among them and refer to their models.
    body = ops[("POST", "/api/populations")]["requestBody"]["content"]["application/json"]
    assert body["schema"]["$ref"].endswith("/PopulationConfig")
