import type uPlot from "uplot";

/**
 * A value axis as wide as its longest tick label, so the axis title never overlaps the ticks
 * ("12,000" is wider than uPlot's fixed 50 px). The usual uPlot recipe: measure the labels.
 */
export function fitTickLabels(u: uPlot, values: string[] | null, axisIdx: number, cycleNum: number): number {
  const axis = u.axes[axisIdx] as uPlot.Axis & { _size?: number; font?: unknown };
  if (cycleNum > 1 && axis._size !== undefined) return axis._size;
  let size = (axis.ticks?.size ?? 10) + (axis.gap ?? 5) + 4;
  const longest = (values ?? []).reduce((widest, v) => (String(v).length > widest.length ? String(v) : widest), "");
  if (longest) {
    const font = Array.isArray(axis.font) ? String(axis.font[0]) : undefined;
    if (font) u.ctx.font = font;
    // Canvas text is measured in device pixels; the axis size is in CSS pixels.
    size += u.ctx.measureText(longest).width / ((globalThis as { devicePixelRatio?: number }).devicePixelRatio || 1);
  }
  return Math.ceil(size);
}
