// @vitest-environment happy-dom
import { act } from "react";
import { createRoot, type Root } from "react-dom/client";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ApiClient } from "../api/client";
import type { EventMessage } from "../api/types";
import { useEventStream } from "./useEventStream";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

/** A websocket the test opens, feeds and closes. */
class FakeSocket {
  static instances: FakeSocket[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((e: { data: unknown }) => void) | null = null;
  onclose: ((e: { code: number }) => void) | null = null;
  onerror: (() => void) | null = null;
  constructor() {
    FakeSocket.instances.push(this);
  }
  close() {}
  send(message: EventMessage) {
    this.onmessage?.({ data: JSON.stringify(message) });
  }
}

const hello = (seq: number): EventMessage => ({ type: "hello", topic: "system", seq, payload: { epoch: "e1" } });
const latest = () => FakeSocket.instances[FakeSocket.instances.length - 1]!;

let root: Root;
beforeEach(() => {
  vi.useFakeTimers();
  FakeSocket.instances = [];
  vi.stubGlobal("WebSocket", FakeSocket);
  root = createRoot(document.createElement("div"));
});
afterEach(() => {
  act(() => root.unmount());
  vi.unstubAllGlobals();
  vi.useRealTimers();
});

describe("useEventStream", () => {
  const client = { info: () => Promise.resolve({}) } as unknown as ApiClient;
  const TOPICS = ["cluster"];
  const onUnauthorized = () => undefined; // stable, as pages pass it: a new one reconnects

  function Probe({ onResync }: { onResync: () => Promise<boolean> }) {
    useEventStream(client, "t", TOPICS, { onEvents: () => undefined, onResync }, onUnauthorized);
    return null;
  }

  it("loads the snapshot again when the socket reopens after a snapshot that did not load", async () => {
    // The network drops while the first snapshot loads; the socket then resumes from its seq
    // (no resync from the manager), so without a retry the page would keep its failed load.
    const answers = [false, true];
    const onResync = vi.fn(() => Promise.resolve(answers.shift() ?? true));
    act(() => root.render(<Probe onResync={onResync} />));
    await act(async () => {
      latest().onopen?.();
      latest().send(hello(5));
    });
    expect(onResync).toHaveBeenCalledTimes(1);
    await act(async () => {
      latest().onclose?.({ code: 1006 });
      await vi.advanceTimersByTimeAsync(15_000);
    });
    expect(FakeSocket.instances).toHaveLength(2);
    await act(async () => {
      latest().onopen?.();
      latest().send(hello(5)); // resumed: same epoch, nothing missed
    });
    expect(onResync).toHaveBeenCalledTimes(2);
    // That one loaded: a later reopen costs no snapshot.
    await act(async () => {
      latest().onclose?.({ code: 1006 });
      await vi.advanceTimersByTimeAsync(15_000);
      latest().onopen?.();
      latest().send(hello(5));
    });
    expect(onResync).toHaveBeenCalledTimes(2);
  });
});
