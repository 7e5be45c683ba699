// The fleet uplink: one MQTT v5 connection to the fleet broker, publishing `status`
// (retained, with a Last Will), `telemetry` (its own cursor on the sample store), `events`
// (the mqtt consumer of the delivery log) and `devices` (retained) under
// {topic_prefix}/{site_id}/, QoS 1 and settled on PUBACK; answering `cmd/{name}` on the
// command's response topic below reply/. Topics, payloads and delivery: docs/fleet.md.
import { readFileSync, statSync } from "node:fs";
import { rootCertificates } from "node:tls";
import { connect, type IClientOptions, type IClientPublishOptions, type IPublishPacket, type MqttClient } from "mqtt";
import type { Config, FleetConfig } from "../config/schema.js";
import type { MetricsSource } from "../metrics.js";
import type { Part, PartHealth } from "../lifecycle.js";
import type { Clock } from "../util/clock.js";
import type { TelemetryCursor } from "../telemetry/sample-store.js";
import { backoffMs } from "../delivery/backoff.js";
import { Lane, type LaneStats } from "../delivery/lane.js";
import type { DeliveryLog, Route } from "../delivery/log.js";
import { LogSource } from "../delivery/log-source.js";
import { deviceSyncView, syncedDevices } from "../services/devices.js";
import { errorMessage } from "../errors.js";
import { VERSION } from "../version.js";
import { DEFAULT_ROOT, layout, readState } from "../update/install.js";
import { COMMANDS, errorAnswer, runCommand, type CommandAnswer, type CommandDeps } from "./commands.js";
import { SnapshotSource } from "../delivery/snapshot-source.js";
import { TelemetryBodies } from "./telemetry-bodies.js";
import type { NonceStore } from "./nonces.js";
import { EVENTS_LANE, MQTT, MqttSink, type MqttPublish } from "./mqtt-sink.js";
import { CommandVerifier, type Verdict } from "./signing.js";
import { brokerEndpoint } from "../util/loopback.js";
import { LogBudget } from "../util/log-budget.js";

/** Telemetry messages in flight at most (also capped by the broker's Receive Maximum). */
export const TELEMETRY_WINDOW = 32;
/** Stored snapshots handed to the telemetry lane at most past the oldest one without PUBACK. */
const TELEMETRY_AHEAD = 2 * TELEMETRY_WINDOW;
const EVENTS_WINDOW = 4;
/** Publishes the connection keeps free for status, devices and command answers. */
const RESERVED_INFLIGHT = 4;
const MAX_CONCURRENT_COMMANDS = 8;
const MAX_COMMAND_BYTES = 256 * 1024;
/**
 * The MQTT 5 Maximum Packet Size the gateway announces: the largest command plus room for
 * its topic and properties (signature, response topic, correlation data). The broker drops
 * a larger publish for this client instead of sending it, so its size never reaches memory.
 */
export const MAX_PACKET_BYTES = MAX_COMMAND_BYTES + 64 * 1024;
/** A broker restart or a short network outage is not worth a warning; this long is. */
export const UNREACHABLE_WARN_MS = 120_000;

export interface FleetDeps extends Omit<CommandDeps, "startedAt"> {
  config: Config;
  fleet: FleetConfig;
  /** The nonces of signed commands (committed before a command runs). */
  nonces: NonceStore;
  /** The delivery log: the fleet reads its events lane as consumer `mqtt`. */
  messages: DeliveryLog;
  /** The fleet's own consumer of the sample store (nonces.ts telemetryConsumer). */
  telemetry: TelemetryCursor;
  dispatch: CommandDeps["dispatch"] & { running(): number };
  /** Namespace of the data-push Idempotency-Keys (the uplink's instance id). */
  instance: () => string;
  /** Tests shorten the retry schedule of refused messages. */
  backoff?: (attempt: number) => number;
  /** How long the broker has been unreachable is measured on its monotonic clock. */
  clock: Pick<Clock, "mono">;
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

export interface FleetStats {
  connected: boolean;
  connects: number;
  commands: number;
  telemetry: StreamStats;
  events: StreamStats;
  telemetry_cursor: number;
  /** Telemetry messages in flight at most on this connection. */
  telemetry_window: number;
}

export class Fleet implements Part {
  readonly name = "fleet";
  private client: MqttClient | null = null;
  private telemetry: Lane | null = null;
  private events: Lane | null = null;
  private sink: MqttSink | null = null;
  private readonly base: string;
  private readonly startedAt = Date.now();
  private connects = 0;
  private commands = 0;
  private busyCommands = 0;
  private lastStatus = "";
  private lastDevices = "";
  /** QoS 1 publishes without PUBACK on this connection, and those waiting for a free slot. */
  private inflight = 0;
  private receiveMaximum = 65535;
  private telemetryWindow = TELEMETRY_WINDOW;
  private readonly waiting: Array<() => void> = [];
  private stopping = false;
  /** Connections that lasted under 30 s in a row: the reconnect delay grows with them. */
  private flaps = 0;
  private connectedAt = 0;
  /** Since when (monotonic and wall ms) there has been no connection; null while connected. */
  private down: { mono: number; at: number } | null = null;

