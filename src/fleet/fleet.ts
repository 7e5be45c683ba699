// The fleet uplink: one MQTT v5 connection to the fleet broker, publishing `status`
// (retained, with a Last Will), `telemetry` (its own cursor on the sample store), `events`
// (the mqtt consumer of the delivery log) and `devices` (retained) under
// {topic_prefix}/{site_id}/, QoS 1 and settled on PUBACK; answering `cmd/{name}` on the
// command's response topic below reply/. Topics, payloads and delivery: docs/fleet.md.
import { connect, type IClientOptions, type IClientPublishOptions, type MqttClient } from "mqtt";
import type { Config, FleetConfig } from "../config/schema.js";
import type { MetricsSource } from "../metrics.js";
import type { Part, PartHealth } from "../lifecycle.js";
import type { Clock } from "../util/clock.js";
import type { TelemetryCursor } from "../telemetry/sample-store.js";
import type { DeliveryLog, Route } from "../delivery/log.js";
import { SitegateError, errorMessage } from "../errors.js";
import type { CommandDeps } from "./commands.js";
import { CommandInbox, MAX_COMMAND_BYTES } from "./command-inbox.js";
import { SiteState } from "./site-state.js";
import { fleetGauges, type FleetStats } from "./gauges.js";

export type { FleetStats };
import { FleetStreams, TELEMETRY_WINDOW, telemetryWindow, type StreamStats } from "./streams.js";
import type { NonceStore } from "./nonces.js";
import { MQTT } from "./mqtt-sink.js";
import { brokerEndpoint } from "../util/loopback.js";
import { brokerBackoff, ReconnectBackoff, type BackoffPolicy } from "../util/reconnect-backoff.js";
import { MqttRedial } from "../util/mqtt-redial.js";
import { SecureContextCache } from "../util/tls-context.js";

/**
 * The MQTT 5 Maximum Packet Size the gateway announces: the largest command plus room for
 * its topic and properties (signature, response topic, correlation data). The broker drops
 * a larger publish for this client instead of sending it, so its size never reaches memory.
 */
export const MAX_PACKET_BYTES = MAX_COMMAND_BYTES + 64 * 1024;
/** A broker restart or a short network outage is not worth a warning; this long is. */
export const UNREACHABLE_WARN_MS = 120_000;
/**
 * The first status waits for the first stored snapshot (by then the devices are identified
 * and counted) or this long, whichever comes first: one status at start, not one per device found.
 */
export const FIRST_STATUS_HOLD_MS = 10_000;

export interface FleetDeps extends Omit<CommandDeps, "startedAt"> {
  config: Config;
  fleet: FleetConfig;
  /** The nonces of signed commands (committed before a command runs). */
  nonces: NonceStore;
  /** The delivery log: the fleet reads its events lane as consumer `mqtt`. */
  deliveryLog: DeliveryLog;
  /** The fleet's own consumer of the sample store (nonces.ts telemetryConsumer). */
  telemetry: TelemetryCursor;
  dispatch: CommandDeps["dispatch"] & { running(): number };
  /** Namespace of the data-push Idempotency-Keys (the uplink's instance id). */
  instance: () => string;
  /** Tests shorten the retry schedule of refused messages. */
  backoff?: (attempt: number) => number;
  /** How long the broker has been unreachable is measured on its monotonic clock. */
  clock: Pick<Clock, "mono">;
  /** The /healthz warnings (the lifecycle's), carried in the retained status. */
  warnings?: () => ReadonlyArray<{ code: string; message: string }>;
  /** Tests shorten the reconnect policy; default: brokerBackoff(host) (1 s doubling to 5 min, 30 s on loopback). */
  reconnect?: BackoffPolicy;
}

