// The sample store's figures for /metrics.
import type { MetricFamily } from "../lifecycle.js";
import type { SampleStoreStats } from "./sample-schema.js";

export function sampleMetrics(st: SampleStoreStats): MetricFamily[] {
  return [
    {
      name: "sitegate_samples_pending_snapshots",
      help: "snapshots not yet accepted by the partner",
      type: "gauge",
      values: [{ value: st.pending_snapshots }],
    },
    { name: "sitegate_samples_buffer_bytes", help: "telemetry buffer size", type: "gauge", values: [{ value: st.bytes }] },
    {
      name: "sitegate_samples_stored_total",
      help: "samples committed to the telemetry buffer",
      type: "counter",
      values: [{ value: st.stored_samples_total }],
    },
    {
      name: "sitegate_samples_stored_bytes_total",
      help: "bytes of the packed samples committed (what the write budget is measured against)",
      type: "counter",
      values: [{ value: st.stored_bytes_total }],
    },
    {
      name: "sitegate_samples_stored_alone_bytes_total",
      help: "bytes the committed samples would take with every snapshot packed alone (no deltas)",
      type: "counter",
      values: [{ value: st.stored_alone_bytes_total }],
    },
    {
      name: "sitegate_samples_committed_snapshots_total",
      help: "snapshots committed to telemetry.db",
      type: "counter",
      values: [{ value: st.committed_snapshots_total }],
    },
    {
      name: "sitegate_samples_dropped_total",
      help: "unsent samples dropped because the buffer was full",
      type: "counter",
      values: [{ value: st.dropped_samples }],
    },
  ];
}
