// The world of `make fleet-scale` (fleet-scale-run.ts) and its bench version: one simulator
// process (2 SunSpec TCP devices per gateway, ten per port), ONE real mosquitto (TLS with a
// certificate of its own, persistence on, a user per site and the README's ACL), N real
// `sitegate run` daemons started as the unit starts them (test/support/daemon-process.ts:
// its node flags and environment), each with `fleet.ca_file` and `fleet.command_keys`, and a
// fleet-side subscriber that records every telemetry and status message per site.
//
// The gateways name the broker by this machine's host name when it resolves to a loopback
// address (FLEET_HOST overrides): a DNS name is a remote broker to the gateway, so it takes
// the remote reconnect policy (1 s doubling to 5 min) a site across the internet takes;
// FLEET_HOST=127.0.0.1 measures the loopback policy (capped at 30 s) instead.
import { execFileSync, type ChildProcess } from "node:child_process";
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { lookup } from "node:dns/promises";
import { mkdirSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { connect, connectAsync, type IConnackPacket, type IPublishPacket, type MqttClient } from "mqtt";
import { TELEMETRY_COMMIT_S } from "../../src/config/schema.js";
import { signCommand } from "../../src/fleet/signing.js";
import { spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { tcpDevice } from "../support/gateway.js";
import { startBroker, FLEET_USER, FLEET_PASSWORD, GATEWAY_PASSWORD, type Broker } from "../support/mosquitto.js";
import { startSimProcess } from "./scale.bench.js";

const PER_PORT = 10; // scale.bench.ts's simulator layout: ten devices per TCP port
export const DEVICES_PER_GATEWAY = 2;

export interface FleetSite {
  id: string;
  dir: string;
  daemon: DaemonProcess;
  pid: number;
}

export interface StatusSeen {
  site: string;
  state: string;
  /** Delivered as retained (a copy on subscribe), not a live publish. */
  retain: boolean;
  at: number;
}

/** The fleet side: every telemetry timestamp per site in arrival order, every status message. */
export class FleetSubscriber {
  readonly telemetry = new Map<string, number[]>();
  /** Telemetry timestamps per site that arrived with the DUP flag (a redelivery to this subscriber). */
  readonly redelivered = new Map<string, Set<number>>();
  readonly status: StatusSeen[] = [];
  private client: MqttClient | null = null;
  readonly clientId = `fleet-scale-${process.pid}`;

  constructor(
    private readonly broker: Broker,
    private readonly ca: string,
  ) {}

  /** Connects (resuming the session after the first time); true when the broker had kept it. */
  async connect(): Promise<boolean> {
    const c = connect(this.broker.url, {
      protocolVersion: 5,
      username: FLEET_USER,
      password: FLEET_PASSWORD,
      ca: this.ca,
      clientId: this.clientId,
      clean: false,
      // The subscription and the messages published while it was away wait at the broker.
      properties: { sessionExpiryInterval: 3600, receiveMaximum: 1000 },
      reconnectPeriod: 1000,
      connectTimeout: 30_000,
      resubscribe: false,
    });
    // Before the CONNACK: a resumed session's queued messages follow it at once.
    c.on("message", (topic, payload, packet) => this.receive(topic, payload, packet));
    const connack = await new Promise<IConnackPacket>((resolve, reject) => {
      c.once("connect", resolve);
      c.once("error", reject);
    });
    this.client = c;
    const resumed = connack.sessionPresent === true;
    if (!resumed)
      await c.subscribeAsync({
        "sitegate/+/telemetry": { qos: 1 },
        "sitegate/+/status": { qos: 1 },
        [`sitegate/+/reply/${this.clientId}`]: { qos: 1 },
      });
    return resumed;
  }

  /** A clean DISCONNECT: the broker keeps the session (its expiry) and no attempt of ours hits the port. */
  async disconnect(): Promise<void> {
    const c = this.client;
    this.client = null;
    await c?.endAsync();
  }

  private receive(topic: string, payload: Buffer, packet: IPublishPacket): void {
    const parts = topic.split("/");
    const site = parts[1];
    if (parts[2] === "telemetry") {
      // The body starts {"timestamp":"<ISO>": no JSON parse per message.
      const text = payload.toString("latin1", 0, 64);
      const ts = Date.parse(text.slice(14, text.indexOf('"', 14)));
      let list = this.telemetry.get(site);
      if (!list) this.telemetry.set(site, (list = []));
      list.push(ts);
      // The broker sending it again on this subscriber's own session (it left with it unacknowledged).
      if (packet.dup) {
        let d = this.redelivered.get(site);
        if (!d) this.redelivered.set(site, (d = new Set()));
        d.add(ts);
      }
    } else if (parts[2] === "status") {
      let state = "?";
      try {
        state = String((JSON.parse(payload.toString()) as { state?: unknown }).state);
      } catch {
        state = "(not JSON)";
      }
      this.status.push({ site, state, retain: packet.retain, at: performance.now() });
    } else if (parts[2] === "reply") {
      this.replies.get(packet.properties?.correlationData?.toString() ?? "")?.(JSON.parse(payload.toString()));
    }
  }

  private readonly replies = new Map<string, (json: unknown) => void>();

  /** Each site's retained status as a new subscriber of the fleet sees it (after 2 s of quiet). */
  async retainedStatus(): Promise<string[]> {
    const c = await connectAsync(this.broker.url, {
      protocolVersion: 5,
      username: FLEET_USER,
      password: FLEET_PASSWORD,
      ca: this.ca,
      clientId: `${this.clientId}-retained`,
      reconnectPeriod: 0,
    });
    const last = new Map<string, string>();
    let at = performance.now();
    c.on("message", (topic, payload) => {
      at = performance.now();
      let state = "?";
      try {
        state = String((JSON.parse(payload.toString()) as { state?: unknown }).state);
      } catch {
        state = "(not JSON)";
      }
      last.set(topic.split("/")[1], state);
    });
    await c.subscribeAsync("sitegate/+/status", { qos: 1 });
    while (performance.now() - at < 2000) await new Promise((r) => setTimeout(r, 200)); // wait: 2 s without a message ends the retained copies
    await c.endAsync();
    return [...last.values()];
  }

  /** A signed `ping` to one site; resolves with the round trip in ms (and the answer's status). */
  async signedPing(site: string, key: KeyObject, timeoutMs = 30_000): Promise<{ ms: number; status: number }> {
    const c = this.client;
    if (!c) throw new Error("subscriber not connected");
    const replyTopic = `sitegate/${site}/reply/${this.clientId}`;
    const corr = `${site}-${Math.random().toString(16).slice(2)}`;
    const body = Buffer.from("{}");
    const t0 = performance.now();
    const answer = new Promise<{ status: number }>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.replies.delete(corr);
        reject(new Error(`no answer from ${site} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.replies.set(corr, (json) => {
        clearTimeout(timer);
        this.replies.delete(corr);
        resolve(json as { status: number });
      });
    });
    const userProperties = signCommand(key, { site, name: "ping", body });
    c.publish(`sitegate/${site}/cmd/ping`, body, {
      qos: 1,
      properties: { responseTopic: replyTopic, correlationData: Buffer.from(corr), userProperties },
    });
    const a = await answer;
    return { ms: performance.now() - t0, status: a.status };
  }
}

export interface FleetWorld {
  broker: Broker;
  /** The host name the gateways connect to, and whether the gateway counts it as loopback. */
  host: string;
  sites: FleetSite[];
  subscriber: FleetSubscriber;
  commandKey: KeyObject;
  stopGateways(): Promise<void>;
  stop(): Promise<void>;
}

/** The broker host for the gateways: FLEET_HOST, else this machine's name when it resolves to loopback. */
export async function brokerHost(): Promise<string> {
  if (process.env.FLEET_HOST) return process.env.FLEET_HOST;
  const name = hostname();
  try {
    const a = await lookup(name, { family: 4 });
    if (a.address.startsWith("127.")) return name;
  } catch {
    /* not resolvable: loopback literal */
  }
  return "127.0.0.1";
}

/** A self-signed certificate for the broker, valid for `host`, localhost and 127.0.0.1; the gateways' ca_file. */
function brokerCert(dir: string, host: string): { certFile: string; keyFile: string; cert: string } {
  const certFile = join(dir, "broker-cert.pem");
  const keyFile = join(dir, "broker-key.pem");
  const san = [`DNS:localhost`, `IP:127.0.0.1`, ...(/^[\d.]+$/.test(host) ? [`IP:${host}`] : [`DNS:${host}`])];
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", keyFile, "-out", certFile, "-days", "2"].concat([
      "-subj",
      "/CN=fleet-broker",
      "-addext",
      `subjectAltName=${[...new Set(san)].join(",")}`,
    ]),
    { stdio: "ignore" },
  );
  return { certFile, keyFile, cert: readFileSync(certFile, "utf8") };
}

export const siteId = (i: number) => `site-${String(i + 1).padStart(3, "0")}`;

/** Starts the world; gateways `parallel` at a time (FLEET_PARALLEL; each start is about 1.2 s of CPU under --jitless). */
export async function startFleetWorld(
  dir: string,
  n: number,
  log: (m: string) => void,
  parallel = Number(process.env.FLEET_PARALLEL ?? (n > 20 ? 16 : 4)),
  willDelayS = 60,
): Promise<FleetWorld> {
  const host = await brokerHost();
  const cert = brokerCert(dir, host);
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const pubPem = publicKey.export({ type: "spki", format: "pem" }).toString();
  const users = Object.fromEntries(Array.from({ length: n }, (_, i) => [siteId(i), GATEWAY_PASSWORD]));
  // The subscriber may fall behind a fleet's drain: its queue at the broker is not capped at 1,000.
  const broker = await startBroker(join(dir, "broker"), { users, cert, extraConf: ["max_queued_messages 0"] });
  let sim: { child: ChildProcess; ports: number[] } | null = null;
  const sites: FleetSite[] = [];
  const subscriber = new FleetSubscriber(broker, cert.cert);
  const stopGateways = async () => {
    await Promise.all(sites.map((s) => s.daemon.stop().catch((e: Error) => log(`${s.id}: ${e.message}`))));
  };
  try {
    sim = await startSimProcess(dir, n * DEVICES_PER_GATEWAY);
    await subscriber.connect();
    const url = `mqtts://${host}:${broker.port}`;
    log(
      `broker ${url} (${host === "127.0.0.1" || host === "localhost" ? "loopback: reconnects capped at 30 s" : "a host name: the remote policy, capped at 5 min"})`,
    );
    const ports = sim.ports;
    for (let next = 0; next < n;) {
      const batch = Array.from({ length: Math.min(parallel, n - next) }, (_, k) => next + k);
      next += batch.length;
      sites.push(...(await Promise.all(batch.map((i) => startGateway(dir, i, url, cert.certFile, pubPem, ports, willDelayS)))));
      if (Math.floor(next / 25) > Math.floor((next - batch.length) / 25) || next === n) log(`${next} of ${n} gateways running`);
    }
  } catch (e) {
    await stopGateways();
    await subscriber.disconnect().catch(() => {});
    await broker.stop();
    sim?.child.kill("SIGTERM");
    throw e;
  }
  const simChild = sim.child;
  return {
    broker,
    host,
    sites,
    subscriber,
    commandKey: privateKey,
    stopGateways,
    async stop() {
      await stopGateways();
      await subscriber.disconnect().catch(() => {});
      await broker.stop();
      simChild.kill("SIGTERM");
      await new Promise((r) => (simChild.exitCode !== null ? r(null) : simChild.once("exit", r)));
    },
  };
}

async function startGateway(
  dir: string,
  i: number,
  url: string,
  caFile: string,
  pubPem: string,
  ports: number[],
  willDelayS: number,
): Promise<FleetSite> {
  const id = siteId(i);
  const gwDir = join(dir, id);
  mkdirSync(gwDir, { recursive: true });
  const devices = Array.from({ length: DEVICES_PER_GATEWAY }, (_, k) => {
    const d = i * DEVICES_PER_GATEWAY + k;
    return tcpDevice(`${id}-d${k}`, ports[Math.floor(d / PER_PORT)], (d % PER_PORT) + 1);
  });
  const daemon = await spawnDaemon(gwDir, {
    site_id: id,
    // The product's telemetry defaults at a 1 s poll (testConfigInput commits every second).
    telemetry: { poll_interval_ms: 1000, retention_max_mb: 512, commit_interval_s: TELEMETRY_COMMIT_S },
    devices: devices as never,
    fleet: {
      url,
      ca_file: caFile,
      username: id,
      password: GATEWAY_PASSWORD,
      topic_prefix: "sitegate",
      command_keys: [pubPem],
      will_delay_s: willDelayS,
    },
  });
  return { id, dir: gwDir, daemon, pid: daemon.child.pid! };
}
