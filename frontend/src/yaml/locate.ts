/**
 * Finds the line of a validation error's `loc` (e.g. ["body", "distributions", 0, "categories"])
 * in the YAML (or JSON) text the user typed, so the editor can show the error at the field.
 *
 * Not a YAML parser: it reads only the structure (block mappings and sequences, flow
 * collections, quoted keys, comments, block scalars) and remembers where each key and item
 * starts. The manager parses for real; this only has to point at the right line, and falls
 * back to the deepest part of the path it could find.
 */

export type LocPart = string | number;

interface MapNode {
  kind: "map";
  line: number;
  entries: Map<string, { line: number; value: YamlNode }>;
}
interface SeqNode {
  kind: "seq";
  line: number;
  items: YamlNode[];
}
interface ScalarNode {
  kind: "scalar";
  line: number;
}
type YamlNode = MapNode | SeqNode | ScalarNode;

/** A non-blank line's content after its indentation, without a trailing comment. */
interface Token {
  line: number; // 0-based
  col: number;
  text: string;
}

function stripComment(text: string): string {
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") {
      // Only a quote that starts a scalar opens a string (not the apostrophe in "don't").
      if (i === 0 || /[\s:,[{-]/.test(text[i - 1] ?? "")) quote = c;
    } else if (c === "#" && (i === 0 || /\s/.test(text[i - 1] ?? ""))) {
      return text.slice(0, i).trimEnd();
    }
  }
  return text.trimEnd();
}

function tokenize(lines: string[]): Token[] {
  const tokens: Token[] = [];
  lines.forEach((raw, line) => {
    const text = stripComment(raw.replace(/\t/g, " "));
    const trimmed = text.trimStart();
    if (!trimmed || trimmed === "---" || trimmed === "...") return;
    tokens.push({ line, col: text.length - trimmed.length, text: trimmed });
  });
  return tokens;
}

const DASH = /^-(\s+|$)/;

/** `key: rest` with a plain or quoted key; null when the text is not a mapping entry. */
function splitKey(text: string): { key: string; restOffset: number } | null {
  let key: string;
  let after: number;
  const quote = text[0];
  if (quote === '"' || quote === "'") {
    const end = text.indexOf(quote, 1);
    if (end < 0) return null;
    key = text.slice(1, end);
    after = end + 1;
    while (text[after] === " ") after++;
    if (text[after] !== ":") return null;
  } else {
    const match = /:(\s|$)/.exec(text);
    if (!match) return null;
    key = text.slice(0, match.index).trim();
    after = match.index;
  }
  let rest = after + 1;
  while (text[rest] === " ") rest++;
  return { key, restOffset: rest };
}

class Locator {
  private readonly lines: string[];
  private readonly tokens: Token[];
  private i = 0;

  constructor(text: string) {
    this.lines = text.split(/\r?\n/);
    this.tokens = tokenize(this.lines);
  }

  parseDocument(): YamlNode | null {
    const first = this.tokens[0];
    if (!first) return null;
    return this.parseBlock(first.col);
  }

  private peek(): Token | undefined {
    return this.tokens[this.i];
  }

  private parseBlock(indent: number): YamlNode {
    const tok = this.peek() as Token;
    if (DASH.test(tok.text)) return this.parseSeq(indent);
    if (splitKey(tok.text)) return this.parseMap(indent);
    return this.parseInline(tok.text, tok.line, tok.col, indent);
  }

