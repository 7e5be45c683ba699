// Operations metrics of the process itself, for /metrics, named after
// Prometheus' conventions: sitegate_build_info{version,node,arch}; the standard process_*
// families (resident memory, CPU seconds, start time, open descriptors); nodejs_* for the V8
// heap; counters only for what accumulates (a rate() in Prometheus gives utilisation, so no
// gauge measures "since the previous scrape" and a curl cannot steal Prometheus' window);
// the event-loop lag as a histogram, sampled twice a second by one unref'd timer.
// prom-client would do this too, but loading it costs ~11 MiB RSS under the unit's flags
// (docs/packaging.md), more than these few families are worth.
import { readdirSync } from "node:fs";
import { constants, PerformanceObserver } from "node:perf_hooks";
import type { Part } from "./lifecycle.js";
import type { MetricFamily } from "./metrics.js";
import { VERSION } from "./version.js";

const GC_KIND: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: "minor",
  [constants.NODE_PERFORMANCE_GC_MAJOR]: "major",
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: "weakcb",
};

/** Upper bounds (seconds) of the event-loop lag histogram. */
export const LAG_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** A cumulative Prometheus histogram (counts per upper bound, sum, count). */
export class Histogram {
  private readonly buckets: { le: number; count: number }[];
  sum = 0;
  count = 0;
  constructor(bounds: number[]) {
    this.buckets = bounds.map((le) => ({ le, count: 0 }));
  }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    for (const b of this.buckets) if (v <= b.le) b.count++;
  }
  family(name: string, help: string): MetricFamily {
    return {
      name,
      help,
      type: "histogram",
      values: [
        ...this.buckets.map((b) => ({ suffix: "_bucket", labels: { le: String(b.le) }, value: b.count })),
        { suffix: "_bucket", labels: { le: "+Inf" }, value: this.count },
        { suffix: "_sum", value: this.sum },
        { suffix: "_count", value: this.count },
      ],
    };
  }
}

export class RuntimeMetrics implements Part {
  readonly name = "runtime";
  private observer: PerformanceObserver | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly gc = new Map<string, { runs: number; seconds: number }>();
  readonly lag = new Histogram(LAG_BUCKETS);
  private readonly startTime = Date.now() / 1000 - process.uptime();

  start(sampleMs = 500): void {
    let expected = performance.now() + sampleMs;
    this.timer = setInterval(() => {
      const now = performance.now();
      this.lag.observe(Math.max(0, now - expected) / 1000);
      expected = now + sampleMs;
    }, sampleMs);
    this.timer.unref();
    this.observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const kind = GC_KIND[(e as unknown as { detail?: { kind?: number } }).detail?.kind ?? -1] ?? "other";
        const g = this.gc.get(kind) ?? { runs: 0, seconds: 0 };
        g.runs++;
        g.seconds += e.duration / 1000;
        this.gc.set(kind, g);
      }
    });
    this.observer.observe({ entryTypes: ["gc"] });
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.observer?.disconnect();
  }

  metrics(): MetricFamily[] {
    const mem = process.memoryUsage();
    const cpu = process.cpuUsage();
    let fds = NaN;
    try {
      fds = readdirSync("/proc/self/fd").length;
    } catch {
      /* not Linux */
    }
    const gc = [...this.gc];
    return [
      {
        name: "sitegate_build_info",
        help: "the running release, its Node.js and CPU architecture (always 1)",
        type: "gauge",
        values: [{ labels: { version: VERSION, node: process.versions.node, arch: process.arch }, value: 1 }],
      },
      { name: "process_resident_memory_bytes", help: "Resident memory size in bytes.", type: "gauge", values: [{ value: mem.rss }] },
      {
        name: "process_cpu_user_seconds_total",
        help: "Total user CPU time spent in seconds.",
        type: "counter",
        values: [{ value: cpu.user / 1e6 }],
      },
      {
        name: "process_cpu_system_seconds_total",
        help: "Total system CPU time spent in seconds.",
        type: "counter",
        values: [{ value: cpu.system / 1e6 }],
      },
      {
        name: "process_cpu_seconds_total",
        help: "Total user and system CPU time spent in seconds.",
        type: "counter",
        values: [{ value: (cpu.user + cpu.system) / 1e6 }],
      },
      {
        name: "process_start_time_seconds",
        help: "Start time of the process since unix epoch in seconds.",
        type: "gauge",
        values: [{ value: Math.round(this.startTime) }],
      },
      {
        name: "process_open_fds",
        help: "Number of open file descriptors.",
        type: "gauge",
        values: Number.isFinite(fds) ? [{ value: fds }] : [],
      },
      { name: "nodejs_heap_size_used_bytes", help: "V8 heap in use", type: "gauge", values: [{ value: mem.heapUsed }] },
      { name: "nodejs_heap_size_total_bytes", help: "V8 heap reserved", type: "gauge", values: [{ value: mem.heapTotal }] },
      {
        name: "nodejs_external_memory_bytes",
        help: "memory of C++ objects bound to JavaScript (buffers, SQLite statements)",
        type: "gauge",
        values: [{ value: mem.external }],
      },
      this.lag.family("sitegate_event_loop_lag_seconds", "event-loop delay of a timer firing every 0.5 s"),
      {
        name: "sitegate_gc_seconds_total",
        help: "time spent in garbage collection by kind",
        type: "counter",
        values: gc.map(([kind, g]) => ({ labels: { kind }, value: g.seconds })),
      },
      {
        name: "sitegate_gc_runs_total",
        help: "garbage collections by kind",
        type: "counter",
        values: gc.map(([kind, g]) => ({ labels: { kind }, value: g.runs })),
      },
    ];
  }
}
