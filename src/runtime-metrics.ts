// Operations metrics of the process itself and of the buses, for /metrics: resident
// memory, V8 heap, CPU seconds, event-loop lag (perf_hooks monitorEventLoopDelay, over
// the window since the previous scrape, at least 5 s), GC time by kind (PerformanceObserver 'gc'), and
// per bus the busy time and its fraction of wall time since the previous scrape.
// Everything is read from counters the runtime keeps anyway; a scrape costs microseconds.
import { constants, monitorEventLoopDelay, PerformanceObserver, type IntervalHistogram } from "node:perf_hooks";
import type { MetricFamily } from "./api/context.js";

const GC_KIND: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: "minor",
  [constants.NODE_PERFORMANCE_GC_MAJOR]: "major",
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: "weakcb",
};

export interface BusView {
  key: string;
  queued: number;
  stats: { busy_ms: number };
}

export class RuntimeMetrics {
  private delay: IntervalHistogram | null = null;
  private observer: PerformanceObserver | null = null;
  private readonly gc = new Map<string, { runs: number; seconds: number }>();
  private lastScrape = performance.now();
  private lagWindowStart = performance.now();
  private readonly lastBusy = new Map<string, number>();

  start(): void {
    this.delay = monitorEventLoopDelay({ resolution: 10 });
    this.delay.enable();
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
    this.delay?.disable();
    this.observer?.disconnect();
  }

  families(buses: BusView[]): MetricFamily[] {
    const mem = process.memoryUsage();
    const cpu = process.cpuUsage();
    const now = performance.now();
    const window = Math.max(1, now - this.lastScrape);
    this.lastScrape = now;
    const d = this.delay;
    const s = (ns: number) => (Number.isFinite(ns) ? ns / 1e9 : 0);
    const lag = d ? [{ labels: { quantile: "0.5" }, value: s(d.percentile(50)) }, { labels: { quantile: "0.99" }, value: s(d.percentile(99)) }, { labels: { quantile: "1" }, value: s(d.count > 0 ? d.max : 0) }] : [];
    // A new window once the current one has some length, so quick scrapes see values too.
    if (d && now - this.lagWindowStart >= 5000) {
      d.reset();
      this.lagWindowStart = now;
    }
    const util = buses.map((b) => {
      const prev = this.lastBusy.get(b.key) ?? 0;
      this.lastBusy.set(b.key, b.stats.busy_ms);
      return { labels: { bus: b.key }, value: Math.min(1, Math.max(0, (b.stats.busy_ms - prev) / window)) };
    });
    const gc = [...this.gc];
    return [
      { name: "sitegate_process_resident_memory_bytes", help: "resident set size", type: "gauge", values: [{ value: mem.rss }] },
      { name: "sitegate_process_heap_used_bytes", help: "V8 heap in use", type: "gauge", values: [{ value: mem.heapUsed }] },
      { name: "sitegate_process_heap_total_bytes", help: "V8 heap reserved", type: "gauge", values: [{ value: mem.heapTotal }] },
      { name: "sitegate_process_external_bytes", help: "memory of C++ objects bound to JavaScript (buffers, SQLite statements)", type: "gauge", values: [{ value: mem.external }] },
      { name: "sitegate_process_cpu_seconds_total", help: "CPU time by mode", type: "counter", values: [{ labels: { mode: "user" }, value: cpu.user / 1e6 }, { labels: { mode: "system" }, value: cpu.system / 1e6 }] },
      { name: "sitegate_event_loop_lag_seconds", help: "event-loop delay over the window since the previous scrape, at least 5 s (quantile 1 = max)", type: "gauge", values: lag },
      { name: "sitegate_gc_seconds_total", help: "time spent in garbage collection by kind", type: "counter", values: gc.map(([kind, g]) => ({ labels: { kind }, value: g.seconds })) },
      { name: "sitegate_gc_runs_total", help: "garbage collections by kind", type: "counter", values: gc.map(([kind, g]) => ({ labels: { kind }, value: g.runs })) },
      { name: "sitegate_bus_busy_seconds_total", help: "time the bus spent on requests", type: "counter", values: buses.map((b) => ({ labels: { bus: b.key }, value: b.stats.busy_ms / 1000 })) },
      { name: "sitegate_bus_utilisation", help: "busy fraction of the bus since the previous scrape", type: "gauge", values: util },
      { name: "sitegate_bus_queue_depth", help: "requests waiting for the bus", type: "gauge", values: buses.map((b) => ({ labels: { bus: b.key }, value: b.queued })) },
    ];
  }
}