  /** Commands not run, by reason: counted always, logged within a budget (forgeries come in floods). */
  private readonly refused = new Map<string, number>();
  private readonly refusedLog = new LogBudget();

  private readonly commandDeps: CommandDeps;
  /** Set when fleet.command_keys is: then every command must be signed. */
  private readonly verifier: CommandVerifier | null;

  constructor(private readonly deps: FleetDeps) {
    this.base = `${deps.fleet.topic_prefix}/${deps.config.site_id}`;
    this.commandDeps = { ...deps, startedAt: this.startedAt };
    this.verifier = deps.fleet.command_keys ? new CommandVerifier(deps.fleet.command_keys, deps.fleet.command_max_age_s) : null;
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
    this.startStreams();
    const opts = this.clientOptions();
    this.down = { mono: deps.clock.mono(), at: Date.now() };
    const client = connect(opts);
    this.client = client;
    // One warning per outage; the retries' errors (every few seconds) at debug.
    let warned = false;
    client.on("connect", (connack) => {
      // Small QoS 1 packets (an answer right after the PUBACK of its command) must not wait
      // for Nagle's algorithm and the peer's delayed ACK (~40-90 ms each on loopback).
      (client.stream as { setNoDelay?: (on: boolean) => void } | undefined)?.setNoDelay?.(true);
      this.connects++;
      this.down = null;
      warned = false;
      this.connectedAt = Date.now();
      this.receiveMaximum = connack.properties?.receiveMaximum ?? 65535;
      const window = (this.telemetryWindow = Math.max(
        1,
        Math.min(TELEMETRY_WINDOW, this.receiveMaximum - RESERVED_INFLIGHT - EVENTS_WINDOW),
      ));
      deps.log.info(
        { url: f.url, client_id: opts.clientId, receive_maximum: this.receiveMaximum, telemetry_window: window },
        "fleet broker connected",
      );
      this.publishState(true);
      this.events?.wake();
      this.telemetry?.resize(window);
      this.drainWaiting();
    });
    // While the connection is down the sink is not ready: the lanes send nothing new.
    client.on("close", () => {
      this.down ??= { mono: deps.clock.mono(), at: Date.now() };
    });
    client.on("offline", () => {
      if (this.stopping) return;
      this.flaps = this.connectedAt && Date.now() - this.connectedAt < 30_000 ? this.flaps + 1 : 0;
      // Read by MQTT.js right after `offline` for this outage's retry period.
      client.options.reconnectPeriod = this.reconnectDelay();
      deps.log.warn({ retry_every_ms: client.options.reconnectPeriod }, "fleet broker unreachable; telemetry waits in the store");
    });
    client.on("error", (e) => {
      if (warned) deps.log.debug({ err: errorMessage(e) }, "fleet connection error");
      else deps.log.warn({ err: errorMessage(e) }, "fleet connection error");
      warned = true;
    });
    client.on("message", (topic, payload, packet) => this.onCommand(topic, payload, packet));
    client.subscribe(this.topic("cmd/#"), { qos: 1 }, (err) => {
      if (err) deps.log.error({ err: errorMessage(err) }, "cannot subscribe to the command topics");
    });
    deps.log.info(
      {
        url: f.url,
        prefix: this.base,
        telemetry_cursor: deps.telemetry.through,
        outbox: deps.messages.size(MQTT),
        signed_commands: this.verifier
          ? `required (${f.command_keys!.length} key(s), max age ${f.command_max_age_s} s)`
          : "not required (the broker ACL is the only gate)",
      },
      "fleet uplink started",
    );
  }

