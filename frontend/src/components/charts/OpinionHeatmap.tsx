import { type PointerEvent, useEffect, useMemo, useRef, useState } from "react";
import type { SimulationRound } from "../../api/types";
import { type actionRange, heatColour, heatmapSummary, opinionHeatmap, rampColour } from "../../state/networks";

const HEIGHT = 260;
// Label every row of a discrete range up to this many; more, and only the ends and the middle.
const LABELLED_ROWS = 12;

interface OpinionHeatmapProps {
  rounds: readonly SimulationRound[];
  /** The run's value range (its plugin's action, or the guessing game's rule); null: bins by number. */
  range: ReturnType<typeof actionRange>;
  /** Open until the reader chooses (network runs: the population has a graph). */
  defaultOpen: boolean;
}

/**
 * Where the agents' values were, round by round: x the round, y the value (the rounds'
 * histograms, a row per value of a choice or a small integer range, else per bin), colour the
 * share of the round's valid values in the cell. Drawn on a canvas from the histograms the
 * rounds already carry (nothing per agent); in a panel that folds away.
 */
export function OpinionHeatmap({ rounds, range, defaultOpen }: OpinionHeatmapProps) {
  // The reader's choice once made; until then the default (which follows the population's load).
  const [chosen, setChosen] = useState<boolean | null>(null);
  const open = chosen ?? defaultOpen;
  return (
    <section aria-labelledby="heatmap-heading" data-testid="opinion-heatmap">
      <div className="section-title">
        <h2 id="heatmap-heading">Values over rounds</h2>
        <button type="button" className="button plain small" aria-expanded={open} aria-controls="heatmap-panel" onClick={() => setChosen(!open)}>
          {open ? "Hide heatmap" : "Show heatmap"}
        </button>
      </div>
      {open && (
        <div id="heatmap-panel">
          <HeatmapCanvas rounds={rounds} range={range} />
        </div>
      )}
    </section>
  );
}

function HeatmapCanvas({ rounds, range }: { rounds: readonly SimulationRound[]; range: ReturnType<typeof actionRange> }) {
  const map = useMemo(() => opinionHeatmap(rounds, range), [rounds, range]);
  const canvas = useRef<HTMLCanvasElement>(null);
  const [width, setWidth] = useState(0);
  const [hover, setHover] = useState<{ column: number; row: number } | null>(null);
  const columns = map.rounds.length;
  const rows = map.rows.length;

  // The canvas follows its box's width (the page's), at the screen's pixel density.
  useEffect(() => {
    const element = canvas.current;
    if (!element) return;
    const observer = new ResizeObserver(() => setWidth(element.clientWidth));
    observer.observe(element);
    setWidth(element.clientWidth);
    return () => observer.disconnect();
  }, []);

  useEffect(() => {
    const element = canvas.current;
    if (!element || width <= 0) return;
    const ratio = window.devicePixelRatio || 1;
    element.width = Math.round(width * ratio);
    element.height = Math.round(HEIGHT * ratio);
    const context = element.getContext("2d");
    if (!context) return;
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.clearRect(0, 0, width, HEIGHT);
    if (columns === 0 || rows === 0) return;
    const cellW = width / columns;
    const cellH = HEIGHT / rows;
    let painted = 0;
    for (let r = 0; r < rows; r += 1) {
      const shares = map.shares[r]!;
      // Row 0 (the lowest value) at the bottom.
      const y = HEIGHT - (r + 1) * cellH;
      for (let c = 0; c < columns; c += 1) {
        const colour = heatColour(shares[c]!, map.maxShare);
        if (colour === null) continue;
        context.fillStyle = colour;
        // A hair wider than the cell: no seams between neighbouring cells.
        context.fillRect(c * cellW, y, cellW + 0.5, cellH + 0.5);
        painted += 1;
      }
    }
    element.dataset.cells = String(painted);
  }, [map, width, columns, rows]);

  function onPointerMove(event: PointerEvent<HTMLCanvasElement>) {
    const rect = event.currentTarget.getBoundingClientRect();
    if (columns === 0 || rows === 0 || rect.width <= 0) return;
    const column = Math.min(columns - 1, Math.max(0, Math.floor(((event.clientX - rect.left) / rect.width) * columns)));
    const row = Math.min(rows - 1, Math.max(0, rows - 1 - Math.floor(((event.clientY - rect.top) / rect.height) * rows)));
    setHover({ column, row });
  }

  const summary = heatmapSummary(map);
  const labelled = rows <= LABELLED_ROWS ? map.rows.map((_, i) => i) : [0, Math.floor((rows - 1) / 2), rows - 1];
  const readout =
    hover && map.rows[hover.row] && map.rounds[hover.column] !== undefined
      ? `Round ${map.rounds[hover.column]}, ${map.rows[hover.row]!.label}: ${(map.shares[hover.row]![hover.column]! * 100).toFixed(1)} % of agents`
      : "";
  const top = map.maxShare;

  if (columns === 0 || rows === 0) return <p className="empty">No round has a histogram yet.</p>;
  return (
    <figure className="heatmap" data-rows={rows} data-rounds={columns}>
      <div className="heatmap-plot">
        <div className="heatmap-y muted" aria-hidden="true">
          {labelled.map((i) => (
            // Each label sits at its row's middle (rows drawn bottom up).
            <span key={i} style={{ bottom: `${((i + 0.5) / rows) * 100}%` }}>
              {map.rows[i]!.label}
            </span>
          ))}
        </div>
        <canvas
          ref={canvas}
          className="heatmap-canvas"
          style={{ height: HEIGHT }}
          role="img"
          aria-label={summary}
          data-testid="heatmap-canvas"
          onPointerMove={onPointerMove}
          onPointerLeave={() => setHover(null)}
        />
      </div>
      <div className="heatmap-x muted" aria-hidden="true">
        <span>round {map.rounds[0]}</span>
        <span>Round</span>
        <span>round {map.rounds[columns - 1]}</span>
      </div>
      <figcaption className="heatmap-caption">
        <span className="muted">Share of the round&apos;s valid values:</span>
        <span className="heatmap-scale" aria-hidden="true">
          <span>0 %</span>
          <span className="ego-ramp" style={{ background: `linear-gradient(to right, ${[0.02, 0.25, 0.5, 0.75, 1].map((t) => `${rampColour(Math.sqrt(t))} ${t * 100}%`).join(", ")})` }} />
          <span>{(top * 100).toFixed(1)} %</span>
        </span>
        <output className="chart-readout" aria-live="polite" data-testid="heatmap-readout">
          {readout}
        </output>
      </figcaption>
    </figure>
  );
}
