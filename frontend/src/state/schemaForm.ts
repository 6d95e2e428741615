/**
 * Form fields drawn from a JSON Schema: a plugin's `params_schema` and its policies' (GET
 * /api/plugins), and the manager's config models in its OpenAPI document (for the ranges and
 * keys of the launch form and the YAML editors). Pure, unit-tested; the component that draws
 * the fields is components/SchemaFields.tsx.
 */

import type { FieldFacts } from "./formErrors";
import { numberText } from "./formErrors";

export type JsonSchema = { [key: string]: unknown };

export interface SchemaField {
  /** Where the value goes in the params: ["rule", "preset"]. */
  path: string[];
  /** The path joined by dots: the field's key in the form's values and errors. */
  key: string;
  label: string;
  kind: "integer" | "number" | "boolean" | "choice" | "text";
  description: string | null;
  /** The schema's default, as the form shows it ("" when none). */
  initial: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  choices?: readonly (string | number)[];
  /** The titles of the objects the field sits in ("Rule"), for a fieldset's legend. */
  group: string | null;
}

const asSchema = (value: unknown): JsonSchema | null => (value && typeof value === "object" && !Array.isArray(value) ? (value as JsonSchema) : null);
const num = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined);

/** "group_size" → "Group size": a label for a field the schema gives no title. */
export function humanise(key: string): string {
  const words = key.replace(/_/g, " ").trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** The schema a `$ref` points at ("#/$defs/X", "#/components/schemas/X"), within `root`. */
export function resolveRef(root: JsonSchema, node: JsonSchema): JsonSchema {
  let current = node;
  for (let hops = 0; hops < 16 && typeof current.$ref === "string"; hops++) {
    const parts = current.$ref.replace(/^#\//, "").split("/");
    let target: unknown = root;
    for (const part of parts) target = asSchema(target)?.[part];
    const found = asSchema(target);
    if (!found) return {};
    // Keys beside a $ref (title, description, default) win over the target's.
    const { $ref: _ref, ...beside } = current;
    current = { ...found, ...beside };
  }
  return current;
}

/** The variants of an anyOf / oneOf, resolved, without `null` (an optional field's). */
function variants(root: JsonSchema, node: JsonSchema): { options: JsonSchema[]; nullable: boolean } {
  const list = (Array.isArray(node.anyOf) ? node.anyOf : Array.isArray(node.oneOf) ? node.oneOf : null) as unknown[] | null;
  if (!list) return { options: [node], nullable: false };
  const options = list.map((v) => resolveRef(root, asSchema(v) ?? {}));
  const nonNull = options.filter((v) => v.type !== "null");
  return { options: nonNull, nullable: nonNull.length < options.length };
}

/** One field's schema, resolved: a single non-null variant, merged with the outer keys. */
function single(root: JsonSchema, node: JsonSchema): JsonSchema {
  const resolved = resolveRef(root, node);
  const { options } = variants(root, resolved);
  if (options.length !== 1 || options[0] === resolved) return resolved;
  const { anyOf: _a, oneOf: _o, ...outer } = resolved;
  return { ...options[0], ...outer };
}

function choicesOf(node: JsonSchema): (string | number)[] | undefined {
  if (Array.isArray(node.enum)) return node.enum.filter((v): v is string | number => typeof v === "string" || typeof v === "number");
  if (typeof node.const === "string" || typeof node.const === "number") return [node.const];
  return undefined;
}

function initialText(value: unknown): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "object") return "";
  return String(value);
}

/**
 * The fields a form draws for a schema's properties, nested objects flattened (with their
 * title as group); what a form cannot draw (lists, free mappings) is in `skipped`, and keeps
 * its default.
 */
