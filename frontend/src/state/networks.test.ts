import { describe, expect, it } from "vitest";
import type { SimulationRound } from "../api/types";
import {
  EGO_DRAWN,
  actionRange,
  anyNetworkBytes,
  circlePositions,
  degreeBins,
  degreeSummary,
  graphFacts,
  hasCompartments,
  heatColour,
  heatmapRows,
  heatmapSummary,
  moreText,
  opinionHeatmap,
  rampColour,
  storesChanges,
  totalNetworkBytes,
  valueColour,
  valueLabel,
  valueScale,
  type GraphStats,
} from "./networks";

function round(n: number, histogram: number[], networkBytes = 0): SimulationRound {
  return { round: n, histogram, network_bytes: networkBytes } as unknown as SimulationRound;
}

const GRAPH: GraphStats = {
  kind: "erdos_renyi",
  nodes: 500,
  edges: 1000,
  mean_degree: 4,
  min_degree: 0,
  max_degree: 11,
  isolated: 9,
  components: 12,
  largest_component: 488,
  clustering: { clustering: 0.0081, stderr: 0.0006 },
  degree_histogram: [9, 35, 160, 270, 26],
  cut_fraction: 0.5012,
};

describe("degreeBins", () => {
  it("labels the log2 bins as stats.py makes them: [0], [1], [2, 3], [4, 7], [8, 15]", () => {
    const bins = degreeBins(GRAPH.degree_histogram);
    expect(bins.map((b) => b.label)).toEqual(["0", "1", "2–3", "4–7", "8–15"]);
    expect(bins.map((b) => [b.low, b.high])).toEqual([
      [0, 0],
      [1, 1],
      [2, 3],
      [4, 7],
      [8, 15],
    ]);
    expect(bins[3]!.share).toBeCloseTo(270 / 500);
  });

  it("has no bins for a complete graph (null) or an empty one", () => {
    expect(degreeBins(null)).toEqual([]);
    expect(degreeBins([])).toEqual([]);
    expect(degreeBins([0, 0])[0]!.share).toBe(0);
  });

  it("says the bins in words", () => {
    expect(degreeSummary(degreeBins([1, 3]))).toBe("degree 0: 1 agents (25.0 %); degree 1: 3 agents (75.0 %)");
    expect(degreeSummary([])).toBe("No degree distribution");
  });
});

describe("graphFacts", () => {
  it("lists the record's numbers", () => {
    const facts = Object.fromEntries(graphFacts(GRAPH).map((f) => [f.term, f.detail]));
    expect(facts).toMatchObject({
      Kind: "Erdős–Rényi",
      Edges: "1,000",
      "Mean degree": "4",
      "Degree range": "0–11",
      "Isolated agents": "9",
      Components: "12",
      "Largest component": "488 agents (97.6 %)",
      Clustering: "0.0081 ± 0.0006",
      "Edges across workers": "50.1 %",
    });
  });

  it("says what is not counted", () => {
    const facts = Object.fromEntries(graphFacts({ ...GRAPH, components: null, largest_component: null, clustering: null }).map((f) => [f.term, f.detail]));
    expect(facts.Components).toBe("not counted");
    expect(facts["Largest component"]).toBeUndefined();
    expect(facts.Clustering).toBe("–");
  });
});

describe("valueScale", () => {
  it("colours a choice's options by index", () => {
    const scale = valueScale({ kind: "choice", options: ["S", "I", "R"] }, []);
    expect(scale.kind).toBe("categories");
    expect(valueLabel(scale, 1)).toBe("I");
    expect(valueColour(scale, 0)).not.toBe(valueColour(scale, 1));
    expect(valueColour(scale, null)).toBe("transparent");
    expect(valueColour(scale, 7)).toBe("transparent");
  });

  it("makes a small integer range categories and a number range a ramp", () => {
    const voter = valueScale({ kind: "integer", low: 0, high: 1 }, []);
    expect(voter.kind === "categories" && voter.entries.map((e) => e.label)).toEqual(["0", "1"]);
    const wide = valueScale({ kind: "integer", low: 0, high: 100 }, []);
    expect(wide).toEqual({ kind: "ramp", low: 0, high: 100 });
    const opinions = valueScale({ kind: "number", low: 0, high: 1 }, []);
    expect(valueColour(opinions, 0)).toBe(rampColour(0));
    expect(valueColour(opinions, 1)).toBe(rampColour(1));
    expect(valueLabel(opinions, 0.123456)).toBe("0.1235");
  });

  it("infers the scale from the values without an action", () => {
    const few = valueScale(null, [2, 0, null, 2]);
    expect(few.kind === "categories" && few.entries.map((e) => e.value)).toEqual([0, 2]);
    expect(valueScale(null, [0.5, 0.25])).toEqual({ kind: "ramp", low: 0.25, high: 0.5 });
    expect(valueScale(undefined, [null])).toEqual({ kind: "categories", entries: [] });
  });
});

describe("rampColour", () => {
  it("runs from viridis' purple to its yellow, clamped", () => {
    expect(rampColour(0)).toBe("rgb(68, 1, 84)");
    expect(rampColour(1)).toBe("rgb(253, 231, 37)");
    expect(rampColour(-3)).toBe(rampColour(0));
    expect(rampColour(Number.NaN)).toBe(rampColour(0));
    expect(rampColour(0.5)).toBe("rgb(33, 145, 140)");
  });
});

