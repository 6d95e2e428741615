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

from backend.validate.result import CheckResult
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
    counts = {"pass": 0, "fail": 0, "not run": 0}
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


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _header(doc: dict[str, Any]) -> list[str]:
    m = doc["machine"]
    counts = doc["summary"]
    return [
        f"Command: `{doc['command']}` ({doc['mode']} suite, {doc['cluster']})",
        f"populace {doc['populace_version']}, commit {doc['commit'] or 'unknown'}; "
        f"{m['cpus']} CPUs, {m['memory_gib']} GiB, {m['platform']}, Python {m['python']}",
        f"Started {doc['started']}, {doc['wall_s']:.0f} s; {counts['pass']} passed, "
        f"{counts['fail']} failed, {counts['not run']} not run (exit code {doc['exit_code']}).",
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
    shown: set[str] = set()
    for c in doc["checks"]:
        lines += ["", f"## {c['title']}", ""]
        if c["sizes"]:
            lines.append("Sizes: " + ", ".join(f"{k} {v}" for k, v in c["sizes"].items()) + ".")
            lines.append("")
        if c["how"]:
            lines += [c["how"], ""]
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
        if c["figure"] and c["figure"] not in shown:
            shown.add(c["figure"])
            part.append(f"<img src='{e(c['figure'])}' alt='{e(c['title'])}'>")
        sections.append("\n".join(part))
    header = "".join(f"<p>{e(text)}</p>" for text in _header(doc))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>populace validate</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: .3rem .5rem; }}
tr.pass td:last-child {{ color: #176f2c; }} tr.fail td:last-child {{ color: #b3261e; }}
tr.not-run td:last-child {{ color: #7a5a00; }} img {{ max-width: 100%; }}
</style></head><body>
<h1>populace validate</h1>
{header}
<table><tr><th>check</th><th>target</th><th>measured</th><th>tolerance</th><th>verdict</th></tr>
{rows}</table>
{chr(10).join(sections)}
</body></html>
"""
