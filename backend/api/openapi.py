"""The OpenAPI document served at GET /api/openapi.json.

The two config bodies (POST /api/populations and /api/simulations) are read from the raw
request, to accept YAML as well as JSON, so FastAPI cannot see their models. Those routes
declare them with `config_body(Model)`, and the models' schemas are added to the components
here, so schema-driven tools (schemathesis in CI) generate and check them like any other body.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import (
    validation_error_definition,
    validation_error_response_definition,
)
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

COMPONENTS = "#/components/schemas/"
# The models routes declared with config_body, by name.
_BODY_MODELS: dict[str, type[BaseModel]] = {}


def config_body(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` for a route that reads `model` from a JSON or YAML body."""
    _BODY_MODELS[model.__name__] = model
    schema = {"$ref": f"{COMPONENTS}{model.__name__}"}
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": schema},
                "application/yaml": {"schema": schema},
            },
        },
        # backend.api.bodies.read_config: any other media type (text/plain, a form) is refused.
        "responses": {
            "415": {
                "description": "The body is not JSON or YAML (Content-Type)",
                "content": {"application/json": {"schema": {"$ref": f"{COMPONENTS}ErrorOut"}}},
            }
        },
    }


def install_openapi(app: FastAPI) -> None:
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()  # FastAPI's, cached on the app: completed in place
            _add_components(schema, tuple(_BODY_MODELS.values()))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _shape(definition: dict[str, Any]) -> tuple:
    """What tells two models apart: their title, fields and required fields."""
    return (
        definition.get("title"),
        sorted(definition.get("properties", {})),
        sorted(definition.get("required", [])),
        definition.get("enum"),
    )


def _add_components(schema: dict[str, Any], models: tuple[type[BaseModel], ...]) -> None:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    _, top = models_json_schema(
        [(model, "validation") for model in models], ref_template=COMPONENTS + "{model}"
    )
    for name, definition in top.get("$defs", {}).items():
        existing = components.setdefault(name, definition)
        if existing != definition and _shape(existing) != _shape(definition):
            raise RuntimeError(f"two different schemas are named {name!r} in the OpenAPI")
        # A model FastAPI also met in a typed body (e.g. EndpointConfig in POST /api/llm/test)
        # comes out the same but for details (100000 written 100000.0, defaults): one copy.
        components[name] = definition
    # Every error response refers to these (a route may have no parameter FastAPI adds them for).
    components.setdefault("ValidationError", validation_error_definition)
    components.setdefault("HTTPValidationError", validation_error_response_definition)


def current_schema() -> dict[str, Any]:
    """The manager's OpenAPI document, built without a database or a server (for the type
    generator and tests). The placeholder tokens only satisfy create_app; nothing listens."""
    from pydantic import SecretStr

    from backend.app import create_app
    from backend.settings import ManagerSettings

    class Defaults(ManagerSettings):
        """The defaults only: no POPULACE_* variable of this shell changes the document."""

        @classmethod
        def settings_customise_sources(cls, settings_cls, init_settings, **_sources):
            return (init_settings,)

    placeholder = SecretStr("schema-only")
    app = create_app(Defaults(api_token=placeholder, join_token=placeholder))
    return app.openapi()
