// The MQTT sink of the delivery core: a lane's message (an event of the log, a telemetry
// snapshot of the sample store) is published with QoS 1 on its topic below
// {prefix}/{site_id}/, and settled on PUBACK only. A broker that refuses it
// (a PUBACK reason code >= 0x80) makes it `transient`: sent again after a backoff, never
// dead-lettered. While the connection is down the lane sends nothing new; MQTT.js resends
// the publishes in flight (same packet, same key) once it is back.
import type { Attempt, LaneItem, Sink } from "../delivery/lane.js";
import type { Route, Routes } from "../delivery/log.js";

export const MQTT = "mqtt";
export const EVENTS_LANE = "events";

/** Where a message for {prefix}/{site_id}/`topic` waits in the log (the events lane, in order). */
export function mqttRoute(topic = "events"): Route {
  return { consumer: MQTT, lane: EVENTS_LANE, address: topic };
}

/** The fleet's routing: every message dispatch hands over (execution responses, event states) goes to its events lane. */
export const fleetRoutes: Routes = () => mqttRoute();

const OK: Attempt = { outcome: "ok" };
const STOPPED: Attempt = { outcome: "transient", error: "fleet uplink stopped" };

export type MqttPublish = (item: LaneItem, done: (err?: Error) => void) => void;

export class MqttSink implements Sink {
  private readonly waiting = new Set<(a: Attempt) => void>();
  private closed = false;

  constructor(
    private readonly publish: MqttPublish,
    private readonly connected: () => boolean,
  ) {}

  ready(): boolean {
    return this.connected();
  }

  send(item: LaneItem, done: (a: Attempt) => void): void {
    if (this.closed) return done(STOPPED);
    const finish = (a: Attempt) => {
      if (this.waiting.delete(finish)) done(a);
    };
    this.waiting.add(finish);
    this.publish(item, (err) => finish(err ? { outcome: "transient", error: err.message } : OK));
  }

  /** The connection is closed for good: what is in flight stays unsettled (in the log, after the store's cursor). */
  close(): void {
    this.closed = true;
    for (const finish of [...this.waiting]) finish(STOPPED);
  }
}