export function schemaFields(schema: JsonSchema, root: JsonSchema = schema): { fields: SchemaField[]; skipped: string[] } {
  const fields: SchemaField[] = [];
  const skipped: string[] = [];
  function walk(node: JsonSchema, path: string[], group: string | null, defaults: Record<string, unknown>) {
    const properties = asSchema(node.properties) ?? {};
    for (const [name, raw] of Object.entries(properties)) {
      const field = single(root, asSchema(raw) ?? {});
      const at = [...path, name];
      const key = at.join(".");
      const fallback = field.default !== undefined ? field.default : defaults[name];
      const label = typeof field.title === "string" && field.title ? field.title : humanise(name);
      const choices = choicesOf(field);
      const base = {
        path: at,
        key,
        label,
        description: typeof field.description === "string" ? field.description : null,
        initial: initialText(fallback),
        group,
      };
      if (choices) fields.push({ ...base, kind: "choice", choices });
      else if (field.type === "integer" || field.type === "number") {
        fields.push({
          ...base,
          kind: field.type,
          minimum: num(field.minimum),
          maximum: num(field.maximum),
          exclusiveMinimum: num(field.exclusiveMinimum),
          exclusiveMaximum: num(field.exclusiveMaximum),
        });
      } else if (field.type === "boolean") fields.push({ ...base, kind: "boolean", initial: fallback === true ? "true" : "false" });
      else if (field.type === "string") fields.push({ ...base, kind: "text" });
      else if (field.type === "object" && asSchema(field.properties)) {
        // A nested model's own title is its class name ("RuleConfig"): the property's title, or its name.
        const own = asSchema(raw)?.title;
        walk(field, at, typeof own === "string" && own ? own : humanise(name), asSchema(fallback) ?? {});
      }
      else skipped.push(key);
    }
  }
  walk(resolveRef(root, schema), [], null, {});
  return { fields, skipped };
}

/** The values a form starts with: every field's default, as text. */
export function initialValues(fields: readonly SchemaField[]): Record<string, string> {
  return Object.fromEntries(fields.map((f) => [f.key, f.initial]));
}

/** The form's values from params (a run's stored config, for a clone); missing ones keep the defaults. */
export function valuesFromParams(fields: readonly SchemaField[], params: Record<string, unknown>): Record<string, string> {
  const values = initialValues(fields);
  for (const field of fields) {
    let value: unknown = params;
    for (const part of field.path) value = asSchema(value)?.[part];
    if (value !== undefined && value !== null && typeof value !== "object") values[field.key] = String(value);
  }
  return values;
}

/**
 * The params the manager takes from the form's values. Numbers go as numbers when they read as
 * one, else as typed (the manager then names the field); a blank field is left out, so its
 * default applies.
 */
export function paramsFromValues(fields: readonly SchemaField[], values: Record<string, string>): Record<string, unknown> {
  const params: Record<string, unknown> = {};
  for (const field of fields) {
    const text = (values[field.key] ?? "").trim();
    if (text === "") continue;
    let value: unknown = text;
    if (field.kind === "boolean") value = text === "true";
    else if (field.kind === "integer" || field.kind === "number" || (field.kind === "choice" && field.choices?.every((c) => typeof c === "number"))) {
      const n = Number(text);
      value = Number.isFinite(n) ? n : text;
    }
    let node = params;
    for (const part of field.path.slice(0, -1)) node = (node[part] ??= {}) as Record<string, unknown>;
    node[field.path[field.path.length - 1]!] = value;
  }
  return params;
}

/** The attributes of a number input for the field's range: min, max and step. */
export function inputBounds(field: Pick<SchemaField, "kind" | "minimum" | "maximum">): { min?: number; max?: number; step: string } {
  const bounds: { min?: number; max?: number; step: string } = { step: field.kind === "integer" ? "1" : "any" };
  if (field.minimum !== undefined) bounds.min = field.minimum;
  if (field.maximum !== undefined) bounds.max = field.maximum;
  return bounds;
}

/** "1 to 1,000,000", "more than 0, at most 1,000", "at least 0": the range a field allows, for its hint. */
export function rangeHint(field: Pick<SchemaField, "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum">): string | null {
  const low = field.minimum !== undefined ? `at least ${numberText(field.minimum)}` : field.exclusiveMinimum !== undefined ? `more than ${numberText(field.exclusiveMinimum)}` : null;
  const high = field.maximum !== undefined ? `at most ${numberText(field.maximum)}` : field.exclusiveMaximum !== undefined ? `less than ${numberText(field.exclusiveMaximum)}` : null;
  if (field.minimum !== undefined && field.maximum !== undefined) return `${numberText(field.minimum)} to ${numberText(field.maximum)}`;
  return [low, high].filter(Boolean).join(", ") || null;
}

export const capitalised = (text: string): string => text.charAt(0).toUpperCase() + text.slice(1);

