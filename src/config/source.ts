// The config file as text and YAML document, so that every problem can say where it is:
// FILE:LINE:COLUMN, the line itself (secret values masked) and a caret under the spot.
// A problem's config path (`auth.users[0].password_hash`) is looked up in the document's
// nodes; a missing key points at the block that lacks it.
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node, type YAMLError } from "yaml";
import type { ErrorDetail } from "../errors.js";
import { isSecretPath, maskLine } from "./secret-mask.js";

/** A config problem with where it is in the file, when it is anywhere. */
export interface ConfigProblem extends ErrorDetail {
  file?: string;
  line?: number;
  column?: number;
  /** The lines shown under the problem: the file's line(s), then a caret line. */
  snippet?: string[];
  /** Point at the key rather than its value (an unknown key). */
  on?: "key";
}

type Segment = string | number;

/** The characters of a file's line a snippet shows at most (a terminal's 80 columns, less the margin). */
const SNIPPET_WIDTH = 70;

/** `a.b[0].c` back into its segments: ["a", "b", 0, "c"]. */
export function pathSegments(path: string): Segment[] {
  const out: Segment[] = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) out.push(m[2] !== undefined ? Number(m[2]) : (m[1] ?? ""));
  return out;
}

interface Found {
  /** Every segment of the path has a node. */
  whole: boolean;
  /** Where to point: the value, or its key. */
  keyAt?: number;
  valueAt?: number;
}

export class ConfigSource {
  readonly doc: Document.Parsed;
  private readonly lines: string[];
  private readonly counter = new LineCounter();