  /** Telemetry (a lane on the fleet's consumer of the sample store) and events (a lane on the delivery log), into one sink. */
  private startStreams(): void {
    const { deps } = this;
    // The topic says what telemetry is; `events` carries a `kind` (execution_response, event_state).
    const publish: MqttPublish = (item, done) =>
      this.qos1(
        this.topic(item.address),
        item.body,
        {
          retain: false,
          properties: {
            userProperties: item.kind === "telemetry" ? { "idempotency-key": item.key } : { "idempotency-key": item.key, kind: item.kind },
            contentType: "application/json",
          },
        },
        done,
      );
    const backoff = deps.backoff ?? ((n: number) => backoffMs(n));
    const sink = (this.sink = new MqttSink(publish, () => this.connected));
    // A broker's refusal (not authorized, quota) is retried, never dead-lettered.
    const opts = { rejectWindowMs: Number.POSITIVE_INFINITY, idleRecheckMs: 2000 };
    // Telemetry: the stored snapshots after our own cursor, as the spec 2.6 bodies of the data push.
    const bodies = new TelemetryBodies(deps.config.site_id, deps.instance);
    const snapshots = new SnapshotSource(deps.telemetry, {
      kind: "telemetry",
      address: "telemetry",
      encode: (snap) => bodies.encode(snap),
      batch: TELEMETRY_WINDOW,
      maxAhead: TELEMETRY_AHEAD,
    });
    this.telemetry = new Lane("telemetry", snapshots, sink, deps.log, backoff, this.telemetryWindow, opts);
    this.events = new Lane(EVENTS_LANE, new LogSource(deps.messages, MQTT, EVENTS_LANE), sink, deps.log, backoff, EVENTS_WINDOW, opts);
    this.telemetry.start();
    this.events.start();
  }

  /** A snapshot was appended to the sample store (`samples_appended`). */
  samplesAppended(): void {
    if (this.stopping) return;
    this.telemetry?.wake();
    this.publishState(false);
  }

  /** A message was appended to the delivery log (`messages_appended`). */
  messagesAppended(routes: readonly Route[]): void {
    if (!this.stopping && routes.some((r) => r.consumer === MQTT)) this.events?.wake();
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
      properties: { maximumPacketSize: MAX_PACKET_BYTES },
      clientId: f.client_id ?? `sitegate-${site}`,
      keepalive: f.keepalive_s,
      clean: true,
      reconnectPeriod: this.reconnectDelay(),
      connectTimeout: 15_000,
      resubscribe: true,
      // A keepalive timer cleared and set again on every PUBACK costs more than the telemetry
      // it rides with under --jitless; a PINGREQ every keepalive_s while busy costs nothing.
      reschedulePings: false,
      ...(f.username !== undefined ? { username: f.username } : {}),
      ...(f.password !== undefined ? { password: f.password } : {}),
      ...(f.ca_file ? { ca: [...rootCertificates, readFileSync(f.ca_file, "utf8")] } : {}),
      ...(f.cert_file && f.key_file ? { cert: readFileSync(f.cert_file), key: readFileSync(f.key_file) } : {}),
      rejectUnauthorized: true,
      will: {
        topic: this.topic("status"),
        payload: Buffer.from(JSON.stringify({ state: "offline", site_id: site })),
        qos: 1,
        retain: true,
      },
      log: () => {},
    };
  }

  /** 2 s doubling per short-lived connection up to 60 s, jittered x0.5..1.5 so a fleet does not come back in step. */
  private reconnectDelay(): number {
    return Math.round(Math.min(60_000, 2000 * 2 ** this.flaps) * (0.5 + Math.random()));
  }

