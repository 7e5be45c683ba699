// Line and branch coverage per source folder from V8's raw coverage (NODE_V8_COVERAGE),
// of every process a test run starts: the test files and the daemons and CLI runs they
// spawn. Figures are on the compiled JavaScript of dist/src (node 20's own coverage
// report maps through source maps and gives up on ours; and it sees no child process).
// A line counts as covered when some process ran it; a branch is a V8 block range, covered
// when some process entered it. Files no process loaded count with every line uncovered.
//   node dist/test/support/coverage.js RAW_DIR [src/dispatch=LINE:BRANCH ...]
// prints the table and exits 1 when a folder is under its floor.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

interface Range {
  startOffset: number;
  endOffset: number;
  count: number;
}
interface FnCoverage {
  functionName: string;
  isBlockCoverage: boolean;
  ranges: Range[];
}
interface ScriptCoverage {
  url: string;
  functions: FnCoverage[];
}

const DIST = resolve(fileURLToPath(import.meta.url), "../../..");
const SRC = join(DIST, "src");
const ROOT = resolve(DIST, "..");

/** Per file: for each counted line, whether some process ran it; branches by range key. */
interface FileCov {
  lines: Map<number, boolean>;
  branches: Map<string, boolean>;
  loaded: boolean;
}

function listJs(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...listJs(p));
    // Only output of a source that still exists: tsc leaves the .js of a deleted .ts behind.
    else if (name.endsWith(".js") && existsSync(join(ROOT, relative(DIST, p)).replace(/\.js$/, ".ts"))) out.push(p);
  }
  return out;
}

/** Line start offsets, and which lines are code (not blank, not only a comment or brace). */
function lineTable(text: string): { starts: number[]; code: boolean[] } {
  const starts = [0];
  const code: boolean[] = [];
  const lines = text.split("\n");
  let off = 0;
  for (const l of lines) {
    off += l.length + 1;
    starts.push(off);
    const t = l.trim();
    code.push(t !== "" && !t.startsWith("//") && !t.startsWith("*") && !t.startsWith("/*") && !/^[})\];,]+$/.test(t));
  }
  return { starts, code };
}

