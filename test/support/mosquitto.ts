// A real mosquitto for one test: a free loopback port, a generated config (MQTT v5 over
// TLS with the test certificate, a password file made by mosquitto_passwd, an ACL in the
// README's form, persistence so that sessions survive a restart) and MQTT.js clients
// that trust the test certificate. Stop and start it again on the same port to test outages.
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
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const tls = opts.tls ?? true;
  const cert = opts.cert ?? testCert();
  const users = { [FLEET_USER]: FLEET_PASSWORD, "site-001": GATEWAY_PASSWORD, ...(opts.users ?? {}) };
  const passwd = join(dir, "passwd");
  let first = true;
  for (const [u, p] of Object.entries(users)) {
    execFileSync("mosquitto_passwd", ["-b", ...(first ? ["-c"] : []), passwd, u, p], { stdio: "ignore" });
    first = false;
  }
  writeFileSync(join(dir, "acl"), fleetAcl());
  const conf = [
    ...(process.getuid?.() === 0 ? ["user root"] : []),
    "per_listener_settings false",
    "allow_anonymous false",
    `password_file ${passwd}`,
    `acl_file ${join(dir, "acl")}`,
    "persistence true",
    `persistence_location ${dir}/`,
    "autosave_interval 1",
    // The default (false) stalls small QoS 1 publishes (Nagle against delayed ACKs).
    "set_tcp_nodelay true",
    "log_dest stderr",
    "log_type error",
    "log_type warning",
    "log_type notice",
    ...(opts.extraConf ?? []),
    `listener ${port} 127.0.0.1`,
    ...(tls ? [`certfile ${cert.certFile}`, `keyfile ${cert.keyFile}`] : []),
    "",
  ].join("\n");
  const confFile = join(dir, "mosquitto.conf");
  writeFileSync(confFile, conf);
  let child: ChildProcess | null = null;
  let log = "";
  const broker: Broker = {
    port,
    url: `${tls ? "mqtts" : "mqtt"}://127.0.0.1:${port}`,
    dir,
    log: () => log,
    async start() {
      const c = spawn("/usr/sbin/mosquitto", ["-c", confFile], { stdio: ["ignore", "ignore", "pipe"] });
      child = c;
      c.stderr!.on("data", (d: Buffer) => {
        log += d.toString();
        if (log.length > 100_000) log = log.slice(-50_000);
      });
      const exited = new Promise<number | null>((r) => c.once("exit", (code) => r(code)));
      await until(
        async () => {
          if (c.exitCode !== null) throw new Error(`mosquitto exited ${c.exitCode}: ${log}`);
          return canConnect(port);
        },
        "mosquitto listening",
        10_000,
      );
      void exited;
    },
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      const c = child;
      child = null;
      if (!c || c.exitCode !== null) return;
      const gone = new Promise((r) => c.once("exit", r));
      c.kill(signal); // SIGTERM: mosquitto saves its sessions and retained messages
      await gone;
    },
  };
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
