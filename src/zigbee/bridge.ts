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
// safe there (zigbeeNameProblem) and belongs to a configured device; every message is
// bounded before it is parsed (the device list 1 MiB and 1,000 devices, any other topic
// 64 KiB) and state readings are checked (state.ts); a message that fails is counted,
// logged within a budget (an oversized one once a minute), and dropped, and the
// connection stays.
import type { IClientOptions, MqttClient } from "mqtt";
import { SitegateError, errorMessage } from "../errors.js";
import type { MetricFamily, Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { zigbeeNameProblem, type ZigbeeConfig } from "./config-schema.js";
import type { LocalDevice } from "../devices/local.js";
import type { DeviceFamily } from "../devices/family.js";
import { brokerEndpoint } from "../util/loopback.js";
import { LogBudget } from "../util/log-budget.js";
import { brokerBackoff, ReconnectBackoff, type BackoffPolicy } from "../util/reconnect-backoff.js";
import { MqttRedial } from "../util/mqtt-redial.js";
import { SecureContextCache } from "../util/tls-context.js";
import { parseBridgeDevices, parseOnline, type Z2mDevice } from "./exposes.js";
import { MAX_DEVICES_BYTES, MAX_MESSAGE_BYTES, MAX_PACKET_BYTES, MAX_STATUS_BYTES, readDeviceList, readState } from "./state.js";
import { ZigbeeDevice, type BridgeLink } from "./device.js";

/** Why a message from the broker was dropped: the label of sitegate_zigbee_rejected_total. */
export type RejectReason =
  | "too_large"
  | "too_many_devices"
  | "not_json"
  | "not_object"
  | "too_many_keys"
  | "bad_reading"
  | "bad_list"
  | "unsafe_name"
  | "unreadable";

export class ZigbeeBridge implements Part, DeviceFamily, BridgeLink {
  readonly name = "zigbee";
  readonly family = "zigbee";
  readonly baseTopic: string;
  readonly commandTimeoutMs: number;
  connected = false;
  /** From `bridge/state`: undefined until it is read. */
  bridgeOnline: boolean | undefined;
  private client: MqttClient | null = null;
  private redial: MqttRedial | null = null;
  /** Null without TLS; otherwise the one context every attempt uses (rebuilt when ca_file changes). */
  readonly tls: SecureContextCache | null;
  private connects = 0;
  private readonly devs: ZigbeeDevice[];
  /** Device topics subscribed in this session, by topic. */
  private readonly routes = new Map<string, { dev: ZigbeeDevice; kind: "state" | "availability" }>();
  private readonly rejected = new Map<RejectReason, number>();
  private readonly rejectLog = new LogBudget();
  /** Oversized messages: one line a minute (a retained one arrives again on every reconnect). */
  private readonly oversizeLog = new LogBudget(1);

  constructor(
    private readonly cfg: ZigbeeConfig,
    private readonly log: Logger,
    /** Tests shorten it; default brokerBackoff(host): 1 s doubling to 30 s on loopback, 5 min elsewhere. */
    private readonly reconnect: BackoffPolicy = brokerBackoff(brokerEndpoint(cfg.url).host),
  ) {
    this.baseTopic = cfg.base_topic;
    this.commandTimeoutMs = cfg.command_timeout_ms;
    this.devs = cfg.devices.map((d) => new ZigbeeDevice(d, this));
    this.tls = brokerEndpoint(cfg.url).protocol === "mqtts" ? new SecureContextCache({ ca_file: cfg.ca_file }) : null;
  }

  /** Connection attempts made (the first included). */
  get attempts(): number {
    return this.redial?.attempts ?? 0;
  }

  devices(): readonly LocalDevice[] {
    return this.devs;
  }

  /**
   * Connects in the background: a broker that is not up yet does not hold up the gateway.
   * Retries back off from 1 s to 30 s on a loopback broker, 5 min on another (reconnect-backoff.ts).
   */
  async start(): Promise<void> {
    const { connect } = await import("mqtt");
    const client = connect(this.clientOptions());
    this.client = client;
    const backoff = new ReconnectBackoff(this.reconnect, () => performance.now());
    this.redial = new MqttRedial(client, backoff, {
      beforeAttempt: () => {
        if (!this.tls) return;
        try {
          (client.options as { secureContext?: unknown }).secureContext = this.tls.get();
        } catch (e) {
          this.log.warn({ err: errorMessage(e) }, "cannot read the zigbee broker's ca_file; the previous one is used");
        }
      },
    });
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
      // Reconnects are driven by MqttRedial on the backoff policy.
      reconnectPeriod: 0,
      connectTimeout: 5000,
      ...(cfg.username ? { username: cfg.username, password: cfg.password } : {}),
      ...(this.tls ? { rejectUnauthorized: true, secureContext: this.tls.get() } : {}),
    };
  }

  async stop(): Promise<void> {
    const c = this.client;
    this.client = null;
    this.connected = false;
    this.redial?.stop();
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
    const oversize = reason === "too_large" || reason === "too_many_devices";
    const held = (oversize ? this.oversizeLog : this.rejectLog).take();
    if (held === null) return;
    this.log.warn(
      { topic: topic.slice(0, 200), reason, detail: detail.slice(0, 300), ...(held ? { not_logged_since_last: held } : {}) },
      "zigbee2mqtt message dropped (further ones within a minute only counted in sitegate_zigbee_rejected_total)",
    );
  }

  private onMessage(topic: string, payload: Buffer): void {
    const b = this.baseTopic;
    // Bounded before anything else looks at it, whatever the topic.
    const cap = topic === `${b}/bridge/devices` ? MAX_DEVICES_BYTES : MAX_MESSAGE_BYTES;
    if (payload.length > cap) return this.reject("too_large", topic, `${payload.length} bytes (at most ${cap})`);
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
    const v = readDeviceList(payload);
    if (!v.ok) return this.reject(v.reason, topic, v.detail);
    this.onDevices(parseBridgeDevices(v.list));
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
        d.listed = undefined;
        d.refresh();
        continue;
      }
      d.refusedName = undefined;
      if (hit) taken.set(hit.friendly_name, d.device_id);
      if (!hit && d.listed) this.log.warn({ device_id: d.device_id }, "zigbee device no longer in the bridge's device list");
      const found = hit && !d.listed;
      if (found)
        this.log.info({ device_id: d.device_id, friendly_name: hit.friendly_name, ieee_address: hit.ieee_address }, "zigbee device found");
      d.listed = hit;
      d.refresh();
      if (found && this.routes.has(`${this.baseTopic}/${hit.friendly_name}`)) this.askState(d);
    }
    this.subscribeDevices();
  }

  /** Asks a device for its state (state messages are not retained). */
  private askState(d: ZigbeeDevice): void {
    if (!d.listed) return;
    const prop = d.listed.setpoint?.property ?? d.listed.onOff?.property ?? "state";
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
