// The dispatcher's metrics: events by state, devices not released, writes, confirmation reads, receipt commits,
// clock steps.
import type { MetricFamily } from "../lifecycle.js";

export interface DispatchStats {
  started: number;
  finished: number;
  missed: number;
  clock_steps: number;
  receipt_commits: number;
  receipt_requests: number;
  writes_ok: number;
  writes_failed: number;
  releases_ok: number;
  releases_failed: number;
  confirms_ok: number;
  confirms_failed: number;
}

/** The dispatcher's metrics from its counters and its open events. */
export function dispatchMetrics(s: DispatchStats, open: { running: number; scheduled: number; unreleased: number }): MetricFamily[] {
  const byResult = (ok: number, failed: number) => [
    { labels: { result: "ok" }, value: ok },
    { labels: { result: "failed" }, value: failed },
  ];
  return [
    {
      name: "sitegate_dispatch_events",
      help: "dispatch events by state",
      type: "gauge",
      values: [
        { labels: { state: "running" }, value: open.running },
        { labels: { state: "scheduled" }, value: open.scheduled },
      ],
    },
    {
      name: "sitegate_devices_unreleased",
      help: "devices whose release did not read back: kept in the ledger and retried with backoff",
      type: "gauge",
      values: [{ value: open.unreleased }],
    },
    {
      name: "sitegate_dispatch_writes_total",
      help: "dispatch register writes by result",
      type: "counter",
      values: byResult(s.writes_ok, s.writes_failed),
    },
    {
      name: "sitegate_dispatch_confirm_reads_total",
      help: "power reads in the control lane right after a setpoint write, by result",
      type: "counter",
      values: byResult(s.confirms_ok, s.confirms_failed),
    },
    {
      name: "sitegate_dispatch_receipt_commits_total",
      help: "transactions that committed /dr receipts (group commit: several requests each)",
      type: "counter",
      values: [
        { labels: { kind: "commits" }, value: s.receipt_commits },
        { labels: { kind: "requests" }, value: s.receipt_requests },
      ],
    },
    {
      name: "sitegate_dispatch_clock_steps_total",
      help: "wall clock steps the scheduler noticed",
      type: "counter",
      values: [{ value: s.clock_steps }],
    },
  ];
}