/** "Tokens each agent holds every round. A whole number, 1 to 1,000,000": the help under a field. */
export function fieldHint(field: SchemaField): string | undefined {
  const range = field.kind === "integer" || field.kind === "number" ? rangeHint(field) : null;
  const allowed = range === null ? null : field.kind === "integer" ? `A whole number, ${range}` : /^-?\d/.test(range) ? `From ${range}` : capitalised(range);
  const text = [field.description && capitalised(field.description.replace(/\.$/, "")), allowed].filter(Boolean).join(". ");
  return text || undefined;
}

/** What the error phrasing needs to know of a field. */
export function factsOf(field: SchemaField): FieldFacts {
  return {
    label: field.label,
    minimum: field.minimum,
    maximum: field.maximum,
    exclusiveMinimum: field.exclusiveMinimum,
    exclusiveMaximum: field.exclusiveMaximum,
    integer: field.kind === "integer",
    choices: field.choices,
  };
}

/**
 * The schema at a validation error's `loc` inside `start` (a model of an OpenAPI document, or a
 * plugin's params schema), following $refs, list items, mappings' values and unions (a
 * discriminated union's tag in the loc picks its variant). Null where the loc leaves the schema.
 */
export function schemaAt(root: JsonSchema, start: JsonSchema, loc: ReadonlyArray<string | number>): JsonSchema | null {
  let node: JsonSchema | null = resolveRef(root, start);
  for (const part of loc) {
    if (!node) return null;
    const { options } = variants(root, node);
    let next: JsonSchema | null = null;
    for (const option of options) {
      if (typeof part === "number" || option.type === "array") {
        const items = asSchema(option.items);
        if (items && typeof part === "number") next = resolveRef(root, items);
      } else {
        const property = asSchema(asSchema(option.properties)?.[part]);
        const values = asSchema(option.additionalProperties);
        if (property) next = resolveRef(root, property);
        else if (values) next = resolveRef(root, values);
      }
      if (next) break;
    }
    // A discriminated union's tag ("policy", "level_k", ...): the variant whose kind it is.
    if (!next && typeof part === "string") {
      next =
        options.find((o) => {
          const kind = asSchema(asSchema(o.properties)?.kind);
          return kind !== null && (kind.const === part || (Array.isArray(kind.enum) && kind.enum.includes(part)));
        }) ?? null;
    }
    node = next;
  }
  return node;
}

/** The range, kind, choices and sibling keys the schema gives the field at `loc`. */
export function schemaFacts(root: JsonSchema, start: JsonSchema, loc: ReadonlyArray<string | number>): Omit<FieldFacts, "label"> {
  const facts: Omit<FieldFacts, "label"> = {};
  const parent = loc.length > 0 ? schemaAt(root, start, loc.slice(0, -1)) : null;
  if (parent) {
    const keys = variants(root, parent).options.flatMap((o) => Object.keys(asSchema(o.properties) ?? {}));
    if (keys.length > 0) facts.knownKeys = [...new Set(keys)];
  }
  const node = schemaAt(root, start, loc);
  if (node) {
    const field = single(root, node);
    facts.minimum = num(field.minimum);
    facts.maximum = num(field.maximum);
    facts.exclusiveMinimum = num(field.exclusiveMinimum);
    facts.exclusiveMaximum = num(field.exclusiveMaximum);
    facts.integer = field.type === "integer";
    facts.choices = choicesOf(field);
  }
  return facts;
}

/** The bounds an input for the field at `loc` carries (none until the schema is known). */
export function boundsAt(root: JsonSchema | null, model: string, loc: ReadonlyArray<string | number>): { min?: number; max?: number; step?: string } {
  const start = root ? modelSchema(root, model) : null;
  if (!root || !start) return {};
  const node = schemaAt(root, start, loc);
  if (!node) return {};
  const field = single(root, node);
  const kind = field.type === "integer" ? "integer" : "number";
  return inputBounds({ kind, minimum: num(field.minimum), maximum: num(field.maximum) });
}

/** A model of the OpenAPI document by name ("SimulationConfig"). */
export function modelSchema(openapi: JsonSchema, name: string): JsonSchema | null {
  return asSchema(asSchema(asSchema(openapi.components)?.schemas)?.[name]);
}