describe("the ego network", () => {
  it("puts the first neighbour at the top, then clockwise", () => {
    const [top, right] = circlePositions(4, 100, 100, 50);
    expect(top!.x).toBeCloseTo(100);
    expect(top!.y).toBeCloseTo(50);
    expect(right!.x).toBeCloseTo(150);
    expect(right!.y).toBeCloseTo(100);
  });

  it("counts the neighbours not drawn", () => {
    expect(moreText(12, 12, false)).toBeNull();
    expect(moreText(EGO_DRAWN + 1, EGO_DRAWN, false)).toBe("1 more neighbour not drawn");
    expect(moreText(1000, EGO_DRAWN, true)).toBe("950+ more neighbours not drawn");
  });
});

describe("heatmapRows", () => {
  it("gives a discrete range a row per value, in the bin np.histogram puts it", () => {
    const sir = heatmapRows(101, actionRange({ kind: "choice", options: ["S", "I", "R"] }));
    expect(sir).toEqual([
      { label: "S", bins: [0] },
      { label: "I", bins: [50] },
      { label: "R", bins: [100] },
    ]);
    const voter = heatmapRows(101, actionRange({ kind: "integer", low: 0, high: 1 }));
    expect(voter.map((r) => r.bins)).toEqual([[0], [100]]);
  });

  it("gives a continuous range a row per bin, labelled by its edges", () => {
    const rows = heatmapRows(4, actionRange({ kind: "number", low: 0, high: 1 }));
    expect(rows.map((r) => r.label)).toEqual(["0–0.25", "0.25–0.5", "0.5–0.75", "0.75–1"]);
  });

  it("merges many bins into at most 101 rows", () => {
    const rows = heatmapRows(1000, actionRange({ kind: "number", low: 0, high: 100 }));
    expect(rows.length).toBeLessThanOrEqual(101);
    expect(rows.flatMap((r) => r.bins)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
  });

  it("numbers the bins without a range", () => {
    expect(heatmapRows(2, null)).toEqual([
      { label: "bin 1", bins: [0] },
      { label: "bin 2", bins: [1] },
    ]);
    expect(heatmapRows(0, null)).toEqual([]);
  });
});

describe("opinionHeatmap", () => {
  it("scales each round's counts to shares of its valid values", () => {
    const sir = actionRange({ kind: "choice", options: ["S", "I", "R"] });
    const h = (s: number, i: number, r: number) => {
      const bins = new Array<number>(101).fill(0);
      bins[0] = s;
      bins[50] = i;
      bins[100] = r;
      return bins;
    };
    const map = opinionHeatmap([round(1, h(95, 5, 0)), round(2, h(80, 10, 10)), round(3, [])], sir);
    expect(map.rounds).toEqual([1, 2, 3]);
    expect(map.rows.map((r) => r.label)).toEqual(["S", "I", "R"]);
    expect(map.shares[0]).toEqual([0.95, 0.8, 0]);
    expect(map.shares[1]).toEqual([0.05, 0.1, 0]);
    expect(map.maxShare).toBe(0.95);
    expect(heatmapSummary(map)).toBe("Share of agents per value over 3 rounds, 3 value rows; round 1: most agents at S (95.0 %); round 2: most agents at S (80.0 %)");
  });

  it("is empty without histograms", () => {
    const map = opinionHeatmap([], null);
    expect(map.rows).toEqual([]);
    expect(heatmapSummary(map)).toBe("No round has a histogram yet");
  });
});

describe("heatColour", () => {
  it("leaves empty cells blank and lifts small shares by the square root", () => {
    expect(heatColour(0, 1)).toBeNull();
    expect(heatColour(0.5, 0)).toBeNull();
    expect(heatColour(1, 1)).toBe(rampColour(1));
    expect(heatColour(0.25, 1)).toBe(rampColour(0.5));
    expect(heatColour(2, 1)).toBe(rampColour(1));
  });
});

describe("runs", () => {
  it("knows the compartments and the bytes between workers", () => {
    expect(hasCompartments([{ name: "susceptible" }, { name: "infectious" }, { name: "recovered" }, { name: "attack_rate" }])).toBe(true);
    expect(hasCompartments([{ name: "susceptible" }, { name: "infectious" }])).toBe(false);
    expect(hasCompartments(undefined)).toBe(false);
    expect(anyNetworkBytes([round(1, [], 0)])).toBe(false);
    expect(anyNetworkBytes([round(1, [], 0), round(2, [], 12)])).toBe(true);
    expect(totalNetworkBytes([round(1, [], 30), round(2, [], 12)])).toBe(42);
  });
});

describe("storesChanges", () => {
  const kept = (n: number, stored: number | null) =>
    ({ round: n, n_valid: 8, n_invalid: 1, n_late: 1, n_lost: 0, decisions_stored: stored }) as unknown as SimulationRound;

  it("is true once a round wrote fewer rows than its decisions", () => {
    expect(storesChanges([kept(1, 10), kept(2, 3)])).toBe(true);
  });

  it("is false when every round wrote every decision, or rows were not counted", () => {
    expect(storesChanges([kept(1, 10), kept(2, 10)])).toBe(false);
    expect(storesChanges([kept(1, null), kept(2, null)])).toBe(false);
  });
});