export class Fleet implements Part {
  readonly name = "fleet";
  private client: MqttClient | null = null;
  private streams: FleetStreams | null = null;
  private readonly base: string;
  private readonly startedAt = Date.now();
  private connects = 0;
  /**
   * The broker's Receive Maximum (MQTT v5 flow control) over every QoS 1 publish on this
   * connection, the lanes' and the state's and command answers' alike: publishes without
   * PUBACK, and those waiting for a slot. Not a delivery window: those are the lanes'
   * (streams.ts; the telemetry lane's is the one stats() reports).
   */
  private inflight = 0;
  private receiveMaximum = 65535;
  private readonly waiting: Array<() => void> = [];
  private stopping = false;
  private redial: MqttRedial | null = null;
  /** Until the first snapshot (or FIRST_STATUS_HOLD_MS), state publishes wait; forced if one asked. */
  private settled = false;
  private settleForce = false;
  private settleTimer: NodeJS.Timeout | null = null;
  /** Null without TLS; otherwise the one context every attempt uses. */
  private readonly tls: SecureContextCache | null;
  /** Since when (monotonic and wall ms) there has been no connection; null while connected. */
  private down: { mono: number; at: number } | null = null;

  private readonly inbox: CommandInbox;
  private readonly state: SiteState;

  constructor(private readonly deps: FleetDeps) {
    this.base = `${deps.fleet.topic_prefix}/${deps.config.site_id}`;
    this.tls = brokerEndpoint(deps.fleet.url).protocol === "mqtts" ? new SecureContextCache(deps.fleet) : null;
    const commandDeps: CommandDeps = { ...deps, startedAt: this.startedAt };
    this.inbox = new CommandInbox(
      { ...commandDeps, fleet: deps.fleet, nonces: deps.nonces },
      (sub) => this.topic(sub),
      (...a) => this.qos1(...a),
    );
    this.state = new SiteState(
      deps,
      (sub) => this.topic(sub),
      (...a) => this.qos1(...a),
      this.startedAt,
    );
  }

  topic(sub: string): string {
    return `${this.base}/${sub}`;
  }

  get connected(): boolean {
    return this.client?.connected === true;
  }

  start(): void {
    const { deps } = this;
    const f = deps.fleet;
    this.streams = new FleetStreams(
      { ...deps, site: deps.config.site_id },
      (sub) => this.topic(sub),
      (...a) => this.qos1(...a),
      () => this.connected,
    );
    this.settleTimer = setTimeout(() => this.settle(), FIRST_STATUS_HOLD_MS);
    const opts = this.clientOptions();
    this.down = { mono: deps.clock.mono(), at: Date.now() };
    const client = connect(opts);
    this.client = client;
    const backoff = new ReconnectBackoff(deps.reconnect ?? brokerBackoff(brokerEndpoint(f.url).host), () => deps.clock.mono());
    // One warning per outage (errors and retries after it at debug); `warned` is reset on connect.
    let warned = false;
    let announced = false;
    this.redial = new MqttRedial(client, backoff, {
      beforeAttempt: () => this.refreshTls(client),
      scheduled: (ms) => {
        if (this.stopping) return;
        const line = { retry_in_ms: ms, failures: backoff.streak };
        if (!announced) deps.log.warn(line, "fleet broker unreachable; telemetry waits in the store");
        else deps.log.debug(line, "fleet broker still unreachable");
        announced = true;
      },
    });
    let first = true;
    client.on("connect", (connack) => {
      // Small QoS 1 packets (an answer right after the PUBACK of its command) must not wait
      // for Nagle's algorithm and the peer's delayed ACK (~40-90 ms each on loopback).
      (client.stream as { setNoDelay?: (on: boolean) => void } | undefined)?.setNoDelay?.(true);
      this.connects++;
      this.down = null;
      warned = false;
      announced = false;
      this.receiveMaximum = connack.properties?.receiveMaximum ?? 65535;
      const window = telemetryWindow(this.receiveMaximum);
      const resumed = connack.sessionPresent === true;
      deps.log.info(
        { url: f.url, client_id: opts.clientId, receive_maximum: this.receiveMaximum, telemetry_window: window, session_resumed: resumed },
        "fleet broker connected",
      );
      // A resumed session keeps its subscription; a new one (or a broker that lost its
      // sessions) subscribes again, and so does each process once (its topic_prefix may be new).
      if (!resumed || first)
        client.subscribe(this.topic("cmd/#"), { qos: 1 }, (err) => {
          if (err) deps.log.error({ err: errorMessage(err) }, "cannot subscribe to the command topics");
        });
      // Status and devices are retained: the device view is sent again only at start, when it
      // changed, or when the broker has lost our session (and may have lost its retained
      // copies with it); the status (small) on every connection, since the broker may have
      // published our Will meanwhile (site-state.ts statusStale).
      this.state.statusStale();
      this.publishState(first || !resumed);
      first = false;
      this.streams?.connected(window);
      this.drainWaiting();
    });
    // While the connection is down the sink is not ready: the lanes send nothing new.
    client.on("close", () => {
      this.down ??= { mono: deps.clock.mono(), at: Date.now() };
    });
    client.on("error", (e) => {
      if (warned) deps.log.debug({ err: errorMessage(e) }, "fleet connection error");
      else deps.log.warn({ err: errorMessage(e) }, "fleet connection error");
      warned = true;
    });
    client.on("message", (topic, payload, packet) => this.inbox.receive(topic, payload, packet));
    deps.log.info(
      {
        url: f.url,
        prefix: this.base,
        telemetry_cursor: deps.telemetry.through,
        outbox: deps.deliveryLog.size(MQTT),
        signed_commands: this.inbox.signing,
      },
      "fleet uplink started",
    );
  }