function main(): void {
  const [rawDir, ...floorArgs] = process.argv.slice(2);
  if (!rawDir) throw new Error("usage: coverage RAW_DIR [folder=LINE:BRANCH ...]");
  const floors = floorArgs.map((a) => {
    const m = /^(src(?:\/[\w-]+)*)=(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)$/.exec(a);
    if (!m) throw new Error(`bad floor ${JSON.stringify(a)}: want src/folder=LINE:BRANCH`);
    return { folder: m[1], line: Number(m[2]), branch: Number(m[3]) };
  });
  const files = new Map<string, FileCov & { table: ReturnType<typeof lineTable> }>();
  for (const p of listJs(SRC)) {
    const table = lineTable(readFileSync(p, "utf8"));
    const lines = new Map<number, boolean>();
    table.code.forEach((c, i) => c && lines.set(i, false));
    files.set(pathToFileURL(p).href, { lines, branches: new Map(), table, loaded: false });
  }
  let processes = 0;
  for (const name of readdirSync(rawDir)) {
    if (!name.endsWith(".json")) continue;
    const raw = JSON.parse(readFileSync(join(rawDir, name), "utf8")) as { result: ScriptCoverage[] };
    processes++;
    for (const script of raw.result) {
      const f = files.get(script.url);
      if (!f) continue;
      // Per line, the count of the innermost range that holds the line's start (ranges come
      // outermost first within a function; functions in source order).
      const count = new Map<number, number>();
      for (const fn of script.functions) {
        for (const r of fn.ranges) {
          for (let i = lineAt(f.table.starts, r.startOffset); i < f.table.code.length && f.table.starts[i] < r.endOffset; i++) {
            if (f.table.starts[i] >= r.startOffset) count.set(i, r.count);
          }
        }
        // Branches: every block range, and each function's own range (entered or not: V8
        // reports no blocks for a function no process called).
        const ranges = fn.isBlockCoverage ? fn.ranges : fn.ranges.slice(0, 1);
        for (const r of ranges) {
          const key = `${r.startOffset}:${r.endOffset}`;
          f.branches.set(key, (f.branches.get(key) ?? false) || r.count > 0);
        }
      }
      for (const [i, n] of count) if (f.lines.has(i) && n > 0) f.lines.set(i, true);
      f.loaded = true;
    }
  }
  // Per folder (src/dispatch, src/uplink, ..., files directly in src/ as "src").
  const folders = new Map<string, { files: number; lines: number; linesHit: number; branches: number; branchesHit: number }>();
  for (const [url, f] of files) {
    const rel = relative(DIST, fileURLToPath(url)).split("/");
    const folder = rel.length > 2 ? `${rel[0]}/${rel[1]}` : rel[0];
    const agg = folders.get(folder) ?? { files: 0, lines: 0, linesHit: 0, branches: 0, branchesHit: 0 };
    agg.files++;
    agg.lines += f.lines.size;
    agg.linesHit += [...f.lines.values()].filter(Boolean).length;
    // A file no process loaded: its branches are unknown; it counts as one, not taken.
    if (!f.loaded) f.branches.set("unloaded", false);
    agg.branches += f.branches.size;
    agg.branchesHit += [...f.branches.values()].filter(Boolean).length;
    folders.set(folder, agg);
  }
  // COVERAGE_MISSED=src/uplink: the compiled lines no process ran, per file of that folder.
  const missedIn = process.env.COVERAGE_MISSED;
  if (missedIn) {
    for (const [url, f] of files) {
      const rel = relative(DIST, fileURLToPath(url));
      if (!rel.startsWith(`${missedIn}/`)) continue;
      const missed = [...f.lines].filter(([, hit]) => !hit).map(([i]) => i + 1);
      if (missed.length > 0) console.log(`missed in dist/${rel}: lines ${missed.join(", ")}`);
    }
  }
  const pct = (hit: number, all: number) => (all === 0 ? 100 : (100 * hit) / all);
  const rows = [...folders].sort(([a], [b]) => (a < b ? -1 : 1));
  const total = rows.reduce(
    (t, [, a]) => ({
      files: t.files + a.files,
      lines: t.lines + a.lines,
      linesHit: t.linesHit + a.linesHit,
      branches: t.branches + a.branches,
      branchesHit: t.branchesHit + a.branchesHit,
    }),
    { files: 0, lines: 0, linesHit: 0, branches: 0, branchesHit: 0 },
  );
  const fmt = (name: string, a: typeof total, floor?: { line: number; branch: number }) =>
    `${name.padEnd(16)} ${String(a.files).padStart(5)} ${`${a.linesHit}/${a.lines}`.padStart(11)} ${pct(a.linesHit, a.lines).toFixed(1).padStart(6)} % ${`${a.branchesHit}/${a.branches}`.padStart(11)} ${pct(a.branchesHit, a.branches).toFixed(1).padStart(6)} %${floor ? `   floor ${floor.line} % / ${floor.branch} %` : ""}`;
  const out = [
    `coverage of dist/src from ${processes} processes (lines and V8 block branches of the compiled JavaScript)`,
    `${"folder".padEnd(16)} ${"files".padStart(5)} ${"lines".padStart(11)} ${"line".padStart(6)}   ${"branches".padStart(11)} ${"branch".padStart(6)}`,
    ...rows.map(([name, a]) =>
      fmt(
        name,
        a,
        floors.find((f) => f.folder === name),
      ),
    ),
    fmt("all", total),
  ];
  process.stdout.write(out.join("\n") + "\n");
  const failed: string[] = [];
  for (const fl of floors) {
    const a = folders.get(fl.folder);
    if (!a) {
      failed.push(`${fl.folder}: no such folder under dist/src`);
      continue;
    }
    const l = pct(a.linesHit, a.lines);
    const b = pct(a.branchesHit, a.branches);
    if (l < fl.line) failed.push(`${fl.folder}: lines ${l.toFixed(1)} % < floor ${fl.line} %`);
    if (b < fl.branch) failed.push(`${fl.folder}: branches ${b.toFixed(1)} % < floor ${fl.branch} %`);
  }
  if (processes === 0) failed.push(`no coverage files in ${rawDir}`);
  if (failed.length) {
    process.stderr.write(`\ncoverage under the floor:\n  ${failed.join("\n  ")}\n`);
    process.exitCode = 1;
  }
}

/** The line holding offset (binary search over line starts). */
function lineAt(starts: number[], offset: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid] <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

main();
