// The simulator as a zigbee2mqtt bridge (DESIGN B7): it speaks only zigbee2mqtt's
// documented MQTT API on the scenario's broker, so a gateway built against it works with a
// real zigbee2mqtt. Under the base topic:
//   bridge/state              retained {"state":"online"|"offline"} (also the MQTT will)
//   bridge/info, bridge/devices, bridge/groups   retained, published at connect
//   bridge/logging            {"level","message","namespace"}: refused or failed commands
//   bridge/request/health_check -> bridge/response/health_check {"data":{"healthy":true},"status":"ok"}
//   {friendly_name}           the device's state (JSON), on change and every report interval
//   {friendly_name}/availability   retained {"state":"online"|"offline"}
//   {friendly_name}/set       commands (JSON; also /set/<property> with a plain value)
//   {friendly_name}/get       {"state": ""} and the like: the device answers with its state
// A command is answered after a short seeded delay, like a device over the radio.
import { readFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { connect, type IClientOptions, type MqttClient } from "mqtt";
import type { Logger } from "pino";
import type { SiteModel } from "./site-model.js";
import type { ZigbeeSpec } from "./scenario.js";
import { hashString, noise } from "./random.js";
import { buildZigbeeDevice, ZIGBEE_FAULTS, type ZigbeeDevice, type ZigbeeFault, type ZigbeeWrite } from "./zigbee-devices.js";

const WRITE_LOG_MAX = 200;
/** How long zigbee2mqtt waits for a device before it logs a failed command (shortened). */
export const COMMAND_TIMEOUT_MS = 1500;
const CONNECT_TIMEOUT_MS = 10_000;
/** Bridges started by this process: part of the MQTT client id, so two never take each other's session. */
let instances = 0;

export class ZigbeeBridge {
  readonly devices = new Map<string, ZigbeeDevice>();
  readonly base: string;
  /** The bridge's own state: "offline" as if zigbee2mqtt had stopped (POST /zigbee/bridge). */
  bridgeOnline = true;
  private client: MqttClient | null = null;
  private connected = false;
  private stopped = false;
  private ticker: NodeJS.Timeout | null = null;
  private readonly pending = new Set<NodeJS.Timeout>();
  private readonly coordinatorIeee: string;

  constructor(
    readonly spec: ZigbeeSpec,
    private readonly site: SiteModel,
    private readonly log: Logger,
    private readonly baseDir: string,
  ) {
    this.base = spec.base_topic;
    for (const d of spec.devices) {
      const dev = buildZigbeeDevice(d, site, (d.report_interval_s ?? spec.report_interval_s) * 1000);
      this.devices.set(d.friendly_name, dev);
    }
    const seen = new Map<string, string>();
    for (const d of this.devices.values()) {
      const other = seen.get(d.ieee);
      if (other) throw new Error(`scenario is invalid: zigbee devices "${other}" and "${d.name}" have the same ieee_address ${d.ieee}`);
      seen.set(d.ieee, d.name);
    }
    this.coordinatorIeee = `0x00124b01${((hashString("coordinator") ^ site.seed) >>> 0).toString(16).padStart(8, "0")}`;
  }

  /** Connects to the broker and publishes the bridge's retained topics; rejects if the broker cannot be reached in 10 s. */
  async start(): Promise<void> {
    const opts: IClientOptions = {
      clientId: `sitegate-sim-z2m-${process.pid}-${++instances}`,
      protocolVersion: 4,
      reconnectPeriod: 1000,
      connectTimeout: 5000,
      clean: true,
      will: { topic: `${this.base}/bridge/state`, payload: Buffer.from(JSON.stringify({ state: "offline" })), qos: 1, retain: true },
      ...(this.spec.username !== undefined ? { username: this.spec.username } : {}),
      ...(this.spec.password !== undefined ? { password: this.spec.password } : {}),
      ...(this.spec.ca_file
        ? { ca: readFileSync(isAbsolute(this.spec.ca_file) ? this.spec.ca_file : resolve(this.baseDir, this.spec.ca_file)) }
        : {}),
    };
    const client = connect(this.spec.broker, opts);
    this.client = client;
    let lastError = "";
    client.on("error", (e) => {
      lastError = e.message;
      this.log.warn({ err: e.message, broker: this.spec.broker }, "zigbee bridge: mqtt error");
    });
    client.on("close", () => {
      if (this.connected) this.log.warn({ broker: this.spec.broker }, "zigbee bridge: disconnected from the broker");
      this.connected = false;
    });
    client.on("message", (topic, payload, packet) => this.onMessage(topic, payload, packet.retain));
    // Like zigbee2mqtt, the start fails when the first connection does; later losses are retried.
    let everConnected = false;
    const firstReady = new Promise<void>((res, rej) => {
      client.on("connect", () => {
        everConnected = true;
        void this.onConnect().then(res, (e: Error) => this.log.warn({ err: e.message }, "zigbee bridge: publish at connect failed"));
      });
      client.on("close", () => {
        if (!everConnected) rej(new Error(`zigbee: cannot connect to the broker ${this.spec.broker}: ${lastError || "connection closed"}`));
      });
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, rej) => {
      timer = setTimeout(
        () =>
          rej(
            new Error(
              `zigbee: cannot reach the broker ${this.spec.broker} within ${CONNECT_TIMEOUT_MS / 1000} s${lastError ? `: ${lastError}` : ""}`,
            ),
          ),
        CONNECT_TIMEOUT_MS,
      );
    });
    try {
      await Promise.race([firstReady, timeout]);
    } catch (e) {
      await this.stop();
      throw e;
    } finally {
      clearTimeout(timer);
    }
    this.ticker = setInterval(() => this.tick(), 250);
    this.ticker.unref();
  }

  private async onConnect(): Promise<void> {
    const c = this.client!;
    this.connected = true;
    await c.subscribeAsync(`${this.base}/#`, { qos: 1 });
    this.log.info({ broker: this.spec.broker, base_topic: this.base, devices: [...this.devices.keys()] }, "zigbee bridge connected");
    await this.publishAll();
  }

  /** Everything zigbee2mqtt publishes when it starts (or comes back). */
  private async publishAll(): Promise<void> {
    await this.pub("bridge/state", { state: this.bridgeOnline ? "online" : "offline" }, true);
    if (!this.bridgeOnline) {
      for (const d of this.devices.values()) await this.pub(`${d.name}/availability`, { state: "offline" }, true);
      return;
    }
    await this.pub("bridge/info", this.info(), true);
    await this.pub("bridge/devices", this.deviceList(), true);
    await this.pub("bridge/groups", [], true);
    for (const d of this.devices.values()) {
      await this.pub(`${d.name}/availability`, { state: d.online ? "online" : "offline" }, true);
      if (d.online) this.report(d);
    }
  }

  private pub(sub: string, body: unknown, retain: boolean): Promise<unknown> {
    const c = this.client;
    if (!c || !this.connected) return Promise.resolve();
    return c.publishAsync(`${this.base}/${sub}`, JSON.stringify(body), { qos: retain ? 1 : 0, retain }).catch((e: Error) => {
      this.log.warn({ err: e.message, topic: `${this.base}/${sub}` }, "zigbee bridge: publish failed");
    });
  }

  /** A state message on {base}/{friendly_name}. */
  private report(d: ZigbeeDevice): void {
    d.dirty = false;
    d.lastReportMs = Date.now();
    void this.pub(d.name, d.stateMessage(), false);
  }

  private logging(level: "error" | "warning" | "info", message: string): void {
    void this.pub("bridge/logging", { level, message, namespace: "z2m" }, false);
  }

  /** Periodic reports (each device's interval, phase-shifted by its name) and reports on change. */
  private tick(): void {
    this.site.advance();
    if (!this.bridgeOnline || !this.connected) return;
    const now = Date.now();
    for (const d of this.devices.values()) {
      if (!d.online) continue;
      if (d.dirty || now - d.lastReportMs >= d.reportIntervalMs) this.report(d);
    }
  }

  info(): Record<string, unknown> {
    return {
      version: "2.0.0-sitegate-sim",
      commit: "sim",
      coordinator: { ieee_address: this.coordinatorIeee, type: "zStack3x0", meta: { revision: 20240710 } },
      network: { channel: 15, pan_id: 0x1a62, extended_pan_id: "0xdddddddddddddddd" },
      log_level: "info",
      permit_join: false,
      restart_required: false,
      config: { mqtt: { base_topic: this.base }, availability: { enabled: true }, advanced: { legacy_api: false } },
    };
  }

  /** The retained bridge/devices list: the coordinator first, as zigbee2mqtt lists it, then the devices. */
  deviceList(): unknown[] {
    const coordinator = {
      ieee_address: this.coordinatorIeee,
      type: "Coordinator",
      network_address: 0,
      supported: true,
      disabled: false,
      friendly_name: "Coordinator",
      endpoints: { "1": { bindings: [], configured_reportings: [], clusters: { input: [], output: [] }, scenes: [] } },
      definition: null,
      power_source: "Unknown",
      interviewing: false,
      interview_completed: true,
      interview_state: "SUCCESSFUL",
    };
    return [
      coordinator,
      ...[...this.devices.values()].map((d) => ({
        ieee_address: d.ieee,
        type: "Router",
        network_address: d.networkAddress,
        supported: true,
        disabled: false,
        friendly_name: d.name,
        description: null,
        manufacturer: "sitegate-sim",
        model_id: d.kind === "plug" ? "SG.plug.16" : "SG.trv.e2",
        power_source: "Mains (single phase)",
        software_build_id: "1.0.0",
        date_code: "20250101",
        endpoints: {
          "1": {
            bindings: [],
            configured_reportings: [],
            clusters: {
              input: [
                "genBasic",
                "genIdentify",
                d.kind === "plug" ? "genOnOff" : "hvacThermostat",
                ...(d.spec.metering ? ["haElectricalMeasurement", "seMetering"] : []),
              ],
              output: ["genOta"],
            },
            scenes: [],
          },
        },
        definition: d.definition(),
        interviewing: false,
        interview_completed: true,
        interview_state: "SUCCESSFUL",
      })),
    ];
  }

  private findDevice(id: string): ZigbeeDevice | undefined {
    const byName = this.devices.get(id);
    if (byName) return byName;
    for (const d of this.devices.values()) if (d.ieee === id) return d;
    return undefined;
  }

  private onMessage(topic: string, payload: Buffer, retained: boolean): void {
    if (!topic.startsWith(`${this.base}/`) || retained) return; // a stale retained command is not a command
    const rest = topic.slice(this.base.length + 1);
    if (rest.startsWith("bridge/request/")) return this.request(rest.slice("bridge/request/".length), payload.toString());
    const [, name, verb, key] = /^(.+)\/(set|get)(?:\/([A-Za-z0-9_]+))?$/.exec(rest) ?? [];
    if (name === undefined || name === "bridge") return;
    const d = this.findDevice(name);
    if (!d) {
      if (this.bridgeOnline) this.logging("error", `Entity '${name}' is unknown`);
      return;
    }
    const text = payload.toString();
    let body: Record<string, unknown> | null = null;
    if (key) body = { [key]: text };
    else {
      try {
        const j: unknown = JSON.parse(text);
        if (j && typeof j === "object" && !Array.isArray(j)) body = j as Record<string, unknown>;
      } catch {
        body = null;
      }
    }
    if (verb === "get") {
      if (this.bridgeOnline && d.online) this.later(d, () => this.report(d));
      return;
    }
    this.command(d, topic, body, text);
  }

  /**
   * bridge/request/<name>: health_check and permit_join answer as zigbee2mqtt does; the rest
   * (renames, removals, OTA...) answer an error: the simulated network is fixed by the scenario.
   */
  private request(name: string, text: string): void {
    if (!this.bridgeOnline) return;
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : "";
    } catch {
      body = text;
    }
    const transaction =
      body && typeof body === "object" && "transaction" in body ? { transaction: (body as { transaction: unknown }).transaction } : {};
    const answer =
      name === "health_check"
        ? { data: { healthy: true }, status: "ok" }
        : name === "permit_join"
          ? { data: { time: 0, value: false }, status: "error", error: "the simulated network admits no new devices" }
          : { data: {}, status: "error", error: `request '${name}' is not supported by the simulator` };
    void this.pub(`bridge/response/${name}`, { ...answer, ...transaction }, false);
  }

  private command(d: ZigbeeDevice, topic: string, body: Record<string, unknown> | null, text: string): void {
    const w: ZigbeeWrite = { at: new Date().toISOString(), topic, payload: body ?? text };
    d.writes.push(w);
    if (d.writes.length > WRITE_LOG_MAX) d.writes.splice(0, d.writes.length - WRITE_LOG_MAX);
    d.commands++;
    if (!this.bridgeOnline) {
      w.ignored = "bridge offline"; // zigbee2mqtt is not running: nobody reads the topic
      return;
    }
    if (body === null) {
      w.ignored = "invalid";
      this.logging("error", `Invalid message '${text}', skipping...`);
      return;
    }
    const silent = d.faults.has("no_answer") ? "no_answer" : d.faults.has("ignore_writes") ? "ignore_writes" : null;
    if (silent) {
      // The device never confirms: zigbee2mqtt logs the failure after its timeout, and no state follows.
      w.ignored = silent;
      this.timer(COMMAND_TIMEOUT_MS, () =>
        this.logging(
          "error",
          `Publish 'set' '${Object.keys(body).join(",")}' to '${d.name}' failed: 'Error: Command ${d.ieee}/1 timed out after ${COMMAND_TIMEOUT_MS} ms (no response)'`,
        ),
      );
      return;
    }
    this.later(d, () => {
      if (!this.bridgeOnline) {
        w.ignored = "bridge offline";
        return;
      }
      const r = d.apply(body);
      for (const e of r.errors) this.logging("error", `Publish 'set' to '${d.name}' failed: ${e}`);
      if (r.errors.length && !r.changed.length) w.ignored = "invalid";
      if (r.changed.length) this.report(d);
    });
  }

  /** Runs fn after the device's answer time: 30..150 ms seeded by (seed, device, command), plus a delay fault. */
  private later(d: ZigbeeDevice, fn: () => void): void {
    const base = 90 + 60 * noise(this.site.seed, hashString(d.name) ^ 0x2e7, d.commands);
    this.timer(Math.round(base) + (d.faults.get("delay")?.delay_ms ?? (d.faults.has("delay") ? 2000 : 0)), fn);
  }

  private timer(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.pending.delete(t);
      if (!this.stopped) fn();
    }, ms);
    this.pending.add(t);
  }

  /** POST /zigbee/bridge: offline publishes the bridge state and every device's availability offline. */
  async setBridgeState(state: "online" | "offline"): Promise<void> {
    if ((state === "online") === this.bridgeOnline) return;
    this.bridgeOnline = state === "online";
    this.log.info({ state }, "zigbee bridge state set");
    await this.publishAll();
  }

  has(name: string): boolean {
    return this.devices.has(name);
  }

  device(name: string): ZigbeeDevice {
    const d = this.devices.get(name);
    if (!d) throw new Error(`no zigbee device named "${name}"`);
    return d;
  }

  setFault(name: string, fault: string, delay_ms?: number): void {
    const d = this.device(name);
    if (!(ZIGBEE_FAULTS as readonly string[]).includes(fault))
      throw new Error(`fault "${fault}" does not apply to a Zigbee device (one of ${ZIGBEE_FAULTS.join(", ")})`);
    const wasOnline = d.online;
    d.faults.set(fault as ZigbeeFault, { fault: fault as ZigbeeFault, ...(delay_ms !== undefined ? { delay_ms } : {}) });
    if (wasOnline && !d.online && this.bridgeOnline) void this.pub(`${d.name}/availability`, { state: "offline" }, true);
  }

  clearFaults(name?: string): void {
    for (const d of name ? [this.device(name)] : this.devices.values()) {
      const wasOnline = d.online;
      d.faults.clear();
      if (!wasOnline && this.bridgeOnline) {
        void this.pub(`${d.name}/availability`, { state: "online" }, true);
        this.report(d);
      }
    }
  }

  /** POST /devices/<friendly_name>: a change by hand, reported at once like a device does. */
  setByHand(name: string, values: Record<string, unknown>): void {
    const d = this.device(name);
    d.setByHand(values);
    if (this.bridgeOnline && d.online) this.report(d);
  }

  status(): Record<string, unknown> {
    return { bridge: this.bridgeOnline ? "online" : "offline", connected: this.connected, broker: this.spec.broker, base_topic: this.base };
  }

  views(): Record<string, Record<string, unknown>> {
    const out: Record<string, Record<string, unknown>> = {};
    for (const [name, d] of this.devices) out[name] = d.view();
    return out;
  }

  /** zigbee2mqtt stopping: bridge/state offline (retained), then the connection closes. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.ticker) clearInterval(this.ticker);
    for (const t of this.pending) clearTimeout(t);
    this.pending.clear();
    const c = this.client;
    this.client = null;
    if (!c) return;
    if (this.connected) {
      await Promise.race([
        c.publishAsync(`${this.base}/bridge/state`, JSON.stringify({ state: "offline" }), { qos: 1, retain: true }).catch(() => undefined),
        new Promise((r) => setTimeout(r, 2000).unref()),
      ]);
    }
    this.connected = false;
    await c.endAsync(true).catch(() => undefined);
  }
}
