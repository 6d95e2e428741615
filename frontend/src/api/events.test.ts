import { describe, expect, it } from "vitest";
import { backoffDelay, type ConnectionStatus, DEFAULT_PING_INTERVAL_MS, EventStream, eventsProtocols, eventsUrl, ReplayCursor, staleAfterMs } from "./events";
import type { EventMessage } from "./types";

class FakeSocket {
  static instances: FakeSocket[] = [];
  url: string;
  protocols: string[] | undefined;
  onopen: (() => void) | null = null;
  onmessage: ((e: { data: unknown }) => void) | null = null;
  onclose: ((e: { code: number }) => void) | null = null;
  onerror: (() => void) | null = null;
  closed = false;
  constructor(url: string, protocols?: string[]) {
    this.url = url;
    this.protocols = protocols;
    FakeSocket.instances.push(this);
  }
  close() {
    this.closed = true;
  }
  send(message: EventMessage) {
    this.onmessage?.({ data: JSON.stringify(message) });
  }
}

const hello = (seq: number, epoch = "e1"): EventMessage => ({ type: "hello", topic: "system", seq, payload: { epoch } });
const ev = (seq: number): EventMessage => ({ type: "round.completed", topic: "simulation:1", seq, payload: { round: seq } });

describe("eventsUrl", () => {
  it("uses wss on https and never carries a token", () => {
    expect(eventsUrl({ protocol: "https:", host: "m.example:8443" }, ["cluster"])).toBe("wss://m.example:8443/ws/events?topics=cluster");
    expect(eventsUrl({ protocol: "http:", host: "127.0.0.1:8000" }, ["cluster", "simulation:1"])).toBe(
      "ws://127.0.0.1:8000/ws/events?topics=cluster%2Csimulation%3A1",
    );
  });

  it("adds since and epoch when resuming", () => {
    expect(eventsUrl({ protocol: "http:", host: "h" }, ["population:*"], { since: 41, epoch: "ab12" })).toBe(
      "ws://h/ws/events?topics=population%3A*&since=41&epoch=ab12",
    );
  });
});

