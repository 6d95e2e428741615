import { describe, expect, it } from "vitest";
import { backoffDelay, type ConnectionStatus, EventStream, eventsUrl } from "./events";
import type { EventMessage } from "./types";

class FakeSocket {
  static instances: FakeSocket[] = [];
  url: string;
  onopen: (() => void) | null = null;
  onmessage: ((e: { data: unknown }) => void) | null = null;
  onclose: ((e: { code: number }) => void) | null = null;
  onerror: (() => void) | null = null;
  closed = false;
  constructor(url: string) {
    this.url = url;
    FakeSocket.instances.push(this);
  }
  close() {
    this.closed = true;
  }
}

describe("eventsUrl", () => {
  it("uses wss on https and encodes the token", () => {
    expect(eventsUrl({ protocol: "https:", host: "m.example:8443" }, "a b&c", ["cluster"])).toBe(
      "wss://m.example:8443/ws/events?token=a+b%26c&topics=cluster",
    );
    expect(eventsUrl({ protocol: "http:", host: "127.0.0.1:8000" }, "t", ["cluster", "simulation:1"])).toBe(
      "ws://127.0.0.1:8000/ws/events?token=t&topics=cluster%2Csimulation%3A1",
    );
  });
});

describe("backoffDelay", () => {
  it("doubles up to the cap", () => {
    const full = () => 1; // no jitter reduction
    expect(backoffDelay(0, 500, 10_000, full)).toBe(500);
    expect(backoffDelay(3, 500, 10_000, full)).toBe(4000);
    expect(backoffDelay(10, 500, 10_000, full)).toBe(10_000);
    expect(backoffDelay(3, 500, 10_000, () => 0)).toBe(2000);
  });
});

describe("EventStream", () => {
  it("reports live, delivers parsed events, and reconnects after a close", () => {
    FakeSocket.instances = [];
    const timers: Array<{ fn: () => void; ms: number }> = [];
    const events: EventMessage[] = [];
    const statuses: ConnectionStatus[] = [];
    const stream = new EventStream({
      url: () => "ws://x/ws/events",
      onEvent: (e) => events.push(e),
      onStatus: (s) => statuses.push(s),
      WebSocketImpl: FakeSocket as unknown as typeof WebSocket,
      setTimer: (fn, ms) => timers.push({ fn, ms }),
      clearTimer: () => undefined,
    });
    stream.start();
    const first = FakeSocket.instances[0]!;
    first.onopen?.();
    first.onmessage?.({ data: '{"type":"hello","seq":1,"payload":{}}' });
    first.onmessage?.({ data: "not json" });
    first.onmessage?.({ data: '{"no":"type"}' });
    expect(events).toEqual([{ type: "hello", seq: 1, payload: {} }]);

    first.onclose?.({ code: 1006 });
    expect(stream.currentStatus).toBe("reconnecting");
    expect(timers).toHaveLength(1);
    timers[0]!.fn();
    expect(FakeSocket.instances).toHaveLength(2);
    FakeSocket.instances[1]!.onopen?.();
    expect(statuses).toEqual(["connecting", "live", "reconnecting", "reconnecting", "live"]);

    stream.stop();
    expect(FakeSocket.instances[1]!.closed).toBe(true);
    expect(stream.currentStatus).toBe("closed");
  });
});
