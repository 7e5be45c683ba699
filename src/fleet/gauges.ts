// The fleet's Prometheus figures for /metrics.
import type { MetricsSource } from "../metrics.js";
import type { StreamStats } from "./streams.js";

export interface FleetStats {
  connected: boolean;
  connects: number;
  commands: number;
  telemetry: StreamStats;
  events: StreamStats;
  telemetry_cursor: number;
  /** Telemetry messages in flight at most on this connection. */
  telemetry_window: number;
  /** Connection attempts made (the first included) and TLS contexts built. */
  attempts: number;
  tls_contexts: number;
}

export function fleetGauges(st: FleetStats, backlog: number, refused: ReadonlyMap<string, number>): ReturnType<MetricsSource["gauges"]> {
  const streams = [
    ["telemetry", st.telemetry],
    ["events", st.events],
  ] as const;
  return [
    {
      name: "sitegate_fleet_connected",
      help: "1 while the fleet broker connection is up",
      type: "gauge",
      values: [{ value: st.connected ? 1 : 0 }],
    },
    {
      name: "sitegate_fleet_connects_total",
      help: "connections made to the fleet broker",
      type: "counter",
      values: [{ value: st.connects }],
    },
    {
      name: "sitegate_fleet_acked_total",
      help: "fleet messages acknowledged by the broker (PUBACK)",
      type: "counter",
      values: streams.map(([s, x]) => ({ labels: { stream: s }, value: x.acked })),
    },
    {
      name: "sitegate_fleet_rejected_total",
      help: "fleet messages the broker refused (retried)",
      type: "counter",
      values: streams.map(([s, x]) => ({ labels: { stream: s }, value: x.rejected })),
    },
    {
      name: "sitegate_fleet_pending_snapshots",
      help: "stored snapshots the fleet broker does not have yet",
      type: "gauge",
      values: [{ value: backlog }],
    },
    { name: "sitegate_fleet_commands_total", help: "fleet commands received", type: "counter", values: [{ value: st.commands }] },
    {
      name: "sitegate_fleet_commands_refused_total",
      help: "fleet commands not run: ignored (retained, no or a foreign response topic) or answered with an error status",
      type: "counter",
      values: [...refused].map(([reason, value]) => ({ labels: { reason }, value })),
    },
  ];
}
