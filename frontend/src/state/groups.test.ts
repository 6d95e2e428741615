import { describe, expect, it } from "vitest";
import type { GroupPage, GroupRow } from "../api/types";
import { groupColumns, hasLabels, keepsNoGroups, pageRange, seriesRounds, summarize, summaryText } from "./groups";

const row = (group: number, values: Record<string, number | null>, label: string | null = null): GroupRow => ({ group, values, label });
const CONSENSUS = { name: "consensus_round", title: "Consensus reached in round", type: "integer" as const, unit: "", description: "its rounds to consensus" };

describe("group metrics", () => {
  it("takes each kept metric's declaration, or its bare name when the plugin declares none", () => {
    const columns = groupColumns(["consensus_round", "share_ones"], [CONSENSUS]);
    expect(columns[0]).toBe(CONSENSUS);
    expect(columns[1]).toEqual({ name: "share_ones", title: "share_ones", type: "number", unit: "", description: "" });
    expect(groupColumns(["mean"], undefined).map((c) => c.title)).toEqual(["mean"]);
  });

  it("sums a metric up over the page: groups with a value, their min, mean and max", () => {
    const items = [row(0, { consensus_round: 3 }), row(1, { consensus_round: null }), row(2, { consensus_round: 8 }), row(3, {})];
    const summary = summarize(items, "consensus_round");
    expect(summary).toEqual({ count: 2, groups: 4, min: 3, mean: 5.5, max: 8 });
    expect(summaryText(summary, CONSENSUS)).toBe("2 of 4 with a value: min 3, mean 5.5, max 8");
    expect(summaryText(summarize([row(0, { x: null })], "x"), CONSENSUS)).toBe("0 of 1 with a value");
    expect(summarize([], "x")).toEqual({ count: 0, groups: 0, min: null, mean: null, max: null });
  });

  it("knows a run grouped by an attribute by its labels, and names the page's groups", () => {
    expect(hasLabels([row(0, {}), row(1, {}, "doctorate")])).toBe(true);
    expect(hasLabels([row(0, {})])).toBe(false);
    expect(pageRange([row(20, {}), row(21, {}), row(39, {})])).toBe("groups 20–39 shown");
    expect(pageRange([row(4, {})])).toBe("group 4 shown");
    expect(pageRange([])).toBe("no groups shown");
  });

  it("reads a group's rounds as a chart reads a run's", () => {
    expect(seriesRounds({ group: 1, label: null, next_after: null, items: [{ round: 2, values: { share_ones: 1 } }] })).toEqual([{ round: 2, metrics: { share_ones: 1 } }]);
    expect(seriesRounds(null)).toEqual([]);
  });

  it("gives up on group metrics only once a round completed without any", () => {
    const none: GroupPage = { round: null, groups: 0, names: [], items: [], next_after: null };
    const some: GroupPage = { round: 2, groups: 3, names: ["mean"], items: [], next_after: null };
    expect(keepsNoGroups(none, null)).toBe(false); // before round 1: not yet known
    expect(keepsNoGroups(none, 1)).toBe(true);
    expect(keepsNoGroups(some, 2)).toBe(false);
    expect(keepsNoGroups(null, 2)).toBe(false);
  });
});
