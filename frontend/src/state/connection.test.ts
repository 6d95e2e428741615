import { describe, expect, it } from "vitest";
import { OFFLINE_AFTER_MS, connectionBadge } from "./connection";

const fine = { online: true, unreachable: false, reconnectingMs: 0 };

describe("the live-updates badge", () => {
  it("follows the socket while the manager answers", () => {
    expect(connectionBadge("live", fine).text).toBe("live");
    expect(connectionBadge("connecting", fine).text).toBe("connecting…");
    expect(connectionBadge("reconnecting", { ...fine, reconnectingMs: 2000 }).text).toBe("reconnecting…");
    expect(connectionBadge("stale", fine).text).toBe("reconnecting…");
  });

  it("says offline, never live, when the browser or the manager is unreachable", () => {
    expect(connectionBadge("live", { ...fine, online: false })).toMatchObject({ tone: "offline", text: "offline" });
    expect(connectionBadge("live", { ...fine, unreachable: true })).toMatchObject({ tone: "offline", text: "offline" });
    expect(connectionBadge("reconnecting", { ...fine, reconnectingMs: OFFLINE_AFTER_MS })).toMatchObject({ tone: "offline", text: "offline, retrying…" });
  });
});
