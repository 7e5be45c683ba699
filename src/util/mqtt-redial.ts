// Reconnects an MQTT.js client on the backoff policy (reconnect-backoff.ts) instead of its
// fixed reconnectPeriod (which never grows during an outage). The client is created with
// reconnectPeriod 0; every lost connection or failed attempt schedules one attempt after
// the policy's delay. The client's message stores are handed over, so that QoS 1 publishes
// in flight are sent again once it is back (MQTT.js's reconnect() would start empty ones).
import type { MqttClient } from "mqtt";
import type { ReconnectBackoff } from "./reconnect-backoff.js";

export interface RedialHooks {
  /** Right before each new attempt (e.g. to refresh the TLS context). */
  beforeAttempt?: () => void;
  /** An attempt was scheduled `delayMs` from now. */
  scheduled?: (delayMs: number) => void;
}

export class MqttRedial {
  /** Connection attempts made, the first one included. */
  attempts = 1;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly client: MqttClient,
    readonly backoff: ReconnectBackoff,
    private readonly hooks: RedialHooks = {},
  ) {
    client.on("connect", () => backoff.connected());
    client.on("close", () => this.schedule());
  }

  private schedule(): void {
    if (this.stopped || this.timer || this.client.connected) return;
    const delay = this.backoff.next();
    this.hooks.scheduled?.(delay);
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.stopped || this.client.connected) return;
      this.hooks.beforeAttempt?.();
      this.attempts++;
      const c = this.client;
      c.reconnect({ incomingStore: c.incomingStore, outgoingStore: c.outgoingStore });
    }, delay);
  }

  /** No further attempts (the client is being ended). */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
