"""The webhook sender (backend.alerts) against a real local HTTP server that answers, fails or
stalls: Slack's body, retries, the timeout, the bounded queue, and no URL in any log line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from backend.alerts import Alert, Alerts, AlertSender, run_alert, worker_alert
from backend.settings import ManagerSettings
from backend.simulations.timeline import Entry

SECRET_PATH = "/services/T000/B000/xoxb-very-secret-part"


@dataclass
class Webhook:
    """A tiny HTTP/1.1 server: `plan` says what each request gets (200, a status, or "stall")."""

    plan: list[int | str] = field(default_factory=list)
    bodies: list[dict] = field(default_factory=list)
    attempts: int = 0
    stalled: asyncio.Event = field(default_factory=asyncio.Event)
    url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                length = next(
                    int(line.split(":", 1)[1])
                    for line in head.split("\r\n")
                    if line.lower().startswith("content-length:")
                )
                body = json.loads(await reader.readexactly(length))
                self.attempts += 1
                answer = self.plan.pop(0) if self.plan else 200
                if answer == "stall":
                    self.stalled.set()
                    await reader.read(1)  # never answers: waits for the client to give up
                    break
                if answer == 200:
                    self.bodies.append(body)
                writer.write(
                    f"HTTP/1.1 {answer} X\r\nContent-Length: 2\r\n\r\nok".encode("latin-1")
                )
                await writer.drain()
        writer.close()


@pytest.fixture
async def webhook() -> AsyncIterator[Webhook]:
    hook = Webhook()
    server = await asyncio.start_server(hook.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    hook.url = f"http://127.0.0.1:{port}{SECRET_PATH}"
    async with server:
        yield hook
        server.close()


@contextlib.asynccontextmanager
async def running(sender: AlertSender):
    task = asyncio.create_task(sender.run_forever())
    try:
        yield sender
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_an_alert_is_posted_as_slack_json(webhook):
    sender = AlertSender(webhook.url, timeout_s=5)
    async with running(sender):
        assert sender.send(Alert("populace: simulation 3 failed: boom", {"simulation": "3"}))
        await asyncio.wait_for(sender.queue.join(), 10)
    (body,) = webhook.bodies
    assert body["text"] == "populace: simulation 3 failed: boom"
    assert body["blocks"][0] == {
        "type": "section",
        "text": {"type": "mrkdwn", "text": "populace: simulation 3 failed: boom"},
    }
    assert body["blocks"][1]["fields"] == [{"type": "mrkdwn", "text": "*simulation*\n3"}]
    assert sender.sent == 1 and sender.dropped == 0


async def test_a_failing_webhook_is_retried_then_the_alert_arrives(webhook):
    webhook.plan = [500, 503]
    sender = AlertSender(webhook.url, timeout_s=5, retries=2, backoff_s=0.01)
    async with running(sender):
        sender.send(Alert("paused"))
        await asyncio.wait_for(sender.queue.join(), 10)
    assert webhook.attempts == 3 and [b["text"] for b in webhook.bodies] == ["paused"]
    assert sender.sent == 1


async def test_a_refused_alert_is_not_retried_and_is_logged_without_the_url(webhook, caplog):
    webhook.plan = [404]
    sender = AlertSender(webhook.url, timeout_s=5, retries=2, backoff_s=0.01)
    with caplog.at_level(logging.INFO):
        async with running(sender):
            sender.send(Alert("first"))
            sender.send(Alert("second"))
            await asyncio.wait_for(sender.queue.join(), 10)
    assert webhook.attempts == 2 and [b["text"] for b in webhook.bodies] == ["second"]
    assert sender.dropped == 1 and sender.sent == 1
    assert "alert dropped (webhook: HTTP 404): first" in caplog.text
    assert SECRET_PATH not in caplog.text and "very-secret" not in caplog.text


async def test_a_stalled_webhook_times_out_and_the_next_alert_still_goes(webhook, caplog):
    webhook.plan = ["stall", "stall"]
    sender = AlertSender(webhook.url, timeout_s=0.2, retries=1, backoff_s=0.01)
    with caplog.at_level(logging.INFO):
        async with running(sender):
            # send() never waits for the webhook, stalled or not.
            assert sender.send(Alert("during a stall"))
            await asyncio.wait_for(webhook.stalled.wait(), 10)
            assert sender.send(Alert("after the stall"))
            await asyncio.wait_for(sender.queue.join(), 30)
    assert [b["text"] for b in webhook.bodies] == ["after the stall"]
    assert webhook.attempts == 3  # two stalled tries of the first, one of the second
    assert "alert dropped (webhook: ReadTimeout): during a stall" in caplog.text
    assert "very-secret" not in caplog.text


def test_the_queue_is_bounded_and_a_full_one_drops_with_a_log_line(caplog):
    sender = AlertSender("http://127.0.0.1:9" + SECRET_PATH, queue_size=2)
    with caplog.at_level(logging.WARNING):
        assert sender.send(Alert("one")) and sender.send(Alert("two"))
        assert not sender.send(Alert("three"))
    assert sender.queue.qsize() == 2 and sender.dropped == 1
    assert "alert dropped" in caplog.text and "three" in caplog.text
    assert "very-secret" not in caplog.text and "very-secret" not in repr(sender)


def test_which_run_entries_and_workers_alert():
    sender = AlertSender("http://127.0.0.1:9/x", queue_size=10)
    alerts = Alerts(sender)
    for kind, message in [
        ("round", "round 1 of 3 finished: mean 33.00"),
        ("cancelled", "cancelled: wrong prompt"),
        ("failed", "failed: endpoint down"),
        ("paused", "paused: round 2: 12 of 100 agents are not hosted"),
    ]:
        alerts.on_timeline_entry(Entry(7, kind, message, round=2))
    texts = [sender.queue.get_nowait().text for _ in range(sender.queue.qsize())]
    assert texts == [
        "populace: simulation 7 failed: endpoint down",
        "populace: simulation 7 paused: round 2: 12 of 100 agents are not hosted",
    ]
    assert run_alert(Entry(7, "completed", "finished after 3 rounds")) is None

    class Gone:
        id, address, node, agents = 4, "10.0.0.2:50051", "node-a", 1200

    alert = worker_alert(Gone())
    assert "worker 4 at 10.0.0.2:50051" in alert.text and "offline" in alert.text
    assert alert.fields == {
        "worker": "4",
        "address": "10.0.0.2:50051",
        "node": "node-a",
        "agents": "1200",
    }


def test_alerts_link_the_dashboard_page_when_its_address_is_known():
    class Gone:
        id, address, node, agents = 4, "10.0.0.2:50051", None, None

    run = run_alert(Entry(7, "failed", "failed: endpoint down"), "https://populace.example.org/")
    assert run is not None
    assert run.text == (
        "populace: <https://populace.example.org/simulations/7|simulation 7> failed: endpoint down"
    )
    worker = worker_alert(Gone(), "https://populace.example.org")
    assert worker.text.startswith("populace: <https://populace.example.org/workers/4|worker 4> at")


def test_the_dashboard_address_is_checked_when_the_manager_starts():
    with pytest.raises(ValueError, match="dashboard_url"):
        ManagerSettings(dashboard_url="populace.example.org/?token=x")
