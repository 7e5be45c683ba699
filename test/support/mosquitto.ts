// One real mosquitto helper for the tests, in two configurations on one launcher:
// - startBroker: the fleet's broker: a free loopback port, MQTT v5 over TLS with the test
//   certificate, a password file made by mosquitto_passwd, an ACL in the README's form,
//   persistence so that sessions survive a restart; fleetClient() and command() speak to it.
//   Stop and start it again on the same port to test outages.
// - startLocalBroker: mosquitto as a Raspberry Pi runs it next to zigbee2mqtt: plain MQTT on a
//   loopback port, anonymous unless users are given, no persistence; with `tls`, a second
//   listener speaks MQTT over TLS with that certificate (`tlsUrl`). Recorder records what a
//   client receives and waits for a message after a mark.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connectAsync, type IClientOptions, type IPublishPacket, type MqttClient } from "mqtt";
import { testCert } from "./tls.js";
import { until } from "./wait.js";
import { freePort } from "./net.js";

export const FLEET_USER = "fleet";
export const FLEET_PASSWORD = "fleet-secret";
export const GATEWAY_PASSWORD = "gateway-secret";

export interface Broker {
  port: number;
  url: string;
  dir: string;
  /** Its log (stderr), for failure messages. */
  log(): string;
  /** SIGTERM (default): a clean stop that saves sessions; SIGKILL: a crash (what was saved last, autosave_interval 1 s). */
  stop(signal?: NodeJS.Signals): Promise<void>;
  start(): Promise<void>;
}

/** The ACL of the README: each gateway (user = site_id) only its own topics; the fleet user all. */
export function fleetAcl(prefix = "sitegate"): string {
  return [
    `user ${FLEET_USER}`,
    `topic readwrite ${prefix}/#`,
    "",
    `pattern write ${prefix}/%u/status`,
    `pattern write ${prefix}/%u/telemetry`,
    `pattern write ${prefix}/%u/events`,
    `pattern write ${prefix}/%u/devices`,
    `pattern write ${prefix}/%u/reply/#`,
    `pattern read ${prefix}/%u/cmd/#`,
    "",
  ].join("\n");
}

/** A mosquitto process on `confFile`, listening on `port` once start() resolves. */
interface Mosquitto {
  log: () => string;
  /** SIGTERM (default): a clean stop (persistence saves sessions); SIGKILL: a crash. */
  stop: (signal?: NodeJS.Signals) => Promise<void>;
  start: () => Promise<void>;
}

/**
 * Writes `dir`/passwd for `users` (mosquitto_passwd) and `dir`/mosquitto.conf: running as
 * root keeps its user, the common settings, then `conf`; returns a launcher for it.
 */
function mosquitto(dir: string, port: number, users: Record<string, string>, conf: (passwd: string) => string[]): Mosquitto {
  mkdirSync(dir, { recursive: true });
  const passwd = join(dir, "passwd");
  Object.entries(users).forEach(([u, p], i) =>
    execFileSync("mosquitto_passwd", ["-b", ...(i === 0 ? ["-c"] : []), passwd, u, p], { stdio: "ignore" }),
  );
  const confFile = join(dir, "mosquitto.conf");
  writeFileSync(
    confFile,
    [
      ...(process.getuid?.() === 0 ? ["user root"] : []),
      "per_listener_settings false",
      // The default (false) stalls small QoS 1 publishes (Nagle against delayed ACKs).
      "set_tcp_nodelay true",
      "log_dest stderr",
      "log_type error",
      "log_type warning",
      ...conf(passwd),
      "",
    ].join("\n"),
  );
  let child: ChildProcess | null = null;
  let log = "";
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    const c = child;
    child = null;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const gone = new Promise((r) => c.once("exit", r));
    c.kill(signal); // SIGTERM: mosquitto saves its sessions and retained messages
    await gone;
  };
  return {
    log: () => log,
    stop,
    async start() {
      const c = spawn("/usr/sbin/mosquitto", ["-c", confFile], { stdio: ["ignore", "ignore", "pipe"] });
      child = c;
      c.stderr!.on("data", (d: Buffer) => {
        log += d.toString();
        if (log.length > 100_000) log = log.slice(-50_000);
      });
      try {
        await until(
          async () => {
            if (c.exitCode !== null) throw new Error(`mosquitto exited ${c.exitCode}: ${log}`);
            return canConnect(port);
          },
          "mosquitto listening",
          10_000,
        );
      } catch (e) {
        await stop();
        throw e;
      }
    },
  };
}

