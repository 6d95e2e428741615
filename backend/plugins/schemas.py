"""The installed plugins as the REST API shows them (GET /api/plugins)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class MetricOut(BaseModel):
    name: str
    title: str
    type: Literal["number", "integer"]
    unit: str
    description: str


class PolicyOut(BaseModel):
    name: str
    title: str
    description: str
    uses_llm: bool = Field(description="asks LLM endpoints")
    vectorised: bool = Field(description="decides for a whole cohort of agents at once (numpy)")
    params_schema: dict[str, Any] | None = Field(
        description="JSON Schema of policy.params for the plugin's own rule-based policies; "
        "null for the runtime's (level_k, synthetic, llm), whose fields sit in policy itself"
    )
    added_by: str | None = Field(
        default=None,
        description="the package that adds this policy to the plugin (populace.policies); "
        "null for the plugin's own and the runtime's",
    )


class PluginOut(BaseModel):
    name: str = Field(description="the entry-point name: what a launch names in plugin.name")
    version: str
    distribution: str = Field(description="the package that installs it")
    title: str
    description: str
    params_schema: dict[str, Any] = Field(description="JSON Schema of plugin.params")
    action: dict[str, Any] = Field(
        description="an agent's action at the default params: kind (number, integer, choice, "
        "boolean) and its range or options"
    )
    metrics: list[MetricOut]
    group_metrics: list[MetricOut] = Field(
        default_factory=list,
        description="figures per group each round (GET /api/simulations/{id}/groups)",
    )
    policies: list[PolicyOut]
    default_policy: str | None


class BrokenPluginOut(BaseModel):
    name: str = Field(
        description="the plugin's name, or plugin:policy for a policy another package adds "
        "(policy:NAME when even its plugin is unknown)"
    )
    error: str = Field(description="why it cannot be loaded")


class PluginPage(BaseModel):
    items: list[PluginOut]
    next_after: str | None = Field(description="the last name of this page, when more follow")
    broken: list[BrokenPluginOut] = Field(
        description="installed plugins that cannot be loaded (first page only)"
    )
