// The node:test reporter of `make test`, `make check` and `make test-one` (docs/testing.md):
// one line per test file as it finishes, with its time and counts; under a failing file the
// failed tests with their errors; every 30 s without a finished file, the files still running
// and for how long, so the terminal is never silent for a minute; one summary line at the end.
// The whole spec report goes beside it to var/test-report.txt (the Makefile's second reporter).
import { Transform, type TransformCallback } from "node:stream";

/** The events of node:test this reporter reads (a subset of node's TestEvent). */
interface Event {
  type: string;
  data: {
    name?: string;
    nesting?: number;
    file?: string;
    /** Set on the events of the tests inside a file; absent on the file's own events. */
    entryFile?: string;
    line?: number;
    skip?: unknown;
    todo?: unknown;
    details?: { duration_ms?: number; passed?: boolean; error?: unknown; type?: string };
    counts?: { tests: number; passed: number; failed: number; cancelled: number; skipped: number; todo: number };
    duration_ms?: number;
    message?: string;
  };
}

interface FileCounts {
  started: number;
  passed: number;
  failed: number;
  skipped: number;
  todo: number;
  failures: string[];
  /** The tail of what the file's process wrote to stderr (shown when it fails outside a test). */
  stderr: string;
}

const HEARTBEAT_MS = 30_000;
/** Lines of one failure's error shown here (the whole error is in the spec report). */
const ERROR_LINES = 30;
const STDERR_TAIL = 2000;

const secs = (ms: number) => `${(ms / 1000).toFixed(1).padStart(6)} s`;

/** 45 s, 9 min 30 s. */
function span(ms: number): string {
  const all = Math.round(ms / 1000); // whole seconds first: 119.6 s is 2 min 0 s, never 1 min 60 s
  const m = Math.floor(all / 60);
  const s = all % 60;
  return m ? `${m} min ${s} s` : `${s} s`;
}

function errorText(error: unknown): string {
  const e = error as { cause?: unknown; message?: string } | undefined;
  const inner = (e?.cause ?? e) as { message?: string; stack?: string } | undefined;
  const text = String(inner?.message ?? inner ?? "");
  const lines = text.split("\n");
  return lines.length > ERROR_LINES ? [...lines.slice(0, ERROR_LINES), `... (${lines.length - ERROR_LINES} more lines)`].join("\n") : text;
}

const indent = (text: string, by: string) =>
  text
    .split("\n")
    .map((l) => by + l)
    .join("\n");

export default class FileReporter extends Transform {
  private readonly files = new Map<string, FileCounts>();
  private readonly t0 = performance.now();
  private lastLine = performance.now();
  private readonly heartbeat: NodeJS.Timeout;
  private finished = 0;
  private readonly total = { passed: 0, failed: 0, skipped: 0, todo: 0, files: 0 };

  constructor() {
    super({ writableObjectMode: true });
    this.heartbeat = setInterval(() => this.still(), HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  private counts(file: string): FileCounts {
    let c = this.files.get(file);
    if (!c) {
      c = { started: performance.now(), passed: 0, failed: 0, skipped: 0, todo: 0, failures: [], stderr: "" };
      this.files.set(file, c);
    }
    return c;
  }

  private line(text: string): void {
    this.push(text + "\n");
    this.lastLine = performance.now();
  }

  /** The files still running, when nothing was printed for HEARTBEAT_MS. */
  private still(): void {
    const now = performance.now();
    if (now - this.lastLine < HEARTBEAT_MS - 1000 || this.files.size === 0) return;
    const running = [...this.files].map(([name, c]) => `${name} (${span(now - c.started)})`);
    this.line(`  ...  ${span(now - this.t0)} in, still running: ${running.join(", ")}`);
  }

  override _transform(event: Event, _enc: BufferEncoding, done: TransformCallback): void {
    const d = event.data;
    const fileLevel = d.entryFile === undefined && d.nesting === 0 && d.name !== undefined;
    if (event.type === "test:dequeue" && fileLevel) this.counts(d.name!);
    else if (event.type === "test:complete" && !fileLevel && d.file) {
      // test:complete comes as each test ends (test:pass and test:fail come in file order, late
      // when files run side by side). Leaf results only: a suite (describe) or a test with
      // subtests is counted through them.
      if (d.details?.type === "suite") return done();
      const c = this.counts(this.nameOf(d.file));
      if (d.todo !== undefined && d.todo !== false) c.todo++;
      else if (d.skip !== undefined && d.skip !== false) c.skipped++;
      else if (d.details?.passed !== false) c.passed++;
      else if ((d.details?.error as { failureType?: string } | undefined)?.failureType === "subtestsFailed") return done();
      else {
        c.failed++;
        c.failures.push(`  ✖ ${d.name} (line ${d.line})\n${indent(errorText(d.details?.error), "      ")}`);
      }
    } else if (event.type === "test:stderr" && d.file) {
      const c = this.counts(this.nameOf(d.file));
      c.stderr = (c.stderr + (d.message ?? "")).slice(-STDERR_TAIL);
    } else if (event.type === "test:complete" && fileLevel) this.fileDone(d.name!, d.details ?? {});
    else if (event.type === "test:summary" && d.file === undefined && d.counts) this.summary(d.counts, d.duration_ms ?? 0);
    done();
  }

  /** The name a file's own events carry (its path relative to the working directory). */
  private nameOf(file: string): string {
    const cwd = process.cwd() + "/";
    return file.startsWith(cwd) ? file.slice(cwd.length) : file;
  }

  private fileDone(name: string, details: NonNullable<Event["data"]["details"]>): void {
    const c = this.counts(name);
    this.files.delete(name);
    this.finished++;
    const parts = [`${c.passed} passed`];
    if (c.failed) parts.push(`${c.failed} failed`);
    if (c.skipped) parts.push(`${c.skipped} skipped`);
    if (c.todo) parts.push(`${c.todo} todo`);
    const ok = details.passed !== false && c.failed === 0;
    this.total.passed += c.passed;
    this.total.failed += c.failed;
    this.total.skipped += c.skipped;
    this.total.todo += c.todo;
    if (!ok) this.total.files++;
    this.line(`${ok ? "  ok  " : "  FAIL"} ${secs(details.duration_ms ?? 0)}  ${name}  (${parts.join(", ")})`);
    for (const f of c.failures) this.line(f);
    // A file that fails outside any test (it does not load, a test left running) says why here.
    if (!ok && c.failures.length === 0) this.line(indent(`${errorText(details.error)}\n${c.stderr.trimEnd()}`, "      "));
  }

  private summary(counts: NonNullable<Event["data"]["counts"]>, ms: number): void {
    const t = this.total;
    const parts = [`${t.passed} passed`, `${t.failed} failed`];
    if (t.files) parts.push(`${t.files} file${t.files === 1 ? "" : "s"} failing`);
    if (counts.cancelled) parts.push(`${counts.cancelled} cancelled`);
    if (t.skipped) parts.push(`${t.skipped} skipped`);
    if (t.todo) parts.push(`${t.todo} todo`);
    const n = t.passed + t.failed + t.skipped + t.todo;
    // The Makefile's second reporter writes the spec report there.
    const full = process.execArgv.find((a) => a.startsWith("--test-reporter-destination=") && a.endsWith(".txt"));
    const where = full ? ` (the full report: ${full.slice(full.indexOf("=") + 1)})` : "";
    this.line(`${n} tests in ${this.finished} files: ${parts.join(", ")}; ${span(ms)}${where}`);
  }

  override _flush(done: TransformCallback): void {
    clearInterval(this.heartbeat);
    done();
  }
}
