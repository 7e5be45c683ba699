// Every benchmark module (test/bench/*.bench.ts) default-exports a BenchFn.
// The runner prints one table and writes var/bench/latest.json.

export interface BenchRow {
  name: string;
  value: number;
  unit: string;
  /** The reference measured in the same run (e.g. mbpoll, a bare loop, the line rate). */
  reference: number | null;
  /** value / reference, or for "lower is better" rows reference / value; always "higher is better". */
  ratio: number | null;
  /** What the reference is, for the table. */
  note?: string;
}

export interface BenchContext {
  /** BENCH_QUICK=1: a short run for CI smoke checks. */
  quick: boolean;
  /** A scratch directory for this run. */
  dir: string;
  log: (msg: string) => void;
}

export type BenchFn = (ctx: BenchContext) => Promise<BenchRow[]>;