describe("eventsProtocols", () => {
  it("offers populace.v1 and the token as unpadded base64url", () => {
    expect(eventsProtocols("abc")).toEqual(["populace.v1", "populace.auth.YWJj"]);
    // '+' and '/' become '-' and '_'; the padding goes; UTF-8 first.
    expect(eventsProtocols("\u00fb\u00ff?")).toEqual(["populace.v1", "populace.auth.w7vDvz8"]);
    expect(eventsProtocols(">>>?")[1]).toBe("populace.auth.Pj4-Pw");
    expect(eventsProtocols("ab")[1]).toBe("populace.auth.YWI");
    // Only characters a subprotocol may carry.
    expect(eventsProtocols("a b&c/\u00e9+=")[1]).toMatch(/^populace\.auth\.[A-Za-z0-9_-]+$/);
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

describe("ReplayCursor", () => {
  it("starts fresh, takes hello as the base and asks for a snapshot", () => {
    const cursor = new ReplayCursor();
    expect(cursor.beginConnection()).toBeNull();
    expect(cursor.accept(hello(10))).toBe("resync");
    expect(cursor.accept(ev(11))).toBe("event");
    expect(cursor.beginConnection()).toEqual({ since: 11, epoch: "e1" });
  });

  it("drops replayed events it already applied and anything older", () => {
    const cursor = new ReplayCursor();
    cursor.beginConnection();
    cursor.accept(hello(0));
    expect([1, 2, 3].map((s) => cursor.accept(ev(s)))).toEqual(["event", "event", "event"]);
    cursor.beginConnection(); // resume from 3
    // The manager's hello on a resumed connection changes nothing; the replay follows.
    expect(cursor.accept(hello(7))).toBe("ignore");
    expect([2, 3, 4, 5, 5, 6, 7].map((s) => cursor.accept(ev(s)))).toEqual([
      "duplicate",
      "duplicate",
      "event",
      "event",
      "duplicate",
      "event",
      "event",
    ]);
    expect(cursor.lastSeq).toBe(7);
  });

  it("on resync takes the manager's seq as the new base, even a lower one (restart)", () => {
    const cursor = new ReplayCursor();
    cursor.beginConnection();
    cursor.accept(hello(900, "old"));
    cursor.accept(ev(901));
    expect(cursor.beginConnection()).toEqual({ since: 901, epoch: "old" });
    expect(cursor.accept(hello(4, "new"))).toBe("ignore");
    expect(cursor.accept({ type: "resync", topic: "system", seq: 4, payload: {} })).toBe("resync");
    expect(cursor.accept(ev(5))).toBe("event");
    expect(cursor.beginConnection()).toEqual({ since: 5, epoch: "new" });
  });

  it("passes events without a seq through", () => {
    expect(new ReplayCursor().accept({ type: "notice" })).toBe("event");
  });

  it("ignores the manager's keep-alive pings, which carry no seq", () => {
    const cursor = new ReplayCursor();
    cursor.beginConnection();
    cursor.accept(hello(7));
    expect(cursor.accept({ type: "ping", topic: "system" })).toBe("ignore");
    expect(cursor.lastSeq).toBe(7);
  });
});

describe("EventStream", () => {
  function makeStream() {
    FakeSocket.instances = [];
    // Reconnect timers in `timers`; the silence watchdogs (re-armed on every message) apart.
    const timers: Array<{ fn: () => void; ms: number }> = [];
    const watchdogs: Array<{ fn: () => void; ms: number; cleared: boolean }> = [];
    const events: EventMessage[] = [];
    const statuses: ConnectionStatus[] = [];
    let resyncs = 0;
    const stream = new EventStream({
      url: (resume) => (resume ? `ws://x/ws/events?since=${resume.since}&epoch=${resume.epoch}` : "ws://x/ws/events"),
      protocols: eventsProtocols("tok"),
      onEvent: (e) => events.push(e),
      onResync: () => (resyncs += 1),
      onStatus: (s) => statuses.push(s),
      WebSocketImpl: FakeSocket as unknown as typeof WebSocket,
      setTimer: (fn, ms) => {
        const timer = { fn, ms, cleared: false };
        (ms >= staleAfterMs(1000) ? watchdogs : timers).push(timer);
        return timer;
      },
      clearTimer: (handle) => {
        (handle as { cleared: boolean }).cleared = true;
      },
    });
    const armed = () => watchdogs.filter((w) => !w.cleared);
    return { stream, timers, armed, events, statuses, resyncs: () => resyncs };
  }

  it("reports live, delivers parsed events, and reconnects after a close", () => {
    const { stream, timers, events, statuses, resyncs } = makeStream();
    stream.start();
    const first = FakeSocket.instances[0]!;
    first.onopen?.();
    first.send(hello(1));
    first.onmessage?.({ data: "not json" });
    first.onmessage?.({ data: '{"no":"type"}' });
    first.send(ev(2));
    expect(events).toEqual([ev(2)]);
    expect(resyncs()).toBe(1);

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

  it("resumes with since after a drop and delivers every event exactly once", () => {
    const { stream, timers, events, resyncs } = makeStream();
    stream.start();
    const first = FakeSocket.instances[0]!;
    first.onopen?.();
    first.send(hello(10));
    first.send(ev(11));
    first.send(ev(12));
    first.onclose?.({ code: 1006 });
    timers[0]!.fn();
    const second = FakeSocket.instances[1]!;
    expect(second.url).toBe("ws://x/ws/events?since=12&epoch=e1");
    // Every connection authenticates in its subprotocols, the first and the resumed one.
    expect(FakeSocket.instances.map((s) => s.protocols)).toEqual([eventsProtocols("tok"), eventsProtocols("tok")]);
    second.onopen?.();
    second.send(hello(15));
    for (const seq of [12, 13, 14, 15, 16]) second.send(ev(seq)); // replay overlaps by one
    expect(events.map((e) => e.seq)).toEqual([11, 12, 13, 14, 15, 16]);
    expect(resyncs()).toBe(1); // only the first connection's snapshot: no refetch on resume
    stream.stop();
  });

  it("asks for a snapshot when the manager cannot replay", () => {
    const { stream, timers, resyncs } = makeStream();
    stream.start();
    FakeSocket.instances[0]!.send(hello(10));
    FakeSocket.instances[0]!.onclose?.({ code: 1006 });
    timers[0]!.fn();
    const second = FakeSocket.instances[1]!;
    second.send(hello(20_000));
    second.send({ type: "resync", topic: "system", seq: 20_000, payload: {} });
    expect(resyncs()).toBe(2);
    expect(stream.lastSeq).toBe(20_000);
    stream.stop();
  });

  it("marks a silent socket stale and reconnects with since/epoch; pings keep it live", () => {
    const { stream, timers, armed, statuses } = makeStream();
    stream.start();
    const first = FakeSocket.instances[0]!;
    first.onopen?.();
    first.send({ ...hello(10), payload: { epoch: "e1", ping_interval_s: 2 } });
    expect(armed()).toHaveLength(1);
    expect(armed()[0]!.ms).toBe(staleAfterMs(2000));
    first.send({ type: "ping", topic: "system" }); // re-arms: only one countdown runs
    expect(armed()).toHaveLength(1);
    expect(stream.currentStatus).toBe("live");

    const dog = armed()[0]!;
    dog.cleared = true; // it fires (a fired timer is spent)
    dog.fn(); // nothing more arrived: the socket is presumed dead
    expect(statuses.slice(-1)).toEqual(["stale"]);
    expect(first.closed).toBe(true);
    expect(armed()).toHaveLength(0);
    timers[0]!.fn();
    const second = FakeSocket.instances[1]!;
    expect(second.url).toBe("ws://x/ws/events?since=10&epoch=e1");
    second.onopen?.();
    expect(stream.currentStatus).toBe("live");
    stream.stop();
    expect(armed()).toHaveLength(0);
  });

  it("waits for the default interval when the hello does not say", () => {
    const { stream, armed } = makeStream();
    stream.start();
    FakeSocket.instances[0]!.onopen?.();
    expect(armed()[0]!.ms).toBe(staleAfterMs(DEFAULT_PING_INTERVAL_MS));
    stream.stop();
  });
});
