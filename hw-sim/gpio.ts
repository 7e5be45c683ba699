// A simulated GPIO chip: input lines whose level the outside world sets (a test, a
// technician: POST /gpio/<line>), output lines the gateway drives (POST /gpio/<line>/output),
// and edge events for watchers (GET /gpio/events, server-sent events). Levels are physical
// (0 = low); active_low is the gateway's reading of them. An output's load counts in the
// site balance while its level is 1.
import type { SiteLoad, SiteModel } from "./site-model.js";
import type { GpioLineSpec } from "./scenario.js";

export type Level = 0 | 1;

export interface GpioEdge {
  /** Chip-wide event number, from 1. */
  seqno: number;
  /** Event number on this line, from 1. */
  line_seqno: number;
  line: number;
  direction: "input" | "output";
  edge: "rising" | "falling";
  value: Level;
  /** Wall clock of the edge, nanoseconds since the epoch (a string: it exceeds 2^53). */
  timestamp_ns: string;
}

interface Line {
  spec: GpioLineSpec;
  value: Level;
  edges: number;
}

export class GpioError extends Error {
  constructor(
    readonly status: 400 | 404,
    message: string,
  ) {
    super(message);
  }
}

export class GpioChip implements SiteLoad {
  readonly name = "gpio";
  private readonly lines = new Map<number, Line>();
  private seqno = 0;
  private readonly watchers = new Set<(e: GpioEdge) => void>();

  constructor(
    specs: GpioLineSpec[],
    private readonly site: SiteModel,
  ) {
    for (const s of specs) this.lines.set(s.line, { spec: s, value: s.value, edges: 0 });
    site.loads.push(this);
  }

  loadW(): number {
    let w = 0;
    for (const l of this.lines.values()) if (l.spec.direction === "output" && l.value === 1) w += l.spec.load_w ?? 0;
    return w;
  }

  /** {"17": 0, "27": 1} */
  levels(): Record<string, Level> {
    const out: Record<string, Level> = {};
    for (const [n, l] of this.lines) out[String(n)] = l.value;
    return out;
  }

  get seq(): number {
    return this.seqno;
  }

  line(n: number): Line {
    const l = this.lines.get(n);
    if (!l) throw new GpioError(404, `no gpio line ${n} (lines: ${[...this.lines.keys()].join(", ")})`);
    return l;
  }

  /** The outside world sets an input's level; `bounce` adds that many extra flips before it settles. */
  setInput(n: number, value: Level, bounce = 0): { line: number; value: Level; changed: boolean } {
    const l = this.line(n);
    if (l.spec.direction !== "input") {
      throw new GpioError(400, `line ${n} is an output: its level is driven by the gateway (POST /gpio/${n}/output), not set from outside`);
    }
    const before = l.value;
    for (let i = 0; i < bounce; i++) {
      this.change(l, l.value === 1 ? 0 : 1);
      this.change(l, l.value === 1 ? 0 : 1);
    }
    this.change(l, value);
    return { line: n, value, changed: before !== value || bounce > 0 };
  }

  /** The gateway drives an output (what a line request's set-values does on the chardev). */
  driveOutput(n: number, value: Level): { line: number; value: Level; changed: boolean } {
    const l = this.line(n);
    if (l.spec.direction !== "output") {
      throw new GpioError(
        400,
        `line ${n} is an input: it cannot be driven (its level comes from outside; POST /gpio/${n} sets it in tests)`,
      );
    }
    const changed = l.value !== value;
    this.site.advance();
    this.change(l, value);
    this.site.advance();
    return { line: n, value, changed };
  }

  private change(l: Line, value: Level): void {
    if (l.value === value) return;
    l.value = value;
    l.edges++;
    const e: GpioEdge = {
      seqno: ++this.seqno,
      line_seqno: l.edges,
      line: l.spec.line,
      direction: l.spec.direction,
      edge: value === 1 ? "rising" : "falling",
      value,
      timestamp_ns: (BigInt(Date.now()) * 1_000_000n + BigInt(this.seqno % 1_000_000)).toString(),
    };
    for (const w of this.watchers) w(e);
  }

  /** Calls fn for every edge until the returned function is called. */
  watch(fn: (e: GpioEdge) => void): () => void {
    this.watchers.add(fn);
    return () => this.watchers.delete(fn);
  }

  view(): Record<string, Record<string, unknown>> {
    const out: Record<string, Record<string, unknown>> = {};
    for (const [n, l] of this.lines) {
      out[String(n)] = {
        direction: l.spec.direction,
        value: l.value,
        edges: l.edges,
        ...(l.spec.name ? { name: l.spec.name } : {}),
        ...(l.spec.direction === "output" ? { load_w: l.spec.load_w ?? 0, power_w: l.value === 1 ? (l.spec.load_w ?? 0) : 0 } : {}),
      };
    }
    return out;
  }
}
