// A real mosquitto as a Raspberry Pi runs it next to zigbee2mqtt: plain MQTT on a loopback
// port, anonymous unless users are given (then a password file made by mosquitto_passwd),
// no persistence. For the simulator's zigbee2mqtt bridge and the gateway's Zigbee side.
// With `tls`, a second listener speaks MQTT over TLS with that certificate (`tlsUrl`).
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connectAsync, type IClientOptions, type MqttClient } from "mqtt";
import { until } from "./wait.js";
import { freePort } from "./net.js";

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
  mkdirSync(dir, { recursive: true });
  const port = opts.port ?? (await freePort());
  const tlsPort = opts.tls ? await freePort() : undefined;
  const users = Object.entries(opts.users ?? {});
  const passwd = join(dir, "passwd");
  users.forEach(([u, p], i) => execFileSync("mosquitto_passwd", ["-b", ...(i === 0 ? ["-c"] : []), passwd, u, p], { stdio: "ignore" }));
  const conf = [
    ...(process.getuid?.() === 0 ? ["user root"] : []),
    "per_listener_settings false",
    users.length ? "allow_anonymous false" : "allow_anonymous true",
    ...(users.length ? [`password_file ${passwd}`] : []),
    "persistence false",
    "set_tcp_nodelay true",
    "log_dest stderr",
    "log_type error",
    "log_type warning",
    `listener ${port} 127.0.0.1`,
    ...(opts.tls ? [`listener ${tlsPort} 127.0.0.1`, `certfile ${opts.tls.certFile}`, `keyfile ${opts.tls.keyFile}`] : []),
    "",
  ].join("\n");
  const confFile = join(dir, "mosquitto.conf");
  writeFileSync(confFile, conf);
  let log = "";
  const child: ChildProcess = spawn("/usr/sbin/mosquitto", ["-c", confFile], { stdio: ["ignore", "ignore", "pipe"] });
  child.stderr!.on("data", (d: Buffer) => {
    log += d.toString();
    if (log.length > 100_000) log = log.slice(-50_000);
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await gone;
  };
  try {
    await until(
      async () => {
        if (child.exitCode !== null) throw new Error(`mosquitto exited ${child.exitCode}: ${log}`);
        return canConnect(port);
      },
      "mosquitto listening",
      10_000,
    );
  } catch (e) {
    await stop();
    throw e;
  }
  return { port, url: `mqtt://127.0.0.1:${port}`, ...(tlsPort ? { tlsUrl: `mqtts://127.0.0.1:${tlsPort}` } : {}), log: () => log, stop };
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
