// `make bench`: runs every test/bench/*.bench.js (or those named on the command line),
// prints one table, and writes the rows to var/bench/latest.json.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { BenchFn, BenchRow } from "./types.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../..");

function fmt(n: number | null): string {
  if (n === null || !Number.isFinite(n)) return "-";
  const a = Math.abs(n);
  if (a >= 1000) return Math.round(n).toLocaleString("en-US");
  if (a >= 10) return n.toFixed(1);
  if (a >= 1) return n.toFixed(2);
  return n.toPrecision(3);
}

export function table(rows: BenchRow[]): string {
  const head = ["benchmark", "value", "unit", "reference", "ratio", "reference is"];
  const body = rows.map((r) => [
    r.name,
    fmt(r.value),
    r.unit,
    fmt(r.reference),
    r.ratio === null ? "-" : `${r.ratio.toFixed(2)}x`,
    r.note ?? "",
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 1 || i === 3 || i === 4 ? c.padStart(widths[i]) : c.padEnd(widths[i])))
      .join("  ")
      .trimEnd();
  return [line(head), widths.map((w) => "-".repeat(w)).join("  "), ...body.map(line)].join("\n");
}

async function main(): Promise<number> {
  const quick = process.env.BENCH_QUICK === "1";
  // Names on the command line or BENCH_ONLY=dispatch,api select benchmarks by prefix.
  const only = [...process.argv.slice(2), ...(process.env.BENCH_ONLY ?? "").split(",").filter(Boolean)];
  const files = readdirSync(here)
    .filter((f) => f.endsWith(".bench.js"))
    .filter((f) => only.length === 0 || only.some((o) => f.startsWith(o)))
    .sort();
  const rows: BenchRow[] = [];
  let failed = 0;
  for (const f of files) {
    const dir = mkdtempSync(join(tmpdir(), "sitegate-bench-"));
    const name = f.replace(/\.bench\.js$/, "");
    process.stderr.write(`bench ${name}${quick ? " (quick)" : ""} ...\n`);
    try {
      const mod = (await import(join(here, f))) as { default: BenchFn };
      const got = await mod.default({ quick, dir, log: (m) => process.stderr.write(`  ${name}: ${m}\n`) });
      rows.push(...got);
    } catch (e) {
      failed++;
      process.stderr.write(`bench ${name} failed: ${(e as Error).stack ?? String(e)}\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  process.stdout.write(table(rows) + "\n");
  const out = join(root, "var/bench");
  mkdirSync(out, { recursive: true });
  writeFileSync(
    join(out, "latest.json"),
    JSON.stringify(
      rows.map(({ name, value, unit, reference, ratio }) => ({ name, value, unit, reference, ratio })),
      null,
      2,
    ) + "\n",
  );
  process.stderr.write(`wrote ${join(out, "latest.json")}${failed ? `; ${failed} benchmark(s) failed` : ""}\n`);
  return failed ? 1 : 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    (c) => process.exit(c),
    (e) => {
      process.stderr.write(String(e) + "\n");
      process.exit(1);
    },
  );
}
