import type uPlot from "uplot";
import { describe, expect, it } from "vitest";
import { fitTickLabels } from "./axes";

// A chart whose canvas measures 7 px per character, on a screen of pixel ratio 1.
function fakeChart(axis: Record<string, unknown> = {}) {
  const ctx = { font: "", measureText: (text: string) => ({ width: text.length * 7 }) };
  return { axes: [{}, { ticks: { size: 10 }, gap: 5, font: ["12px sans-serif", 12], ...axis }], ctx } as unknown as uPlot;
}

describe("fitTickLabels", () => {
  it("widens a value axis to its longest tick label, past uPlot's fixed 50 px", () => {
    const u = fakeChart();
    // 10 tick + 5 gap + 4 spare + 6 characters · 7 px.
    expect(fitTickLabels(u, ["0", "5,000", "12,000"], 1, 0)).toBe(61);
    expect((u as unknown as { ctx: { font: string } }).ctx.font).toBe("12px sans-serif");
  });

  it("keeps the size it settled on in later layout cycles, and needs no labels", () => {
    expect(fitTickLabels(fakeChart({ _size: 44 }), ["123456789"], 1, 2)).toBe(44);
    expect(fitTickLabels(fakeChart(), null, 1, 0)).toBe(19);
  });
});
