// The Zigbee devices of the config, through a zigbee2mqtt bridge and its documented MQTT
// API (MQTT 3.1.1, JSON payloads), on a connection of its own. It reads the retained
// `{base}/bridge/state` and `{base}/bridge/devices` (which friendly name an IEEE address
// has, and what the device exposes), each device's state messages and its availability.
// A command goes to `{base}/{name}/set` and counts only once a state message shows it
// done; none within the command timeout is a failed write, as a Modbus write that does
// not read back. When the bridge or the broker is gone, its devices are offline and
// nothing else stops. Every MQTT topic of the gateway's Zigbee side is in this file.
//
// Nothing from the broker is trusted: anyone who can publish there can forge the bridge's
// device list and any device's state. A friendly name goes into a topic only when it is
// safe there (zigbeeNameProblem) and belongs to a configured device; state messages are
// bounded and their readings checked (state.ts); a message that fails is counted, logged
// within a budget, and dropped, and the connection stays.
import { readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";
import type { IClientOptions, MqttClient } from "mqtt";
import { SitegateError, errorMessage } from "../errors.js";
import type { MetricFamily, Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { zigbeeNameProblem, type ZigbeeConfig, type ZigbeeDeviceConfig } from "../config/local-schema.js";
import { DeclaredDevice, type LocalDevice, type LocalFamily, type LocalRole } from "../devices/local.js";
import { opModeCode, roleOfWire, typed } from "../model/roles.js";
import type { DeviceDescriptor, DeviceHealth, Metrics } from "../devices/types.js";
import { brokerEndpoint } from "../util/loopback.js";
import { LogBudget } from "../util/log-budget.js";
import { parseBridgeDevices, parseOnline, stateMetrics, type Z2mDevice } from "./exposes.js";
import { MAX_PACKET_BYTES, MAX_STATUS_BYTES, readState, type StateValues } from "./state.js";

/** Why a message from the broker was dropped: the label of sitegate_zigbee_rejected_total. */
export type RejectReason =
  | "too_large"
  | "not_json"
  | "not_object"
  | "too_many_keys"
  | "bad_reading"
  | "bad_list"
  | "unsafe_name"
  | "unreadable";

interface Waiter {
  match: (payload: StateValues) => boolean;
  resolve: (payload: StateValues) => void;
}

/** One configured Zigbee device: its place in the bridge's list, its latest state, commands awaiting confirmation. */
class ZigbeeDevice extends DeclaredDevice implements LocalDevice {
  readonly role: LocalRole;
  info: Z2mDevice | undefined;
  /** The bridge's list names this device, under a name that cannot go into a topic. */
  refusedName: { name: string; why: string } | undefined;
  available: boolean | undefined;
  private payload: StateValues = {};
  private metrics: Metrics = {};
  private lastOk: string | null = null;
  private waiters = new Set<Waiter>();

  constructor(
    readonly cfg: ZigbeeDeviceConfig,
    private readonly bridge: ZigbeeBridge,
  ) {
    super(cfg);
    this.role = roleOfWire(cfg.device_type) === "thermostat" ? "thermostat" : "switch";
  }

  /** The name its topics use: the friendly name from the bridge's list (or the config's until the list arrives). */
  get topicName(): string | undefined {
    return this.info?.friendly_name ?? this.cfg.friendly_name;
  }

  descriptor(): DeviceDescriptor {
    const identity: Record<string, string> = {};
    if (this.info) identity.ieee_address = this.info.ieee_address;
    if (this.info?.model) identity.model = this.info.model;
    if (this.info?.vendor) identity.manufacturer = this.info.vendor;
    return {
      ...typed(this.role, "zigbee"),
      ...(this.rated_power_w !== undefined ? { max_power_w: this.rated_power_w } : {}),
      capabilities: ["telemetry", "shed", "restore"],
      profile: "zigbee2mqtt",
      identity,
    };
  }

  address(): string {
    return `${this.bridge.baseTopic}/${this.topicName ?? this.cfg.ieee_address}`;
  }

  /** Why the device cannot be used now, or undefined when it can. */
  private offlineReason(): string | undefined {
    if (!this.bridge.connected) return "the bridge's broker is not connected";
    if (this.bridge.bridgeOnline !== true) return "the zigbee2mqtt bridge is offline";
    if (this.refusedName)
      return `the bridge's list names it ${JSON.stringify(this.refusedName.name.slice(0, 100))}, which ${this.refusedName.why}`;
    if (!this.info) return "not in the bridge's device list";
    if (this.available === false) return "the bridge reports it offline";
    if (this.lastOk === null) return "no state reported yet";
    return undefined;
  }

  health(): DeviceHealth {
    const why = this.offlineReason();
    return {
      online: !why,
      last_ok_at: this.lastOk,
      last_error: why ?? null,
      consecutive_failures: 0,
      op_mode: opModeCode(why ? "unknown" : "automatic"),
    };
  }

  latest(): Metrics {
    return this.metrics;
  }

  /** The metrics again from the state known so far (the bridge's list may come after a state message). */
  refresh(): void {
    this.metrics = this.info ? stateMetrics(this.info, this.payload) : {};
  }

  /** Readings already checked (readState): merged over the known ones, a bounded set of keys. */
  onState(values: StateValues): void {
    Object.assign(this.payload, values);
    this.refresh();
    this.lastOk = new Date().toISOString();
    for (const w of [...this.waiters]) {
      if (w.match(this.payload)) {
        this.waiters.delete(w);
        w.resolve(this.payload);
      }
    }
  }

  private usable(): Z2mDevice {
    const why = this.offlineReason();
    if (why && !(why === "no state reported yet" && this.info))
      throw new SitegateError("DEVICE_OFFLINE", `${this.device_id}: ${why}`, { transient: true });
    return this.info!;
  }

  /** Publishes to `{name}/{suffix}` and waits for a state message that `match` accepts. */
  private async command(
    suffix: "set" | "get",
    body: Record<string, unknown>,
    match: (p: StateValues) => boolean,
    what: string,
  ): Promise<StateValues> {
    const name = this.topicName!;
    const timeoutMs = this.bridge.commandTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    let waiter!: Waiter;
    const confirmed = new Promise<StateValues>((resolve, reject) => {
      waiter = { match, resolve };
      this.waiters.add(waiter);
      timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(
          new SitegateError("DEVICE_TIMEOUT", `${this.device_id} (${name}) did not confirm ${what} within ${timeoutMs} ms`, {
            transient: true,
          }),
        );
      }, timeoutMs);
    });
    // The timeout may fire while the publish still waits for the broker's acknowledgement.
    confirmed.catch(() => undefined);
    try {
      await this.bridge.publish(`${name}/${suffix}`, body);
      return await confirmed;
    } catch (e) {
      this.waiters.delete(waiter);
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  async readOn(): Promise<boolean> {
    const info = this.usable();
    if (!info.onOff) throw new SitegateError("DEVICE_NOT_FOUND", `${this.device_id} exposes no on/off state`);
    const { property, on } = info.onOff;
    const known = (p: StateValues) => typeof p[property] === "string";
    const p = known(this.payload) ? this.payload : await this.command("get", { [property]: "" }, known, "a state read");
    return String(p[property]).toUpperCase() === on.toUpperCase();
  }

  async setOn(want: boolean): Promise<void> {
    const info = this.usable();
    if (!info.onOff) throw new SitegateError("DEVICE_NOT_FOUND", `${this.device_id} exposes no on/off state`);
    const { property, on, off } = info.onOff;
    const value = want ? on : off;
    await this.command(
      "set",
      { [property]: value },
      (p) => String(p[property]).toUpperCase() === value.toUpperCase(),
      `${property} ${value}`,
    );
  }

  async readSetpoint(): Promise<number> {
    const info = this.usable();
    if (!info.setpoint) throw new SitegateError("DEVICE_NOT_FOUND", `${this.device_id} exposes no heating setpoint`);
    const prop = info.setpoint.property;
    const known = (p: StateValues) => typeof p[prop] === "number";
    const p = known(this.payload) ? this.payload : await this.command("get", { [prop]: "" }, known, "a setpoint read");
    return p[prop] as number;
  }

  async setSetpoint(c: number): Promise<void> {
    const info = this.usable();
    if (!info.setpoint) throw new SitegateError("DEVICE_NOT_FOUND", `${this.device_id} exposes no heating setpoint`);
    const { property, min, max, step } = info.setpoint;
    const value = Math.round(Math.round(c / step) * step * 100) / 100;
    if (value < min || value > max)
      throw new SitegateError("CONTROL_VALUE_INVALID", `${this.device_id}: setpoint ${value} °C is outside ${min}..${max} °C`);
    await this.command(
      "set",
      { [property]: value },
      (p) => typeof p[property] === "number" && Math.abs((p[property] as number) - value) < 1e-6,
      `${property} ${value}`,
    );
  }
}

export class ZigbeeBridge implements Part, LocalFamily {
  readonly name = "zigbee";
  readonly baseTopic: string;
  readonly commandTimeoutMs: number;
  connected = false;
  /** From `bridge/state`: undefined until it is read. */
  bridgeOnline: boolean | undefined;
  private client: MqttClient | null = null;
  private connects = 0;
  private readonly devs: ZigbeeDevice[];
  /** Device topics subscribed in this session, by topic. */
  private readonly routes = new Map<string, { dev: ZigbeeDevice; kind: "state" | "availability" }>();
  private readonly rejected = new Map<RejectReason, number>();
  private readonly rejectLog = new LogBudget();

  constructor(
    private readonly cfg: ZigbeeConfig,
    private readonly log: Logger,
  ) {
    this.baseTopic = cfg.base_topic;
    this.commandTimeoutMs = cfg.command_timeout_ms;
    this.devs = cfg.devices.map((d) => new ZigbeeDevice(d, this));
  }

  devices(): readonly LocalDevice[] {
    return this.devs;
  }

  /** Connects in the background: a broker that is not up yet does not hold up the gateway (MQTT.js retries every second). */
  async start(): Promise<void> {
    const { connect } = await import("mqtt");
    const client = connect(this.clientOptions());
    this.client = client;
    client.on("connect", () => {
      this.connected = true;
      this.connects++;
      this.routes.clear();
      this.log.info({ url: this.cfg.url }, "connected to the zigbee2mqtt broker");
      client.subscribe([`${this.baseTopic}/bridge/state`, `${this.baseTopic}/bridge/devices`], { qos: 1 }, (err) => {
        if (err) this.log.warn({ err: errorMessage(err) }, "cannot subscribe to the bridge topics");
      });
      this.subscribeDevices();
    });
    client.on("close", () => {
      if (this.connected) this.log.warn("lost the zigbee2mqtt broker; its devices are offline until it is back");
      this.connected = false;
    });
    client.on("error", (e) => this.log.debug({ err: errorMessage(e) }, "zigbee broker connection error"));
    client.on("message", (topic, payload) => {
      try {
        this.onMessage(topic, payload);
      } catch (e) {
        this.reject("unreadable", topic, errorMessage(e));
      }
    });
  }

  private clientOptions(): IClientOptions {
    const { cfg } = this;
    const at = brokerEndpoint(cfg.url);
    return {
      // Host and port as the config check parsed them, not the URL string (MQTT.js parses that its own way).
      protocol: at.protocol,
      host: at.host,
      port: at.port,
      // MQTT 5 for its Maximum Packet Size: the broker drops a larger message for this client
      // rather than send it (MQTT 3.1.1 has no way to refuse one short of reading it).
      protocolVersion: 5,
      properties: { maximumPacketSize: MAX_PACKET_BYTES },
      clientId: `sitegate-zigbee-${Math.random().toString(16).slice(2, 10)}`,
      clean: true,
      reconnectPeriod: 1000,
      connectTimeout: 5000,
      ...(cfg.username ? { username: cfg.username, password: cfg.password } : {}),
      ...(at.protocol === "mqtts" ? { rejectUnauthorized: true } : {}),
      ...(at.protocol === "mqtts" && cfg.ca_file ? { ca: [...rootCertificates, readFileSync(cfg.ca_file, "utf8")] } : {}),
    };
  }

  async stop(): Promise<void> {
    const c = this.client;
    this.client = null;
    this.connected = false;
    if (c) await c.endAsync(true).catch(() => undefined);
  }

  metrics(): MetricFamily[] {
    return [
      {
        name: "sitegate_zigbee_connected",
        help: "1 while the zigbee2mqtt broker connection is up",
        type: "gauge",
        values: [{ value: this.connected ? 1 : 0 }],
      },
      {
        name: "sitegate_zigbee_connects_total",
        help: "connections made to the zigbee2mqtt broker",
        type: "counter",
        values: [{ value: this.connects }],
      },
      {
        name: "sitegate_zigbee_rejected_total",
        help: "messages from the zigbee2mqtt broker dropped (too large, malformed, unbelievable readings, unsafe names)",
        type: "counter",
        values: [...this.rejected].map(([reason, value]) => ({ labels: { reason }, value })),
      },
    ];
  }

  /**
   * A command to `{base}/{sub}`. QoS 0: a command counts only once a state message confirms
   * it, and MQTT.js would send an unacknowledged QoS 1 message again on every reconnect, a
   * stale command long after its timeout.
   */
  async publish(sub: string, body: Record<string, unknown>): Promise<void> {
    const c = this.client;
    if (!c || !this.connected) throw new SitegateError("DEVICE_OFFLINE", "the zigbee2mqtt broker is not connected", { transient: true });
    const topic = `${this.baseTopic}/${sub}`;
    // Device names are checked when the bridge's list arrives; this is the last line before the wire.
    if (/[+#]/.test(topic) || topic.includes("\0"))
      throw new SitegateError("DEVICE_NOT_FOUND", `refusing to publish to ${JSON.stringify(topic)}`);
    await c.publishAsync(topic, JSON.stringify(body), { qos: 0, retain: false });
  }

  /** Counts a dropped message and logs it within the budget (a flood of forgeries is a counter, not a journal). */
  private reject(reason: RejectReason, topic: string, detail: string): void {
    this.rejected.set(reason, (this.rejected.get(reason) ?? 0) + 1);
    const held = this.rejectLog.take();
    if (held === null) return;
    this.log.warn(
      { topic: topic.slice(0, 200), reason, detail: detail.slice(0, 300), ...(held ? { not_logged_since_last: held } : {}) },
      "zigbee2mqtt message dropped (further ones within a minute only counted in sitegate_zigbee_rejected_total)",
    );
  }

  private onMessage(topic: string, payload: Buffer): void {
    const b = this.baseTopic;
    if (topic === `${b}/bridge/state`) {
      if (payload.length > MAX_STATUS_BYTES) return this.reject("too_large", topic, `${payload.length} bytes`);
      const online = parseOnline(payload.toString("utf8"));
      // An unreadable state says nothing: the bridge's last word stands.
      if (online === undefined) return this.reject("not_json", topic, "neither online nor offline");
      if (online !== this.bridgeOnline) this.log.info({ state: online ? "online" : "offline" }, "zigbee2mqtt bridge state");
      this.bridgeOnline = online;
      return;
    }
    if (topic === `${b}/bridge/devices`) return this.onDevicesMessage(topic, payload);
    const route = this.routes.get(topic);
    if (!route) return;
    if (route.kind === "availability") {
      if (payload.length > MAX_STATUS_BYTES) return this.reject("too_large", topic, `${payload.length} bytes`);
      const a = parseOnline(payload.toString("utf8"));
      if (a === undefined) return this.reject("not_json", topic, "neither online nor offline");
      route.dev.available = a;
      return;
    }
    const v = readState(payload);
    if (!v.ok) return this.reject(v.reason, topic, v.detail);
    if (v.refused.length) this.reject("bad_reading", topic, `not believable: ${v.refused.join(", ")}`);
    // A message whose every reading was refused says nothing about the device.
    if (Object.keys(v.values).length > 0 || v.refused.length === 0) route.dev.onState(v.values);
  }

  private onDevicesMessage(topic: string, payload: Buffer): void {
    let json: unknown;
    try {
      json = JSON.parse(payload.toString("utf8"));
    } catch {
      return this.reject("bad_list", topic, "not JSON");
    }
    if (!Array.isArray(json)) return this.reject("bad_list", topic, "not a JSON array");
    this.onDevices(parseBridgeDevices(json));
  }

  /** Why a listed name may not be this device's topic, given the names other devices hold. */
  private nameProblem(name: string, deviceId: string, taken: Map<string, string>): string | undefined {
    const problem = zigbeeNameProblem(name);
    if (problem) return problem;
    const holder = taken.get(name);
    return holder !== undefined && holder !== deviceId ? `is the name of ${holder} too` : undefined;
  }

  /** The bridge's list: which device each config entry is, by friendly name or IEEE address. */
  private onDevices(list: Z2mDevice[]): void {
    const taken = new Map(this.devs.flatMap((d) => (d.cfg.friendly_name ? [[d.cfg.friendly_name, d.device_id] as const] : [])));
    for (const d of this.devs) {
      const hit = list.find((x) => (d.cfg.ieee_address ? x.ieee_address === d.cfg.ieee_address : x.friendly_name === d.cfg.friendly_name));
      const why = hit && this.nameProblem(hit.friendly_name, d.device_id, taken);
      if (hit && why) {
        if (d.refusedName?.name !== hit.friendly_name)
          this.reject(
            "unsafe_name",
            `${this.baseTopic}/bridge/devices`,
            `${d.device_id}: ${JSON.stringify(hit.friendly_name.slice(0, 100))} ${why}`,
          );
        d.refusedName = { name: hit.friendly_name, why };
        d.info = undefined;
        d.refresh();
        continue;
      }
      d.refusedName = undefined;
      if (hit) taken.set(hit.friendly_name, d.device_id);
      if (!hit && d.info) this.log.warn({ device_id: d.device_id }, "zigbee device no longer in the bridge's device list");
      const found = hit && !d.info;
      if (found)
        this.log.info({ device_id: d.device_id, friendly_name: hit.friendly_name, ieee_address: hit.ieee_address }, "zigbee device found");
      d.info = hit;
      d.refresh();
      if (found && this.routes.has(`${this.baseTopic}/${hit.friendly_name}`)) this.askState(d);
    }
    this.subscribeDevices();
  }

  /** Asks a device for its state (state messages are not retained). */
  private askState(d: ZigbeeDevice): void {
    if (!d.info) return;
    const prop = d.info.setpoint?.property ?? d.info.onOff?.property ?? "state";
    this.publish(`${d.topicName}/get`, { [prop]: "" }).catch(() => undefined);
  }

  /** Subscribes each device's state and availability topics (again when a friendly name changed). */
  private subscribeDevices(): void {
    const c = this.client;
    if (!c || !this.connected) return;
    const want = new Map<string, { dev: ZigbeeDevice; kind: "state" | "availability" }>();
    for (const d of this.devs) {
      const name = d.topicName;
      if (!name) continue;
      want.set(`${this.baseTopic}/${name}`, { dev: d, kind: "state" });
      want.set(`${this.baseTopic}/${name}/availability`, { dev: d, kind: "availability" });
    }
    const gone = [...this.routes.keys()].filter((t) => !want.has(t));
    const added = [...want.keys()].filter((t) => !this.routes.has(t));
    for (const t of gone) this.routes.delete(t);
    for (const t of added) this.routes.set(t, want.get(t)!);
    if (gone.length) c.unsubscribe(gone);
    if (added.length) {
      c.subscribe(added, { qos: 1 }, (err) => {
        if (err) return this.log.warn({ err: errorMessage(err) }, "cannot subscribe to zigbee device topics");
        // State messages are not retained: ask each newly subscribed device for its state
        // rather than wait for its next periodic report.
        for (const t of added) if (want.get(t)!.kind === "state") this.askState(want.get(t)!.dev);
      });
    }
  }
}
