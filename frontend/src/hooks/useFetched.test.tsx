// @vitest-environment happy-dom
import { act, useState } from "react";
import { createRoot, type Root } from "react-dom/client";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiError } from "../api/client";
import { type Fetched, type Refetch, useFetched, useRefetch } from "./useFetched";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

/** A promise settled by the test, so each load ends exactly when the test says. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
}

/** The i-th load started (the test fails here if there is none). */
function nth<T>(items: T[], i: number): T {
  const item = items[i];
  if (item === undefined) throw new Error(`no load #${i}: only ${items.length} started`);
  return item;
}

let root: Root;
beforeEach(() => {
  root = createRoot(document.createElement("div"));
});
afterEach(() => act(() => root.unmount()));

describe("useFetched", () => {
  const onUnauthorized = vi.fn();
  let seen: Fetched<string>;
  let loads: Array<{ id: number; signal: AbortSignal; answer: ReturnType<typeof deferred<string>> }>;

  function Probe({ id }: { id: number; render: number }) {
    // A new `load` closure every render, as callers write it inline.
    seen = useFetched(
      (signal) => {
        const answer = deferred<string>();
        loads.push({ id, signal, answer });
        return answer.promise;
      },
      [id],
      { failure: `Could not load ${id}`, onUnauthorized, clearOnReload: true },
    );
    return null;
  }

  beforeEach(() => {
    loads = [];
    onUnauthorized.mockReset();
  });

  it("loads once per change of its deps, not on a re-render", async () => {
    await act(() => root.render(<Probe id={1} render={0} />));
    await act(() => root.render(<Probe id={1} render={1} />));
    await act(() => root.render(<Probe id={1} render={2} />));
    expect(loads.map((l) => l.id)).toEqual([1]);

    await act(async () => nth(loads, 0).answer.resolve("one"));
    expect(seen).toEqual({ data: "one", error: null });

    await act(() => root.render(<Probe id={2} render={3} />));
    expect(loads.map((l) => l.id)).toEqual([1, 2]);
    expect(seen.data).toBeNull(); // clearOnReload: the old answer is not shown for the new id
  });

  it("aborts the load before and drops its late answer", async () => {
    await act(() => root.render(<Probe id={1} render={0} />));
    await act(() => root.render(<Probe id={2} render={0} />));
    expect(nth(loads, 0).signal.aborted).toBe(true);
    await act(async () => nth(loads, 1).answer.resolve("two"));
    await act(async () => nth(loads, 0).answer.resolve("one, late"));
    expect(seen.data).toBe("two");
  });

  it("shows a failure, hands a 401 to onUnauthorized, and clears the error on success", async () => {
    await act(() => root.render(<Probe id={1} render={0} />));
    await act(async () => nth(loads, 0).answer.reject(new Error("network down")));
    expect(seen.error).toBe("Could not load 1: network down");

    await act(() => root.render(<Probe id={2} render={0} />));
    const denied = new ApiError(401, "bad token");
    await act(async () => nth(loads, 1).answer.reject(denied));
    expect(onUnauthorized).toHaveBeenCalledWith(denied);
    expect(seen.error).toBe("Could not load 1: network down");

    await act(() => root.render(<Probe id={3} render={0} />));
    await act(async () => nth(loads, 2).answer.resolve("three"));
    expect(seen).toEqual({ data: "three", error: null });
  });

  it("loads nothing while load is null", async () => {
    function Idle() {
      seen = useFetched(null, [], { failure: "x", onUnauthorized });
      return null;
    }
    await act(() => root.render(<Idle />));
    expect(seen).toEqual({ data: null, error: null });
  });
});

describe("useRefetch", () => {
  const onUnauthorized = vi.fn();
  let seen: Refetch;
  let loaded: string[];
  let loads: Array<{ signal: AbortSignal; answer: ReturnType<typeof deferred<string>> }>;

  function Probe({ filter }: { filter: string }) {
    const [, setTick] = useState(0);
    seen = useRefetch(
      (signal) => {
        const answer = deferred<string>();
        loads.push({ signal, answer });
        return answer.promise;
      },
      (result) => {
        loaded.push(`${filter}:${result}`);
        setTick((t) => t + 1); // a re-render after every load
      },
      [filter],
      { failure: "Could not load the list", onUnauthorized },
    );
    return null;
  }

  beforeEach(() => {
    loads = [];
    loaded = [];
  });

  it("keeps one refetch across re-renders and makes a new one when its deps change", async () => {
    await act(() => root.render(<Probe filter="all" />));
    const first = seen.refetch;
    expect(loads).toHaveLength(0); // it loads only when asked

    let done!: Promise<boolean>;
    act(() => {
      done = seen.refetch();
    });
    await act(async () => {
      nth(loads, 0).answer.resolve("a");
      await done;
    });
    expect(loaded).toEqual(["all:a"]);
    expect(seen.refetch).toBe(first);

    act(() => void seen.refetch());
    await act(() => root.render(<Probe filter="deleted" />));
    expect(seen.refetch).not.toBe(first);
    expect(nth(loads, 1).signal.aborted).toBe(true); // a load for the old filter is of no use
  });

  it("aborts a refetch still running when a newer one starts or the page goes away", async () => {
    await act(() => root.render(<Probe filter="all" />));
    let older!: Promise<boolean>;
    let newer!: Promise<boolean>;
    act(() => {
      older = seen.refetch();
      newer = seen.refetch();
    });
    expect(nth(loads, 0).signal.aborted).toBe(true);
    await act(async () => {
      nth(loads, 0).answer.resolve("old");
      nth(loads, 1).answer.resolve("new");
      // Superseded is not failed: only the newer load speaks for the page.
      expect(await Promise.all([older, newer])).toEqual([true, true]);
    });
    expect(loaded).toEqual(["all:new"]);

    act(() => void seen.refetch());
    await act(() => root.unmount());
    expect(nth(loads, 2).signal.aborted).toBe(true);
    root = createRoot(document.createElement("div"));
  });

  it("shows a failure until the next success", async () => {
    await act(() => root.render(<Probe filter="all" />));
    await act(async () => {
      const run = seen.refetch();
      nth(loads, 0).answer.reject(new ApiError(500, "boom"));
      expect(await run).toBe(false);
    });
    expect(seen.error).toBe("Could not load the list: The manager answered HTTP 500: boom");
    await act(async () => {
      const run = seen.refetch();
      nth(loads, 1).answer.resolve("ok");
      expect(await run).toBe(true);
    });
    expect(seen.error).toBeNull();
  });
});