  /** A snapshot was appended to the sample store (`samples_appended`). */
  samplesAppended(): void {
    if (this.stopping) return;
    this.streams?.telemetry.wake();
    if (!this.settled) this.settle();
    else this.publishState(false);
  }

  /** A message was appended to the delivery log (`messages_appended`). */
  messagesAppended(routes: readonly Route[]): void {
    if (!this.stopping) this.streams?.messagesAppended(routes);
  }

  /** The registry changed (`devices_changed`): the retained device view follows. */
  devicesChanged(): void {
    if (!this.stopping) this.publishState(false);
  }

  private clientOptions(): IClientOptions {
    const f = this.deps.fleet;
    const site = this.deps.config.site_id;
    const at = brokerEndpoint(f.url);
    return {
      // Host and port as the config check parsed them, not the URL string (MQTT.js parses that its own way).
      protocol: at.protocol,
      host: at.host,
      port: at.port,
      protocolVersion: 5,
      // A session the broker keeps for session_expiry_s after the connection drops: the
      // subscription stays, and commands published meanwhile wait there at their QoS.
      properties: { maximumPacketSize: MAX_PACKET_BYTES, sessionExpiryInterval: f.session_expiry_s },
      clientId: f.client_id ?? `sitegate-${site}`,
      keepalive: f.keepalive_s,
      clean: false,
      // Reconnects are driven by MqttRedial on the backoff policy.
      reconnectPeriod: 0,
      connectTimeout: 15_000,
      resubscribe: false,
      // Topic aliases for what we publish, within the broker's Topic Alias Maximum (CONNACK).
      autoAssignTopicAlias: true,
      // A keepalive timer cleared and set again on every PUBACK costs more than the telemetry
      // it rides with under --jitless; a PINGREQ every keepalive_s while busy costs nothing.
      reschedulePings: false,
      ...(f.username !== undefined ? { username: f.username } : {}),
      ...(f.password !== undefined ? { password: f.password } : {}),
      ...(this.tls ? { secureContext: this.tls.get() } : {}),
      rejectUnauthorized: true,
      will: {
        topic: this.topic("status"),
        payload: Buffer.from(JSON.stringify({ state: "offline", site_id: site })),
        qos: 1,
        retain: true,
        // A broker restart or a failover shorter than this publishes no offline status.
        properties: { willDelayInterval: f.will_delay_s },
      },
      log: () => {},
    };
  }

