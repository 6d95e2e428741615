"""`populace plugins list` and `populace plugins show NAME`: the simulation plugins the manager
has installed, and what each declares (params, action, metrics, policies)."""

from __future__ import annotations

import json
import re
from typing import Annotated

import typer

from backend.cli_population import ManagerOpt, TokenOpt, _fail, plain
from backend.cli_sweep import _session
from populace.plugin import NAME

app = typer.Typer(help="Simulation plugins installed on the manager.", no_args_is_help=True)


@app.command("list")
def list_plugins(manager: ManagerOpt = "http://127.0.0.1:8000", token: TokenOpt = None) -> None:
    """One line per plugin: name, version, title, action and default policy."""
    with _session(manager, token) as client:
        page = plain(client.plugins_page())
        items, after = page["items"], page["next_after"]
        while after is not None:
            more = plain(client.plugins_page(after=after))
            items, after = items + more["items"], more["next_after"]
    for plugin in items:
        action = plugin["action"]["kind"]
        typer.echo(
            f"{plugin['name']:<16} {plugin['version']:<10} {action:<8} "
            f"default policy {plugin['default_policy'] or '-':<10} {plugin['title']}"
        )
    for broken in page["broken"]:
        typer.secho(f"{broken['name']:<16} cannot be loaded: {broken['error']}", fg="yellow")


@app.command("show")
def show_plugin(
    name: Annotated[str, typer.Argument(help="the plugin's name (populace plugins list)")],
    manager: ManagerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="the whole declaration as JSON")] = False,
) -> None:
    """A plugin's declaration: its params with their defaults, action, metrics and policies."""
    if not re.fullmatch(NAME, name):
        _fail(f"plugin name {name!r}: lower case letters, digits and _, from a letter")
    with _session(manager, token) as client:
        plugin = plain(client.plugin(name))
    if as_json:
        typer.echo(json.dumps(plugin, indent=2))
        return
    typer.echo(
        f"{plugin['name']} {plugin['version']} ({plugin['distribution']}): {plugin['title']}"
    )
    if plugin["description"]:
        typer.echo(plugin["description"])
    typer.echo(f"action: {json.dumps(plugin['action'])}")
    typer.echo("params (JSON Schema: populace plugins show --json):")
    for key, spec in plugin["params_schema"].get("properties", {}).items():
        default = json.dumps(spec.get("default")) if "default" in spec else "required"
        typer.echo(f"  {key:<16} {spec.get('title', '')} (default {default})")
    typer.echo("metrics:")
    for metric in plugin["metrics"]:
        unit = f" [{metric['unit']}]" if metric["unit"] else ""
        typer.echo(f"  {metric['name']:<16} {metric['title']}{unit} ({metric['type']})")
    typer.echo("policies:")
    for policy in plugin["policies"]:
        default = " (default)" if policy["name"] == plugin["default_policy"] else ""
        llm = " [LLM]" if policy["uses_llm"] else ""
        added = f" (added by {policy['added_by']})" if policy.get("added_by") else ""
        typer.echo(f"  {policy['name']:<16} {policy['title']}{llm}{default}{added}")
