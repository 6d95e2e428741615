import type { SimulationDetail } from "../api/types";

/**
 * A run's config as YAML: as stored, and as a file `populace simulate FILE` runs again (the
 * CLI posts the file as is to POST /api/simulations, backend/cli_simulate.py). The manager
 * reads YAML with PyYAML (YAML 1.1), so anything a plain scalar could be misread as (yes, no,
 * on, numbers, dates) is double-quoted, JSON style, which YAML reads the same. Pure.
 */

/** Text written into the YAML verbatim: the 64-bit seed, kept a string here, as a bare integer. */
export class YamlRaw {
  constructor(readonly text: string) {}
}

const RESERVED = /^(?:y|n|yes|no|on|off|true|false|null|~)$/i;
const PLAIN = /^[A-Za-z_/][A-Za-z0-9_./-]*$/;
const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** JSON's string syntax, which YAML reads the same, with the characters YAML would not take raw escaped. */
function quoted(text: string): string {
  return JSON.stringify(text).replace(/[\u007f-\u009f\u2028\u2029\ufeff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function scalar(value: unknown): string {
  if (value instanceof YamlRaw) return value.text;
  if (value === null || value === undefined) return "null";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return "null";
    const text = String(value);
    // PyYAML reads "1e+21" as a string: its floats need a dot in the mantissa.
    return /e/i.test(text) && !text.includes(".") ? text.replace(/e/i, ".0e") : text;
  }
  const text = String(value);
  return PLAIN.test(text) && !RESERVED.test(text) ? text : quoted(text);
}

function key(name: string): string {
  return PLAIN_KEY.test(name) && !RESERVED.test(name) ? name : quoted(name);
}

function isBranch(value: unknown): value is Record<string, unknown> | unknown[] {
  if (value === null || typeof value !== "object" || value instanceof YamlRaw) return false;
  return Array.isArray(value) ? value.length > 0 : Object.keys(value).length > 0;
}

function emptyText(value: unknown): string {
  if (Array.isArray(value)) return "[]";
  if (value !== null && typeof value === "object" && !(value instanceof YamlRaw)) return "{}";
  return scalar(value);
}

function lines(value: Record<string, unknown> | unknown[], indent: string): string[] {
  const out: string[] = [];
  if (Array.isArray(value)) {
    for (const item of value) {
      if (isBranch(item)) {
        const [first, ...rest] = lines(item, `${indent}  `);
        out.push(`${indent}- ${first?.trimStart() ?? ""}`, ...rest);
      } else {
        out.push(`${indent}- ${emptyText(item)}`);
      }
    }
    return out;
  }
  for (const [name, child] of Object.entries(value)) {
    if (isBranch(child)) out.push(`${indent}${key(name)}:`, ...lines(child, `${indent}  `));
    else out.push(`${indent}${key(name)}: ${emptyText(child)}`);
  }
  return out;
}

/** A JSON-like value as block YAML (a mapping or sequence at the top). */
export function toYaml(value: Record<string, unknown> | unknown[]): string {
  if (!isBranch(value)) return `${emptyText(value)}\n`;
  return `${lines(value, "").join("\n")}\n`;
}

/** The same value without null entries (the manager's defaults are null for every optional field). */
export function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (value === null || typeof value !== "object" || value instanceof YamlRaw) return value;
  const out: Record<string, unknown> = {};
  for (const [name, child] of Object.entries(value)) {
    if (child !== null && child !== undefined) out[name] = withoutNulls(child);
  }
  return out;
}

/** The seed as YAML writes it: a bare integer when it is one, else as stored. */
function seedValue(seed: unknown): unknown {
  return typeof seed === "string" && /^\d+$/.test(seed) ? new YamlRaw(seed) : seed;
}

/** The stored config as YAML (nothing added or dropped). */
export function configYaml(config: Record<string, unknown>): string {
  return toYaml({ ...config, ...("seed" in config ? { seed: seedValue(config.seed) } : {}) });
}

/**
 * A file that plays the run again with `populace simulate FILE`: the same population, rounds,
 * config and seed (so the same agents draw the same numbers), defaults left out.
 */
export function cliFile(simulation: Pick<SimulationDetail, "id" | "name" | "population_id" | "rounds" | "seed" | "config">): string {
  const config = withoutNulls(simulation.config) as Record<string, unknown>;
  const file: Record<string, unknown> = {
    ...config,
    population_id: simulation.population_id,
    rounds: config.rounds ?? simulation.rounds,
    seed: seedValue(simulation.seed),
  };
  const header = [
    `# Simulation ${simulation.id} (${simulation.name.replace(/[\r\n]+/g, " ")}) as a file: run it again with`,
    `#   populace simulate simulation-${simulation.id}.yaml --manager URL`,
    "# Same population, config and seed. API keys stay on the workers (api_key_env names them).",
  ];
  return `${header.join("\n")}\n${toYaml(file)}`;
}
