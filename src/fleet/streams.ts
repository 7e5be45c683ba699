// The fleet's two streams, lanes of the delivery core into one MQTT sink: `telemetry`
// (the stored snapshots after the fleet's own cursor on the sample store, written by the
// data push's one writer, uplink/data-push.ts) and `events` (the mqtt consumer's lane of
// the delivery log). Each is settled on PUBACK only; a broker's refusal is retried, never dead-lettered; while the
// connection is down nothing new is sent (MQTT.js resends what was in flight).
import type { Logger } from "../log.js";
import type { TelemetryCursor } from "../telemetry/sample-store.js";
import type { Lane, LaneStats } from "../delivery/lane.js";
import { LaneGroup } from "../delivery/lane-group.js";
import type { DeliveryLog, Route } from "../delivery/log.js";
import { LogSource } from "../delivery/log-source.js";
import { SnapshotSource } from "../delivery/snapshot-source.js";
import { DataPushWriter } from "../uplink/data-push.js";
import { EVENTS_LANE, MQTT, MqttSink } from "./mqtt-sink.js";
import type { QoS1 } from "./command-inbox.js";
import { brokerEndpoint } from "../util/loopback.js";
import { brokerBackoff, retryDelayMs } from "../util/reconnect-backoff.js";

/** Telemetry messages in flight at most, whatever the broker's Receive Maximum allows. */
export const TELEMETRY_WINDOW = 64;
/** Stored snapshots handed to the telemetry lane at most past the oldest one without PUBACK. */
const TELEMETRY_AHEAD = 2 * TELEMETRY_WINDOW;
export const EVENTS_WINDOW = 4;

/**
 * The telemetry window on a connection: all of the broker's Receive Maximum (its CONNACK;
 * 65535 when it announces none) up to TELEMETRY_WINDOW. Status, devices, events and command
 * answers share that Receive Maximum: when it is full they wait in the connection's
 * first-in-first-out queue for the next PUBACK, ahead of the next telemetry message.
 */
export function telemetryWindow(receiveMaximum: number): number {
  return Math.max(1, Math.min(TELEMETRY_WINDOW, receiveMaximum));
}
/** A lane's figures as the fleet reports its streams. */
export interface StreamStats {
  /** Attempts published (PUBACKed, refused or in flight). */
  published: number;
  acked: number;
  rejected: number;
  in_flight: number;
  last_error: string | null;
}

export interface StreamDeps {
  site: string;
  log: Logger;
  deliveryLog: DeliveryLog;
  telemetry: TelemetryCursor;
  instance: () => string;
  /** The broker: its host sets the retry policy's cap. */
  fleet: { url: string };
  backoff?: (attempt: number) => number;
}

export class FleetStreams {
  readonly telemetry: Lane;
  readonly events: Lane;
  private readonly sink: MqttSink;
  private readonly lanes: LaneGroup;

  constructor(deps: StreamDeps, topic: (sub: string) => string, qos1: QoS1, connected: () => boolean) {
    // No content type (every payload is JSON: docs/fleet.md). Telemetry carries nothing
    // else either: its body's site_id and timestamp are its identity, on both uplinks.
    // `events` carries the key its HTTPS callback has and a `kind` (execution_response, event_state).
    const sink = (this.sink = new MqttSink(
      (item, done) =>
        qos1(
          topic(item.address),
          item.body,
          item.kind === "telemetry"
            ? { retain: false }
            : { retain: false, properties: { userProperties: { "idempotency-key": item.key, kind: item.kind } } },
          done,
        ),
      connected,
    ));
    // A refused publish is retried on the broker's policy (the one of util/reconnect-backoff.ts).
    const policy = brokerBackoff(brokerEndpoint(deps.fleet.url).host);
    const backoff = deps.backoff ?? ((n: number) => retryDelayMs(policy, n));
    const opts = { rejectWindowMs: Number.POSITIVE_INFINITY, idleRecheckMs: 2000 };
    const writer = new DataPushWriter(deps.site, deps.instance);
    const snapshots = new SnapshotSource(deps.telemetry, {
      kind: "telemetry",
      address: "telemetry",
      encode: (snap) => writer.encode(snap),
      batch: TELEMETRY_WINDOW,
      maxAhead: TELEMETRY_AHEAD,
    });
    this.lanes = new LaneGroup(sink, deps.log, backoff, opts);
    this.telemetry = this.lanes.open("telemetry", snapshots, TELEMETRY_WINDOW);
    this.events = this.lanes.open(EVENTS_LANE, new LogSource(deps.deliveryLog, MQTT, EVENTS_LANE), EVENTS_WINDOW);
  }

  /** Connected: the telemetry window follows the broker's Receive Maximum; both lanes send what is due. */
  connected(telemetryWindow: number): void {
    this.telemetry.resize(telemetryWindow);
    this.events.wake();
  }

  /** A message was appended to the delivery log: the lanes its mqtt routes name wake. */
  messagesAppended(routes: readonly Route[]): void {
    this.lanes.wakeRoutes(routes, MQTT);
  }

  stats(): { telemetry: StreamStats; events: StreamStats } {
    return { telemetry: streamStats(this.telemetry.stats), events: streamStats(this.events.stats) };
  }

  /** What is in flight stays unsettled: after the store's cursor, in the log. */
  async stop(): Promise<void> {
    const lanes = this.lanes.stop();
    this.sink.close();
    await lanes;
  }
}

/** A lane's figures as the fleet reports its streams (attempts published, PUBACKs, refusals). */
function streamStats(l: LaneStats): StreamStats {
  return {
    published: l.sent + l.failures + l.in_flight,
    acked: l.sent,
    rejected: l.failures,
    in_flight: l.in_flight,
    last_error: l.last_error,
  };
}