  /** The TLS context for the next attempt: rebuilt only when ca_file, cert_file or key_file changed. */
  private refreshTls(client: MqttClient): void {
    if (!this.tls) return;
    try {
      (client.options as { secureContext?: unknown }).secureContext = this.tls.get();
    } catch (e) {
      this.deps.log.warn({ err: errorMessage(e) }, "cannot read the fleet TLS files; the previous ones are used");
    }
  }

  /** A QoS 1 publish within the broker's Receive Maximum (a publish beyond it would cost the connection). */
  private qos1(topic: string, payload: string, opts: IClientPublishOptions, done: (err?: Error) => void): void {
    const go = () => {
      const client = this.client;
      if (!client) return done(new SitegateError("UNAVAILABLE", "fleet uplink stopped", { transient: true }));
      this.inflight++;
      client.publish(topic, payload, { ...opts, qos: 1 }, (err) => {
        this.inflight--;
        this.drainWaiting();
        done(err ?? undefined);
      });
    };
    if (this.inflight < this.receiveMaximum) go();
    else this.waiting.push(go);
  }

  private drainWaiting(): void {
    while (this.waiting.length && this.inflight < this.receiveMaximum && this.connected) this.waiting.shift()!();
  }

  /** The retained state topics, while connected. */
  private publishState(force: boolean): void {
    if (!this.settled) this.settleForce ||= force;
    else if (this.connected) this.state.publish(force);
  }

  /** Start-up is over: the held state publish goes out. */
  private settle(): void {
    if (this.settleTimer) clearTimeout(this.settleTimer);
    this.settleTimer = null;
    this.settled = true;
    this.publishState(this.settleForce);
  }

  stats(): FleetStats {
    return {
      connected: this.connected,
      connects: this.connects,
      commands: this.inbox.commands,
      ...(this.streams?.stats() ?? { telemetry: NO_STATS, events: NO_STATS }),
      telemetry_cursor: this.deps.telemetry.through,
      telemetry_window: this.streams?.telemetry.windowSize ?? TELEMETRY_WINDOW,
      attempts: this.redial?.attempts ?? 0,
      tls_contexts: this.tls?.built ?? 0,
    };
  }

  /** A warning while the broker has been unreachable for longer than UNREACHABLE_WARN_MS. */
  health(): PartHealth {
    const down = this.down;
    const ms = down && !this.stopping ? this.deps.clock.mono() - down.mono : 0;
    if (!down || ms < UNREACHABLE_WARN_MS) return { warnings: [] };
    const since = new Date(down.at).toISOString();
    const message = `the fleet broker has been unreachable for ${Math.round(ms / 1000)} s (since ${since}); telemetry and events wait in the store`;
    return { warnings: [{ code: "fleet_broker_unreachable", message }] };
  }

  /** Prometheus figures for /metrics. */
  gauges(): ReturnType<MetricsSource["gauges"]> {
    return fleetGauges(this.stats(), this.deps.telemetry.backlog, this.inbox.refused);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.redial?.stop();
    if (this.settleTimer) clearTimeout(this.settleTimer);
    await this.streams?.stop();
    const client = this.client;
    if (client) {
      // A clean stop says so itself (the Last Will is only for a gateway that vanished).
      if (client.connected) {
        const offline = JSON.stringify({ state: "offline", site_id: this.deps.config.site_id, at: new Date().toISOString() });
        await Promise.race([
          client.publishAsync(this.topic("status"), offline, { qos: 1, retain: true }).catch(() => {}),
          new Promise((r) => setTimeout(r, 1000)),
        ]);
      }
      // A DISCONNECT, so the broker drops the Last Will; forced if the broker does not take it within 1 s.
      const ended = await Promise.race([
        client.endAsync(false).then(
          () => true,
          () => false,
        ),
        new Promise<boolean>((r) => setTimeout(() => r(false), 1000)),
      ]);
      if (!ended) await client.endAsync(true).catch(() => {});
      this.client = null;
    }
    this.waiting.length = 0;
  }
}

const NO_STATS: StreamStats = { published: 0, acked: 0, rejected: 0, in_flight: 0, last_error: null };