  /** A QoS 1 publish within the broker's Receive Maximum (a publish beyond it would cost the connection). */
  private qos1(topic: string, payload: string, opts: IClientPublishOptions, done: (err?: Error) => void): void {
    const go = () => {
      const client = this.client;
      if (!client) return done(new Error("fleet uplink stopped"));
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

  /** Retained `status` and `devices`, published when they change (or always, on a new connection). */
  private publishState(force: boolean): void {
    if (!this.connected) return;
    const { deps } = this;
    const listed = syncedDevices(deps.registry, deps.local);
    const devices = JSON.stringify(deviceSyncView(deps.config.site_id, listed, deps.health));
    const running = deps.dispatch.running();
    const lastUpdate = lastUpdateOutcome();
    const statusKey = `${listed.length}/${running}/${lastUpdate?.at ?? ""}/${lastUpdate?.result ?? ""}`;
    if (force || statusKey !== this.lastStatus) {
      this.lastStatus = statusKey;
      const status = {
        state: "online",
        site_id: deps.config.site_id,
        version: VERSION,
        started_at: new Date(this.startedAt).toISOString(),
        uptime_s: Math.round((Date.now() - this.startedAt) / 1000),
        devices: listed.length,
        running_events: running,
        last_update: lastUpdate,
        at: new Date().toISOString(),
      };
      this.qos1(this.topic("status"), JSON.stringify(status), { retain: true, properties: { contentType: "application/json" } }, (err) => {
        if (err) deps.log.warn({ err: errorMessage(err) }, "status not accepted by the broker");
      });
    }
    if (force || devices !== this.lastDevices) {
      this.lastDevices = devices;
      this.qos1(this.topic("devices"), devices, { retain: true, properties: { contentType: "application/json" } }, (err) => {
        if (err) deps.log.warn({ err: errorMessage(err) }, "device view not accepted by the broker");
      });
    }
  }

  private onCommand(topic: string, payload: Buffer, packet: IPublishPacket): void {
    const { log } = this.deps;
    const prefix = this.topic("cmd/");
    const name = topic.startsWith(prefix) ? topic.slice(prefix.length) : topic;
    const responseTopic = packet.properties?.responseTopic;
    const correlationData = packet.properties?.correlationData;
    if (packet.retain) {
      // A retained command would run again at every reconnect.
      this.refuse("retained", { topic }, "retained command ignored (commands must not be retained)");
      return;
    }
    if (!responseTopic) {
      this.refuse("no_response_topic", { topic }, "command without a response topic ignored");
      return;
    }
    // Answers go only below our own reply/ topic: a command must not make the gateway
    // publish on its status, telemetry or events (or anywhere else the broker lets it).
    const replyPrefix = this.topic("reply/");
    if (/[+#]/.test(responseTopic) || !responseTopic.startsWith(replyPrefix) || responseTopic.length === replyPrefix.length) {
      this.refuse(
        "response_topic",
        { topic, response_topic: responseTopic.slice(0, 200), allowed: `${replyPrefix}...` },
        "command with a response topic outside reply/ ignored",
      );
      return;
    }
    this.commands++;
    const answer = (a: CommandAnswer) => {
      if (a.status >= 400)
        this.refuse(String(a.status), { command: name.slice(0, 100), error: a.body.error, message: a.body.message }, "command refused");
      else log.debug({ command: name }, "command answered");
      this.qos1(
        responseTopic,
        JSON.stringify(a.body),
        {
          retain: false,
          properties: { ...(correlationData ? { correlationData } : {}), contentType: "application/json" },
        },
        (err) => {
          if (err)
            log.warn({ command: name, response_topic: responseTopic, err: errorMessage(err) }, "command answer not accepted by the broker");
        },
      );
    };
    if (payload.length > MAX_COMMAND_BYTES)
      return answer(errorAnswer(413, "payload_too_large", `the payload is over ${MAX_COMMAND_BYTES / 1024} KiB`));
    // Signed commands: signature and age before the payload is even parsed.
    let verdict: Verdict | null = null;
    if (this.verifier) {
      verdict = this.verifier.check(this.deps.config.site_id, name, payload, packet.properties?.userProperties, Date.now());
      if (!verdict.ok) return answer(errorAnswer(401, "unauthorized", verdict.message));
    }
    let body: unknown;
    if (payload.length > 0) {
      try {
        body = JSON.parse(payload.toString("utf8"));
      } catch {
        return answer(errorAnswer(400, "invalid_request", "the payload is not JSON"));
      }
    }
    if (!(COMMANDS as readonly string[]).includes(name))
      return answer(errorAnswer(404, "not_found", `no command "${name}" (known: ${COMMANDS.join(", ")})`));
    if (this.busyCommands >= MAX_CONCURRENT_COMMANDS)
      return answer(errorAnswer(503, "unavailable", "too many commands in progress; try again"));
    if (verdict?.ok) {
      const refused = this.claimNonce(verdict, name);
      if (refused) return answer(refused);
    }
    const r = runCommand(name, body, this.commandDeps);
    if (!(r instanceof Promise)) return answer(r);
    this.busyCommands++;
    r.then(answer, (e) => answer(errorAnswer(500, "internal", errorMessage(e)))).finally(() => this.busyCommands--);
  }

  /** Counts a command that is not run and logs it within the budget; the count says how many lines were held back. */
  private refuse(reason: string, fields: Record<string, unknown>, msg: string): void {
    this.refused.set(reason, (this.refused.get(reason) ?? 0) + 1);
    const held = this.refusedLog.take();
    if (held === null) return;
    this.deps.log.warn(
      { ...fields, reason, ...(held ? { not_logged_since_last: held } : {}) },
      `${msg} (further refusals within a minute only counted in sitegate_fleet_commands_refused_total)`,
    );
  }

  /** A signed command's nonce, committed before the command runs (a replay, even after a restart, finds it); an answer when it may not run. */
  private claimNonce(verdict: Extract<Verdict, { ok: true }>, name: string): CommandAnswer | null {
    let claim;
    try {
      claim = this.deps.nonces.claimNonce(verdict.nonce, verdict.expiresAt, Date.now());
    } catch (e) {
      this.deps.log.error({ command: name, err: errorMessage(e) }, "cannot store the command's nonce; not run");
      return errorAnswer(503, "unavailable", "storage cannot commit now; the command was not run");
    }
    if (claim === "replayed")
      return errorAnswer(
        409,
        "conflict",
        `nonce ${verdict.nonce} was used before; a signed command runs once (sign it again with a new nonce)`,
      );
    if (claim === "full") return errorAnswer(503, "unavailable", "too many signed commands within command_max_age_s; try again later");
    return null;
  }

  stats(): FleetStats {
    return {
      connected: this.connected,
      connects: this.connects,
      commands: this.commands,
      telemetry: streamStats(this.telemetry?.stats),
      events: streamStats(this.events?.stats),
      telemetry_cursor: this.deps.telemetry.through,
      telemetry_window: this.telemetryWindow,
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
    const st = this.stats();
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
        values: [{ value: this.deps.telemetry.backlog }],
      },
      { name: "sitegate_fleet_commands_total", help: "fleet commands received", type: "counter", values: [{ value: st.commands }] },
      {
        name: "sitegate_fleet_commands_refused_total",
        help: "fleet commands not run: ignored (retained, no or a foreign response topic) or answered with an error status",
        type: "counter",
        values: [...this.refused].map(([reason, value]) => ({ labels: { reason }, value })),
      },
    ];
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const lanes = [this.telemetry, this.events].map((l) => l?.stop() ?? Promise.resolve());
    // What is in flight stays unsettled: after the store's cursor, in the log.
    this.sink?.close();
    await Promise.all(lanes);
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

/** A lane's figures as the fleet reports its streams (attempts published, PUBACKs, refusals). */
function streamStats(l: LaneStats | undefined): StreamStats {
  if (!l) return { published: 0, acked: 0, rejected: 0, in_flight: 0, last_error: null };
  return {
    published: l.sent + l.failures + l.in_flight,
    acked: l.sent,
    rejected: l.failures,
    in_flight: l.in_flight,
    last_error: l.last_error,
  };
}

/**
 * The last update's outcome (applied and healthy, rolled back, abandoned, or a fleet request
 * refused) from the update state root keeps under /opt/sitegate/state (SITEGATE_ROOT in
 * tests); null when there is none or it cannot be read.
 */
function lastUpdateOutcome(): LastUpdate {
  // publishState runs on every snapshot: the file is read again only when it changed.
  const l = layout(process.env.SITEGATE_ROOT ?? DEFAULT_ROOT);
  let stamp = "";
  try {
    const st = statSync(l.stateFile);
    stamp = `${l.stateFile}:${st.mtimeMs}:${st.size}`;
  } catch {
    return null;
  }
  if (stamp === lastUpdateCache.stamp) return lastUpdateCache.value;
  const last = readState(l).last;
  const value = last ? { version: last.version, result: last.result, ...(last.reason ? { reason: last.reason } : {}), at: last.at } : null;
  lastUpdateCache = { stamp, value };
  return value;
}

type LastUpdate = { version: string; result: string; reason?: string; at: string } | null;
let lastUpdateCache: { stamp: string; value: LastUpdate } = { stamp: "", value: null };