  constructor(
    readonly file: string,
    private readonly text: string,
  ) {
    this.doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter: this.counter });
    this.lines = text.split(/\r?\n/);
  }

  /** The node at `path`, or how far the path got (the block that lacks a key). */
  private find(path: Segment[]): Found {
    let node: unknown = this.doc.contents;
    let found: Found = { whole: path.length === 0, valueAt: (node as Node | null)?.range?.[0] ?? 0 };
    for (const [i, seg] of path.entries()) {
      let keyAt: number | undefined;
      if (isMap(node)) {
        const pair = node.items.find((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === String(seg));
        if (!pair) return found;
        keyAt = (pair.key as Node | null)?.range?.[0];
        node = pair.value;
      } else if (isSeq(node) && typeof seg === "number" && seg < node.items.length) {
        node = node.items[seg];
      } else {
        return found;
      }
      const valueAt = (node as Node | null)?.range?.[0];
      // an empty value (`key:`) has a zero-width range where the line ends: its key is the spot
      const empty = node === null || (isScalar(node) && node.value === null);
      found = { whole: i === path.length - 1, keyAt, valueAt: empty ? (keyAt ?? valueAt) : valueAt };
    }
    return found;
  }

  /** The problem with its FILE:LINE:COLUMN and snippet (a path that is no node of the file: the file alone). */
  locate(detail: ConfigProblem): ConfigProblem {
    if (detail.path.startsWith("(")) return { ...detail, file: this.file };
    const path = pathSegments(detail.path);
    const found = this.find(path);
    // a missing key: the block that should hold it (its key); otherwise the value, or the key asked for
    const offset = !found.whole ? (found.keyAt ?? found.valueAt) : detail.on === "key" ? (found.keyAt ?? found.valueAt) : found.valueAt;
    if (offset === undefined) return { ...detail, file: this.file };
    const { line, col } = this.counter.linePos(offset);
    // a top-level key the file lacks has no line of its own to show
    const snippet = !found.whole && path.length === 1 ? undefined : this.snippet(line, col, found.whole && isSecretPath(path));
    return { ...detail, file: this.file, line, column: col, snippet };
  }

  /** Line `line` (and `before` lines above it) with a caret under column `col`; a secret value masked. */
  snippet(line: number, col: number, secretHere = false, before = 0): string[] {
    const width = String(line).length;
    // a long line (a device as one flow mapping) is shown around the column, so that it fits a terminal
    const from = col > SNIPPET_WIDTH - 20 ? col - 1 - (SNIPPET_WIDTH >> 1) : 0;
    const cut = (text: string) => {
      const part = text.slice(from, from + SNIPPET_WIDTH);
      return `${from > 0 ? "..." : ""}${part}${text.length > from + SNIPPET_WIDTH ? "..." : ""}`;
    };
    const out: string[] = [];
    for (let n = Math.max(1, line - before); n <= line; n++) {
      let text = maskLine(this.lines[n - 1] ?? "");
      // a secret whose key is on another line (an item of a list of keys): the rest of the line
      if (n === line && secretHere && !text.slice(col - 1).startsWith("***")) text = text.slice(0, col - 1) + "***";
      out.push(`${String(n).padStart(width)} | ${cut(text)}`);
    }
    out.push(`${" ".repeat(width)} | ${" ".repeat(Math.max(0, col - 1 - from + (from > 0 ? 3 : 0)))}^`);
    return out;
  }

  /** The YAML syntax errors, one per line, each at the line to fix, in the file's order. */
  syntaxProblems(): ConfigProblem[] {
    const errors = this.doc.errors;
    // An over-indented key gives two errors at the value above it; the one that spans to the key's line says where it is.
    const spanning = new Set(errors.filter((e) => e.code === "MULTILINE_IMPLICIT_KEY").map((e) => e.pos[0]));
    // A tab as indentation throws the parser off the lines around it: that one error is the one to fix there.
    const tabs = errors.filter((e) => e.code === "TAB_AS_INDENT").map((e) => this.counter.linePos(e.pos[0]).line);
    const seen = new Set<number>();
    const out: ConfigProblem[] = [];
    for (const e of errors) {
      if (e.code === "BLOCK_AS_IMPLICIT_KEY" && spanning.has(e.pos[0])) continue;
      const p = this.syntaxProblem(e);
      if (p.line === undefined || seen.has(p.line)) continue;
      if (e.code !== "TAB_AS_INDENT" && tabs.some((t) => Math.abs(t - p.line!) <= 1)) continue;
      seen.add(p.line);
      out.push(p);
    }
    return out.sort((a, b) => a.line! - b.line!);
  }

  private syntaxProblem(e: YAMLError): ConfigProblem {
    const [start, end] = e.pos;
    const from = this.counter.linePos(start);
    const to = this.counter.linePos(end);
    const first = e.message.split("\n")[0] ?? e.message;
    let message = first.replace(/ at line \d+, column \d+:?$/, "");
    let at = from;
    if (e.code === "MULTILINE_IMPLICIT_KEY" && to.line > from.line) {
      // An over-indented key: YAML takes it for the rest of the value above. The line to fix is its own.
      const text = this.lines[to.line - 1] ?? "";
      at = { line: to.line, col: text.length - text.trimStart().length + 1 };
      message = `this line is indented deeper than the keys beside it, so YAML reads it as the rest of the value on line ${from.line}: indent it as its sibling keys`;
    } else if (e.code === "BLOCK_AS_IMPLICIT_KEY" && /nested mappings/i.test(message)) {
      message = `a second "key:" on one line (${message}); indent a nested key on a line of its own, or quote a value that holds ": "`;
    } else if (e.code === "MISSING_CHAR" && /quote/.test(message)) {
      at = this.counter.linePos(this.openingQuote(start));
      message = "a quoted value is not closed: the closing quote is missing";
    }
    return { path: "(yaml)", message, file: this.file, line: at.line, column: at.col, snippet: this.snippet(at.line, at.col, false, 1) };
  }

  /** The offset of the quote that opens the string still open at `before`. */
  private openingQuote(before: number): number {
    const text = this.text.slice(0, before);
    for (let i = text.length - 1; i >= 0; i--) {
      if ((text[i] === '"' || text[i] === "'") && text[i - 1] !== "\\") return i;
    }
    return before;
  }
}
