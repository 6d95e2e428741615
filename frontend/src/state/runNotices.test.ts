import { describe, expect, it } from "vitest";
import { MAX_NOTICES, type RunNotice, addNotice, noticeFromEvent, noticeText, noticeTitle } from "./runNotices";

const updated = (payload: Record<string, unknown>) => ({ type: "simulation.updated", topic: `simulation:${String(payload.simulation_id)}`, seq: 1, payload });

describe("run notices", () => {
  it("notices a run that completed or failed", () => {
    expect(noticeFromEvent(updated({ simulation_id: 7, status: "completed", error: null }), "/populations")).toEqual({
      key: "7:completed",
      simulationId: 7,
      status: "completed",
      name: null,
      error: null,
    });
    expect(noticeFromEvent(updated({ simulation_id: 7, status: "failed", error: "worker gone" }), "/cluster")?.error).toBe("worker gone");
  });

  it("ignores other statuses, other events, and the run's own page", () => {
    expect(noticeFromEvent(updated({ simulation_id: 7, status: "running" }), "/cluster")).toBeNull();
    expect(noticeFromEvent({ type: "round.completed", payload: { simulation_id: 7, status: "completed" } }, "/cluster")).toBeNull();
    expect(noticeFromEvent(updated({ simulation_id: 7, status: "completed" }), "/simulations/7")).toBeNull();
    expect(noticeFromEvent(updated({ simulation_id: 7, status: "completed" }), "/simulations/71")).not.toBeNull();
  });

  it("keeps one notice per run and outcome, and the latest few", () => {
    const n = (id: number): RunNotice => ({ key: `${id}:completed`, simulationId: id, status: "completed", name: null, error: null });
    let notices = addNotice([], n(1));
    notices = addNotice(notices, n(1));
    expect(notices.map((x) => x.simulationId)).toEqual([1]);
    for (let id = 2; id <= MAX_NOTICES + 2; id++) notices = addNotice(notices, n(id));
    expect(notices.map((x) => x.simulationId)).toEqual([3, 4, 5]);
  });

  it("says what happened by name, in the text and in a hidden tab's title", () => {
    const done: RunNotice = { key: "7:completed", simulationId: 7, status: "completed", name: "baseline", error: null };
    expect(noticeText(done)).toBe("baseline completed");
    expect(noticeText({ ...done, name: null, status: "failed" })).toBe("Simulation 7 failed");
    expect(noticeTitle(done, "Populations · populace")).toBe("✓ baseline completed · Populations · populace");
    expect(noticeTitle({ ...done, status: "failed" }, "Cluster · populace")).toBe("✗ baseline failed · Cluster · populace");
  });
});