export async function startBroker(
  dir: string,
  opts: {
    users?: Record<string, string>;
    tls?: boolean;
    cert?: { certFile: string; keyFile: string };
    /** More mosquitto.conf lines (before the listener), e.g. `max_queued_messages 0` for a subscriber of a whole fleet. */
    extraConf?: string[];
  } = {},
): Promise<Broker> {
  const port = await freePort();
  const tls = opts.tls ?? true;
  const cert = opts.cert ?? testCert();
  const users = { [FLEET_USER]: FLEET_PASSWORD, "site-001": GATEWAY_PASSWORD, ...(opts.users ?? {}) };
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "acl"), fleetAcl());
  const m = mosquitto(dir, port, users, (passwd) => [
    "allow_anonymous false",
    `password_file ${passwd}`,
    `acl_file ${join(dir, "acl")}`,
    "persistence true",
    `persistence_location ${dir}/`,
    "autosave_interval 1",
    "log_type notice",
    ...(opts.extraConf ?? []),
    `listener ${port} 127.0.0.1`,
    ...(tls ? [`certfile ${cert.certFile}`, `keyfile ${cert.keyFile}`] : []),
  ]);
  const broker: Broker = { port, url: `${tls ? "mqtts" : "mqtt"}://127.0.0.1:${port}`, dir, ...m };
  await broker.start();
  return broker;
}

async function canConnect(port: number): Promise<boolean> {
  const { connect } = await import("node:net");
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

export async function withBroker<T>(dir: string, fn: (b: Broker) => Promise<T>): Promise<T> {
  const b = await startBroker(join(dir, "broker"));
  try {
    return await fn(b);
  } finally {
    await b.stop();
  }
}

/** The fleet side: an MQTT.js v5 client as the `fleet` user that trusts the test certificate. */
export async function fleetClient(broker: Broker, over: IClientOptions = {}): Promise<MqttClient> {
  return connectAsync(broker.url, {
    protocolVersion: 5,
    username: FLEET_USER,
    password: FLEET_PASSWORD,
    ca: testCert().cert,
    reconnectPeriod: 200,
    connectTimeout: 5000,
    clientId: `fleet-test-${Math.random().toString(16).slice(2, 10)}`,
    ...over,
  });
}

export interface Received {
  topic: string;
  payload: string;
  json: any;
  retain: boolean;
  key?: string;
  props: IPublishPacket["properties"];
}

/** Records every message a client receives. */
export function record(client: MqttClient): Received[] {
  const got: Received[] = [];
  client.on("message", (topic, payload, packet) => {
    let json: unknown = null;
    try {
      json = JSON.parse(payload.toString());
    } catch {
      json = null;
    }
    const up = packet.properties?.userProperties?.["idempotency-key"];
    got.push({
      topic,
      payload: payload.toString(),
      json,
      retain: packet.retain,
      key: Array.isArray(up) ? up[0] : up,
      props: packet.properties,
    });
  });
  return got;
}

/** Sends a command and waits for its answer on a reply topic, matched by correlation data. */
export async function command(
  client: MqttClient,
  site: string,
  name: string,
  payload: string | Buffer | object | undefined,
  timeoutMs = 20_000,
): Promise<{ json: any; props: IPublishPacket["properties"] }> {
  const replyTopic = `sitegate/${site}/reply/${client.options.clientId}`;
  const corr = Buffer.from(Math.random().toString(16).slice(2));
  await client.subscribeAsync(replyTopic, { qos: 1 });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.removeListener("message", on);
      reject(new Error(`no answer to ${name} within ${timeoutMs} ms`));
    }, timeoutMs);
    const on = (topic: string, buf: Buffer, packet: IPublishPacket) => {
      if (topic !== replyTopic || !packet.properties?.correlationData?.equals(corr)) return;
      clearTimeout(timer);
      client.removeListener("message", on);
      resolve({ json: JSON.parse(buf.toString()), props: packet.properties });
    };
    client.on("message", on);
    const body = payload === undefined ? "" : typeof payload === "string" || Buffer.isBuffer(payload) ? payload : JSON.stringify(payload);
    client.publish(`sitegate/${site}/cmd/${name}`, body, { qos: 1, properties: { responseTopic: replyTopic, correlationData: corr } });
  });
}