  private parseSeq(indent: number): SeqNode {
    const node: SeqNode = { kind: "seq", line: (this.peek() as Token).line, items: [] };
    for (let tok = this.peek(); tok && tok.col >= indent; tok = this.peek()) {
      if (tok.col > indent) {
        this.i++; // a continuation we do not model
        continue;
      }
      if (!DASH.test(tok.text)) break; // the next key of a mapping at our indentation ("key:\n- a\nnext:")
      this.i++;
      const offset = (DASH.exec(tok.text) as RegExpExecArray)[0].length;
      const rest = tok.text.slice(offset);
      const restCol = tok.col + offset;
      if (!rest) {
        node.items.push(this.parseValue("", tok.line, restCol, indent, false));
      } else if (DASH.test(rest) || (splitKey(rest) && !/^[[{]/.test(rest))) {
        // "- key: value" (or "- - x"): the item is a block that starts on this line.
        this.tokens.splice(this.i, 0, { line: tok.line, col: restCol, text: rest });
        node.items.push(this.parseBlock(restCol));
      } else {
        node.items.push(this.parseInline(rest, tok.line, restCol, indent));
      }
    }
    return node;
  }

  private parseMap(indent: number): MapNode {
    const node: MapNode = { kind: "map", line: (this.peek() as Token).line, entries: new Map() };
    for (let tok = this.peek(); tok && tok.col >= indent; tok = this.peek()) {
      const split = tok.col === indent && !DASH.test(tok.text) ? splitKey(tok.text) : null;
      if (!split) {
        this.i++;
        continue;
      }
      this.i++;
      const rest = tok.text.slice(split.restOffset);
      const value = this.parseValue(rest, tok.line, tok.col + split.restOffset, indent, true);
      if (!node.entries.has(split.key)) node.entries.set(split.key, { line: tok.line, value });
    }
    return node;
  }

  /** The value after "key:" or "-": inline on this line, or a block on the following lines. */
  private parseValue(rest: string, line: number, col: number, parentIndent: number, isMapValue: boolean): YamlNode {
    if (rest) return this.parseInline(rest, line, col, parentIndent);
    const next = this.peek();
    // A mapping's sequence may sit at the mapping's own indentation ("key:\n- a").
    if (next && (next.col > parentIndent || (isMapValue && next.col === parentIndent && DASH.test(next.text)))) {
      return this.parseBlock(next.col);
    }
    return { kind: "scalar", line };
  }

  private parseInline(rest: string, line: number, col: number, parentIndent: number): YamlNode {
    if (rest.startsWith("{") || rest.startsWith("[")) {
      const flow = new FlowReader(this.lines, line, col);
      const node = flow.readValue();
      while (this.peek() && (this.peek() as Token).line <= flow.line) this.i++;
      return node;
    }
    if (/^[|>]/.test(rest)) {
      // A block scalar: its lines are text, not structure.
      while (this.peek() && (this.peek() as Token).col > parentIndent) this.i++;
    }
    return { kind: "scalar", line };
  }
}

/** Reads a flow collection (`{a: 1, b: [x, y]}`, possibly over several lines, or JSON). */
class FlowReader {
  private readonly lines: string[];
  line: number;
  private col: number;

  constructor(lines: string[], line: number, col: number) {
    this.lines = lines;
    this.line = line;
    this.col = col;
  }

  private char(): string | undefined {
    return this.lines[this.line]?.[this.col];
  }

  private skipSpace(): void {
    for (;;) {
      const text = this.lines[this.line];
      if (text === undefined) return;
      const c = text[this.col];
      if (c === undefined || (c === "#" && (this.col === 0 || /\s/.test(text[this.col - 1] ?? "")))) {
        this.line++;
        this.col = 0;
      } else if (/\s/.test(c)) {
        this.col++;
      } else {
        return;
      }
    }
  }

  readValue(): YamlNode {
    this.skipSpace();
    const line = this.line;
    const c = this.char();
    if (c === "{") return this.readMap();
    if (c === "[") return this.readSeq();
    this.readScalar(false);
    return { kind: "scalar", line };
  }

  private readMap(): MapNode {
    const node: MapNode = { kind: "map", line: this.line, entries: new Map() };
    this.col++;
    for (;;) {
      this.skipSpace();
      const c = this.char();
      if (c === undefined) return node;
      if (c === "}") {
        this.col++;
        return node;
      }
      if (c === ",") {
        this.col++;
        continue;
      }
      const line = this.line;
      const key = this.readScalar(true);
      this.skipSpace();
      let value: YamlNode = { kind: "scalar", line };
      if (this.char() === ":") {
        this.col++;
        value = this.readValue();
      }
      if (!node.entries.has(key)) node.entries.set(key, { line, value });
    }
  }

  private readSeq(): SeqNode {
    const node: SeqNode = { kind: "seq", line: this.line, items: [] };
    this.col++;
    for (;;) {
      this.skipSpace();
      const c = this.char();
      if (c === undefined) return node;
      if (c === "]") {
        this.col++;
        return node;
      }
      if (c === ",") {
        this.col++;
        continue;
      }
      node.items.push(this.readValue());
    }
  }

  /** A quoted or plain scalar on the current line; returns its text. */
  private readScalar(isKey: boolean): string {
    const text = this.lines[this.line] ?? "";
    const quote = text[this.col];
    if (quote === '"' || quote === "'") {
      let end = this.col + 1;
      while (end < text.length && (text[end] !== quote || (quote === '"' && text[end - 1] === "\\"))) end++;
      const value = text.slice(this.col + 1, end);
      this.col = Math.min(text.length, end + 1);
      return value;
    }
    const start = this.col;
    while (this.col < text.length) {
      const c = text[this.col] as string;
      if (c === "," || c === "]" || c === "}") break;
      if (isKey && c === ":" && /[\s,[\]{}]|^$/.test(text[this.col + 1] ?? "")) break;
      if (c === "#" && /\s/.test(text[this.col - 1] ?? "")) break;
      this.col++;
    }
    if (this.col === start) this.col++; // never stall on a stray character
    return text.slice(start, this.col).trim();
  }
}

export interface LocatedError {
  /** 1-based line in the text, or null when nothing in the path could be found. */
  line: number | null;
  /** True when the whole path was found; otherwise `line` is that of its deepest part that exists. */
  exact: boolean;
}

/** The line of `loc` (FastAPI's, with or without the leading "body") in `text`. */
export function locateInYaml(text: string, loc: readonly LocPart[]): LocatedError {
  const path = loc[0] === "body" ? loc.slice(1) : loc;
  let node: YamlNode | null;
  try {
    node = new Locator(text).parseDocument();
  } catch {
    node = null;
  }
  if (!node) return { line: null, exact: false };
  let line: number | null = null;
  for (const part of path) {
    let next: { line: number; value: YamlNode } | undefined;
    if (node.kind === "map") {
      next = node.entries.get(String(part));
    } else if (node.kind === "seq" && typeof part === "number") {
      const item = node.items[part];
      next = item && { line: item.line, value: item };
    }
    if (!next) return { line: line ?? (path.length === 0 ? node.line + 1 : null), exact: path.length === 0 };
    line = next.line + 1;
    node = next.value;
  }
  return { line: line ?? node.line + 1, exact: true };
}

/** "distributions[0].categories" for ["body", "distributions", 0, "categories"]. */
export function formatLoc(loc: readonly LocPart[]): string {
  const path = loc[0] === "body" ? loc.slice(1) : loc;
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(part)) out += out ? `.${part}` : part;
    else out += `[${JSON.stringify(part)}]`;
  }
  return out || "(document)";
}

/** A syntax error names its place in the message ("line 4, column 7: ..."); the path cannot. */
export function lineFromMessage(message: string): number | null {
  const match = /\bline (\d+)/.exec(message);
  return match ? Number(match[1]) : null;
}
