"""Alerts to a webhook (Slack-compatible JSON): a run failed or paused, a worker went offline.

Set POPULACE_ALERT_WEBHOOK_URL to a Slack incoming webhook (or anything that takes
`{"text": ..., "blocks": [...]}`). Alerts are queued (bounded) and posted by one background
task with a timeout and a couple of retries, so a slow or dead webhook never holds up the event
loop, a run or a heartbeat: when the queue is full, an alert is dropped and the drop logged.

The URL is the credential (anyone holding a Slack webhook URL may post to the channel): it is
never logged, not even by httpx, whose request lines are rewritten here.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

from backend.cancellation import stop_if_cancelled
from backend.lifecycles import simulation
from backend.simulations.timeline import Entry

log = logging.getLogger(__name__)

QUEUE_SIZE = 100
RETRIES = 2
RETRY_BACKOFF_S = 0.5
# Slack shows at most 10 fields in a section block.
MAX_FIELDS = 10
# The run timeline's entries that alert.
ALERTING_KINDS = (simulation.FAILED, simulation.PAUSED)


@dataclass(frozen=True)
class Alert:
    text: str
    fields: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """Slack's message shape: `text` for notifications and plain receivers, blocks to show."""
        blocks: list[dict[str, Any]] = [
            {"type": "section", "text": {"type": "mrkdwn", "text": self.text}}
        ]
        if self.fields:
            blocks.append(
                {
                    "type": "section",
                    "fields": [
                        {"type": "mrkdwn", "text": f"*{name}*\n{value}"}
                        for name, value in list(self.fields.items())[:MAX_FIELDS]
                    ],
                }
            )
        return {"text": self.text, "blocks": blocks}


def _linked(label: str, dashboard_url: str | None, path: str) -> str:
    """Slack's `<url|label>` link to a dashboard page, or the label alone without an address."""
    if not dashboard_url:
        return label
    return f"<{dashboard_url.rstrip('/')}{path}|{label}>"


def run_alert(entry: Entry, dashboard_url: str | None = None) -> Alert | None:
    """The alert a run's timeline entry raises, if any."""
    if entry.kind not in ALERTING_KINDS:
        return None
    fields = {"simulation": str(entry.simulation_id), "status": entry.kind}
    if entry.round is not None:
        fields["last round"] = str(entry.round)
    run = _linked(
        f"simulation {entry.simulation_id}", dashboard_url, f"/simulations/{entry.simulation_id}"
    )
    return Alert(f"populace: {run} {entry.message}", fields)


def worker_alert(worker: Any, dashboard_url: str | None = None) -> Alert:
    """A worker the liveness sweep marked offline (its heartbeats stopped)."""
    fields = {"worker": str(worker.id), "address": str(worker.address)}
    node = getattr(worker, "node", None)
    if node:
        fields["node"] = str(node)
    if getattr(worker, "agents", None) is not None:
        fields["agents"] = str(worker.agents)
    return Alert(
        f"populace: {_linked(f'worker {worker.id}', dashboard_url, f'/workers/{worker.id}')} "
        f"at {worker.address} missed its heartbeats: offline",
        fields,
    )


class _HideUrl(logging.Filter):
    """httpx logs each request's URL at INFO: ours is a secret."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(self.url in str(a) for a in record.args):
            record.args = tuple("[alert webhook]" if self.url in str(a) else a for a in record.args)
        if isinstance(record.msg, str) and self.url in record.msg:
            record.msg = record.msg.replace(self.url, "[alert webhook]")
        return True


class AlertSender:
    """A bounded queue of alerts and the task that posts them (`run_forever`)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        retries: int = RETRIES,
        queue_size: int = QUEUE_SIZE,
        backoff_s: float = RETRY_BACKOFF_S,
    ) -> None:
        self._url = url
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.queue: asyncio.Queue[Alert] = asyncio.Queue(maxsize=queue_size)
        self.sent = 0
        self.dropped = 0
        self._hide = _HideUrl(url)
        logging.getLogger("httpx").addFilter(self._hide)

    def __repr__(self) -> str:  # never the URL
        return f"AlertSender(queued={self.queue.qsize()}, sent={self.sent}, dropped={self.dropped})"

    def send(self, alert: Alert) -> bool:
        """Queue an alert without waiting; False (and a log line) when the queue is full."""
        try:
            self.queue.put_nowait(alert)
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning(
                "alert dropped (%d queued, webhook too slow): %s", self.queue.qsize(), alert.text
            )
            return False
        return True

    async def run_forever(self) -> None:
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False) as client:
                while True:
                    alert = await self.queue.get()
                    try:
                        if await self._post(client, alert):
                            self.sent += 1
                        else:
                            self.dropped += 1
                    finally:
                        self.queue.task_done()  # `await queue.join()`: all sent or given up
                    stop_if_cancelled()
        finally:
            logging.getLogger("httpx").removeFilter(self._hide)

    async def _post(self, client: httpx.AsyncClient, alert: Alert) -> bool:
        """One alert, tried 1 + retries times; True once the webhook took it."""
        why = ""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * attempt)
            try:
                response = await client.post(self._url, json=alert.body())
            except httpx.HTTPError as exc:
                stop_if_cancelled(exc)
                # The exception's text may quote the URL: its kind says enough.
                why = type(exc).__name__
                continue
            if response.is_success:
                return True
            why = f"HTTP {response.status_code}"
            if 400 <= response.status_code < 500 and response.status_code != 429:
                break  # refused (a revoked webhook): trying again changes nothing
        log.warning("alert dropped (webhook: %s): %s", why, alert.text)
        return False


class Alerts:
    """What alerts, wired to its sources: the run timeline and the liveness sweep."""

    def __init__(self, sender: AlertSender, dashboard_url: str | None = None) -> None:
        self.sender = sender
        self.dashboard_url = dashboard_url

    def on_timeline_entry(self, entry: Entry) -> None:
        alert = run_alert(entry, self.dashboard_url)
        if alert is not None:
            self.sender.send(alert)

    def on_worker_offline(self, worker: Any) -> None:
        self.sender.send(worker_alert(worker, self.dashboard_url))


def alerts_from_settings(settings) -> Alerts | None:
    """The manager's alerts, or None when no webhook is set."""
    if settings.alert_webhook_url is None:
        return None
    url = settings.alert_webhook_url.get_secret_value().strip()
    if not url:
        return None
    return Alerts(AlertSender(url, timeout_s=settings.alert_timeout_s), settings.dashboard_url)