/** The fleet config block for a gateway (user site-001) on this broker. */
export function fleetConfig(broker: Broker) {
  return {
    url: broker.url,
    ca_file: testCert().certFile,
    username: "site-001",
    password: GATEWAY_PASSWORD,
    topic_prefix: "sitegate",
    keepalive_s: 10,
  };
}

export interface LocalBroker {
  port: number;
  /** mqtt://127.0.0.1:PORT */
  url: string;
  /** mqtts://127.0.0.1:PORT of the TLS listener, when one was asked for. */
  tlsUrl?: string;
  log(): string;
  stop(): Promise<void>;
}

/** `port`: listen on this port (to restart a broker where its clients expect it). */
export async function startLocalBroker(
  dir: string,
  opts: { users?: Record<string, string>; port?: number; tls?: { certFile: string; keyFile: string } } = {},
): Promise<LocalBroker> {
  const port = opts.port ?? (await freePort());
  const tlsPort = opts.tls ? await freePort() : undefined;
  const users = opts.users ?? {};
  const named = Object.keys(users).length > 0;
  const m = mosquitto(dir, port, users, (passwd) => [
    named ? "allow_anonymous false" : "allow_anonymous true",
    ...(named ? [`password_file ${passwd}`] : []),
    "persistence false",
    `listener ${port} 127.0.0.1`,
    ...(opts.tls ? [`listener ${tlsPort} 127.0.0.1`, `certfile ${opts.tls.certFile}`, `keyfile ${opts.tls.keyFile}`] : []),
  ]);
  await m.start();
  return {
    port,
    url: `mqtt://127.0.0.1:${port}`,
    ...(tlsPort ? { tlsUrl: `mqtts://127.0.0.1:${tlsPort}` } : {}),
    log: m.log,
    stop: () => m.stop(),
  };
}

export interface Message {
  topic: string;
  text: string;
  json: any;
  retain: boolean;
}

/**
 * An MQTT.js client that records what it receives, with waits for a message that matches
 * (counting from a mark, so a wait never takes a message that arrived before the action).
 */
export class Recorder {
  readonly got: Message[] = [];
  private waiters = new Set<() => void>();

  private constructor(readonly client: MqttClient) {
    client.on("message", (topic, payload, packet) => {
      const text = payload.toString();
      let json: unknown = null;
      try {
        json = JSON.parse(text);
      } catch {
        json = null;
      }
      this.got.push({ topic, text, json, retain: packet.retain });
      for (const w of this.waiters) w();
    });
  }

  static async connect(url: string, topics: string[], over: IClientOptions = {}): Promise<Recorder> {
    const client = await connectAsync(url, {
      reconnectPeriod: 200,
      connectTimeout: 5000,
      clientId: `test-${Math.random().toString(16).slice(2, 10)}`,
      ...over,
    });
    const r = new Recorder(client);
    try {
      if (topics.length) await client.subscribeAsync(topics, { qos: 1 });
    } catch (e) {
      // A client left connected would keep the test process alive.
      await client.endAsync(true);
      throw e;
    }
    return r;
  }

  /** Index to pass as `from` to wait only for messages after this point. */
  mark(): number {
    return this.got.length;
  }

  /** Resolves with the first message (at index >= from) on topic that satisfies pred. */
  wait(topic: string, pred: (m: Message) => boolean = () => true, from = 0, timeoutMs = 15_000): Promise<Message> {
    return new Promise((resolve, reject) => {
      const check = () => {
        for (let i = from; i < this.got.length; i++) {
          const m = this.got[i];
          if (m.topic === topic && pred(m)) {
            cleanup();
            resolve(m);
            return true;
          }
        }
        return false;
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(
          new Error(
            `no message on ${topic} matching within ${timeoutMs} ms; got on it: ${JSON.stringify(
              this.got
                .filter((m) => m.topic === topic)
                .map((m) => m.text)
                .slice(-5),
            )}`,
          ),
        );
      }, timeoutMs);
      const w = () => void check();
      const cleanup = () => {
        clearTimeout(timer);
        this.waiters.delete(w);
      };
      this.waiters.add(w);
      check();
    });
  }

  /** Messages on topic received since `from`. */
  since(topic: string, from: number): Message[] {
    return this.got.slice(from).filter((m) => m.topic === topic);
  }

  async publish(topic: string, body: unknown): Promise<void> {
    await this.client.publishAsync(topic, typeof body === "string" ? body : JSON.stringify(body), { qos: 1 });
  }

  async end(): Promise<void> {
    await this.client.endAsync(true);
  }
}
