"""The report in --out: results.json (every number), report.md and index.html (the same
tables, the figures, and how each reference was computed)."""

from __future__ import annotations

import html
import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.validate.result import REPORTED, VERDICTS, CheckResult
from worker_server.version import populace_version

REPOSITORY = Path(__file__).resolve().parents[2]


def machine() -> dict[str, Any]:
    import psutil

    return {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
    }


def commit() -> str | None:
    try:
        answer = subprocess.run(
            ["git", "-C", str(REPOSITORY), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except OSError:
        return None
    return answer.stdout.strip() or None


def summary(results: list[CheckResult]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for result in results:
        counts[result.verdict] += 1
    return counts


def document(
    results: list[CheckResult],
    *,
    command: str,
    mode: str,
    cluster: str,
    started: datetime,
    wall_s: float,
    code: int,
    commit: str | None,
) -> dict[str, Any]:
    return {
        "command": command,
        "mode": mode,
        "cluster": cluster,
        "populace_version": populace_version(),
        "commit": commit,
        "machine": machine(),
        "started": started.astimezone(UTC).isoformat(timespec="seconds"),
        "wall_s": round(wall_s, 2),
        "exit_code": code,
        "summary": summary(results),
        "checks": [r.as_json() for r in results],
    }


def write(out: Path, doc: dict[str, Any]) -> None:
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "report.md").write_text(markdown(doc))
    (out / "index.html").write_text(page(doc))


def counts_text(counts: dict[str, int]) -> str:
    text = f"{counts['pass']} passed, {counts['fail']} failed, {counts['not run']} not run"
    if counts.get("reported"):
        text += f", {counts['reported']} LLM games reported"
    return text


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _header(doc: dict[str, Any]) -> list[str]:
    m = doc["machine"]
    counts = doc["summary"]
    return [
        f"Command: `{doc['command']}` ({doc['mode']} suite, {doc['cluster']})",
        f"populace {doc['populace_version']}, commit {doc['commit'] or 'unknown'}; "
        f"{m['cpus']} CPUs, {m['memory_gib']} GiB, {m['platform']}, Python {m['python']}",
        f"Started {doc['started']}, {doc['wall_s']:.0f} s; {counts_text(counts)} "
        f"(exit code {doc['exit_code']}).",
    ]


def llm_rows(doc: dict[str, Any]) -> list[list[str]]:
    """The LLM games' table: what the model did beside the published rows, and whether each
    run was whole (participation above the floor in every round)."""
    rows = []
    for c in doc["checks"]:
        if c["verdict"] != REPORTED:
            continue
        d = c["details"]
        played = [v for v in d.get("by_round", []) if v is not None]
        shares = [p for p in d.get("participation", []) if p is not None]
        published = "; ".join(
            f"{model} {_number(row[0])} → {_number(row[-1])}"
            for model, row in d.get("reference", {}).items()
            if row
        )
        rows.append(
            [
                c["title"],
                f"{_number(played[0])} → {_number(played[-1])}" if played else "–",
                _number(c["measured"]),
                published or "–",
                f"{min(shares):.0%}" if shares else "–",
                "yes"
                if not d.get("rounds_below_floor")
                else f"no ({d['rounds_below_floor']} rounds below)",
            ]
        )
    return rows


LLM_HEADER = [
    "game",
    "round 1 → last",
    "mean",
    "published (round 1 → last)",
    "lowest participation",
    "whole",
]


def markdown(doc: dict[str, Any]) -> str:
    lines = ["# populace validate", ""]
    lines += [f"{text}  " for text in _header(doc)] + [""]
    lines += [
        "| check | target | measured | tolerance | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for c in doc["checks"]:
        verdict = c["verdict"] + (f": {c['reason']}" if c["reason"] else "")
        lines.append(
            f"| {c['title']} | {_number(c['target'])} | {_number(c['measured'])} | "
            f"{c['tolerance']} | {verdict} |"
        )
    if llm := llm_rows(doc):
        lines += ["", "## LLM reference games", ""]
        lines += ["| " + " | ".join(LLM_HEADER) + " |", "|" + " --- |" * len(LLM_HEADER)]
        lines += ["| " + " | ".join(row) + " |" for row in llm]
    shown: set[str] = set()
    for c in doc["checks"]:
        lines += ["", f"## {c['title']}", ""]
        if c["sizes"]:
            lines.append("Sizes: " + ", ".join(f"{k} {v}" for k, v in c["sizes"].items()) + ".")
            lines.append("")
        if c["how"]:
            lines += [c["how"], ""]
        if c.get("finding"):
            lines += [c["finding"], ""]
        if c["figure"] and c["figure"] not in shown:
            shown.add(c["figure"])
            lines += [f"![{c['title']}]({c['figure']})", ""]
    return "\n".join(lines).rstrip() + "\n"


def page(doc: dict[str, Any]) -> str:
    e = html.escape
    rows = "".join(
        f"<tr class='{e(c['verdict'].replace(' ', '-'))}'><td>{e(c['title'])}</td>"
        f"<td>{_number(c['target'])}</td><td>{_number(c['measured'])}</td>"
        f"<td>{e(c['tolerance'])}</td><td>{e(c['verdict'])}"
        f"{': ' + e(c['reason']) if c['reason'] else ''}</td></tr>"
        for c in doc["checks"]
    )
    sections, shown = [], set()
    for c in doc["checks"]:
        part = [f"<h2>{e(c['title'])}</h2>"]
        if c["sizes"]:
            part.append(
                "<p>Sizes: " + e(", ".join(f"{k} {v}" for k, v in c["sizes"].items())) + ".</p>"
            )
        if c["how"]:
            part.append(f"<p>{e(c['how'])}</p>")
        if c.get("finding"):
            part.append(f"<p class='finding'>{e(c['finding'])}</p>")
        if c["figure"] and c["figure"] not in shown:
            shown.add(c["figure"])
            part.append(f"<img src='{e(c['figure'])}' alt='{e(c['title'])}'>")
        sections.append("\n".join(part))
    header = "".join(f"<p>{e(text)}</p>" for text in _header(doc))
    llm_table = ""
    if llm := llm_rows(doc):
        cells = "".join(
            "<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>" for row in llm
        )
        heads = "".join(f"<th>{e(h)}</th>" for h in LLM_HEADER)
        llm_table = f"<h2>LLM reference games</h2><table><tr>{heads}</tr>{cells}</table>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>populace validate</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: .3rem .5rem; }}
tr.pass td:last-child {{ color: #176f2c; }} tr.fail td:last-child {{ color: #b3261e; }}
tr.not-run td:last-child {{ color: #7a5a00; }} img {{ max-width: 100%; }}
p.finding {{ border-left: 3px solid #888; padding-left: .6rem; }}
</style></head><body>
<h1>populace validate</h1>
{header}
<table><tr><th>check</th><th>target</th><th>measured</th><th>tolerance</th><th>verdict</th></tr>
{rows}</table>
{llm_table}
{chr(10).join(sections)}
</body></html>
"""
