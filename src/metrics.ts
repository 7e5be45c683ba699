// What a part reports to /metrics and /healthz: Prometheus families and warnings. Below
// every part, so any of them can report without importing the API that serves it.

/** One Prometheus metric family. */
export interface MetricFamily {
  name: string;
  help: string;
  type: "gauge" | "counter" | "histogram";
  /** suffix: a histogram's _bucket / _sum / _count samples */
  values: Array<{ labels?: Record<string, string>; value: number; suffix?: string }>;
}

/** Something an operator should act on soon (e.g. a TLS certificate about to expire); /healthz lists them. */
export interface HealthWarning {
  code: string;
  message: string;
}

/** What /metrics and /healthz report; each part contributes its counters. */
export interface MetricsSource {
  gauges(): MetricFamily[];
  warnings?(): HealthWarning[];
}
