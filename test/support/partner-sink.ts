// A real HTTPS partner for tests and the demo: records every callback (path, headers,
// parsed body) and can be told to fail: answer a status, hang past the client's timeout
// (recorded with status 0),
// or refuse connections (stop listening) until told to accept again. `decide` answers
// per request (e.g. 400 to one message only), `delayMs` answers late (a slow partner),
// and `maxInFlight` records how many requests it held at once.
//   node dist/test/support/partner-sink.js --port 18443 --cert C --key K
import { createServer, type Server } from "node:https";
import type { IncomingHttpHeaders } from "node:http";
import type { Socket } from "node:net";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { untilSignal } from "../../src/util/process.js";
import { testCert } from "./tls.js";

export interface SinkRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  raw: string;
  status: number;
  at: number;
}

export type SinkMode = { kind: "ok" } | { kind: "status"; status: number; headers?: Record<string, string> } | { kind: "hang" };

export interface SinkAnswer {
  status: number;
  headers?: Record<string, string>;
  /** Answer only once this settles (a request held in flight). */
  wait?: Promise<void>;
}

export class PartnerSink {
  readonly requests: SinkRequest[] = [];
  mode: SinkMode = { kind: "ok" };
  port = 0;
  private server: Server;
  private readonly sockets = new Set<Socket>();
  private listeners = new Set<() => void>();
  onRequest: ((r: SinkRequest) => void) | null = null;
  /** Answers one request (before `mode`); undefined falls through to `mode`. */
  decide: ((r: { path: string; headers: IncomingHttpHeaders; body: any }) => SinkAnswer | undefined) | null = null;
  /** Every answer waits this long (a slow partner). */
  delayMs = 0;
  inFlight = 0;
  maxInFlight = 0;

  private constructor(cert: string, key: string) {
    this.server = createServer({ cert, key }, (req, res) => {
      let raw = "";
      req.setEncoding("utf8");
      req.on("data", (d) => (raw += d));
      // In flight from its arrival until its answer is written (or the connection drops).
      this.inFlight++;
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
      let done = false;
      const finish = () => {
        if (!done) this.inFlight--;
        done = true;
      };
      res.on("close", finish);
      req.on("end", () => {
        const mode = this.mode;
        let body: unknown = null;
        try {
          body = JSON.parse(raw);
        } catch {
          body = null;
        }
        const path = req.url ?? "";
        if (mode.kind === "hang") {
          // Never answered (the client's timeout fires); recorded with status 0 so a test
          // can see the attempt and its Idempotency-Key.
          const r: SinkRequest = { method: req.method ?? "", path, headers: req.headers, body, raw, status: 0, at: Date.now() };
          this.requests.push(r);
          this.onRequest?.(r);
          for (const l of this.listeners) l();
          return;
        }
        const answer: SinkAnswer =
          this.decide?.({ path, headers: req.headers, body }) ??
          (mode.kind === "status" ? { status: mode.status, headers: mode.headers } : { status: 200 });
        const reply = () => {
          const status = answer.status;
          const r: SinkRequest = { method: req.method ?? "", path, headers: req.headers, body, raw, status, at: Date.now() };
          this.requests.push(r);
          this.onRequest?.(r);
          const ok = status >= 200 && status < 300;
          finish();
          res
            .writeHead(status, { "content-type": "application/json", ...(answer.headers ?? {}) })
            .end(status === 204 ? undefined : ok ? '{"ok":true}' : '{"error":"sink told to fail"}');
          for (const l of this.listeners) l();
        };
        if (answer.wait) void answer.wait.then(reply);
        else if (this.delayMs > 0) setTimeout(reply, this.delayMs);
        else reply();
      });
    });
    this.server.on("connection", (s: Socket) => {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
  }

  static async start(opts: { cert: string; key: string; port?: number; host?: string }): Promise<PartnerSink> {
    const sink = new PartnerSink(opts.cert, opts.key);
    await sink.listen(opts.port ?? 0, opts.host ?? "127.0.0.1");
    return sink;
  }

  private listen(port: number, host: string): Promise<void> {
    return new Promise((res, rej) => {
      this.server.once("error", rej);
      this.server.listen(port, host, () => {
        this.server.off("error", rej);
        const a = this.server.address();
        this.port = typeof a === "object" && a ? a.port : port;
        res();
      });
    });
  }

  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /** Requests that were answered 2xx, in arrival order. */
  accepted(path?: string): SinkRequest[] {
    return this.requests.filter((r) => r.status >= 200 && r.status < 300 && (path === undefined || r.path === path));
  }

  /** Whether an accepted data push carried readings (some metric) of device `id`. */
  pushed(id: string): boolean {
    return this.accepted().some((q) =>
      (q.body?.devices ?? []).some(
        (d: { device_id: string; metrics?: Record<string, unknown> }) => d.device_id === id && Object.keys(d.metrics ?? {}).length > 0,
      ),
    );
  }

  /** Stops listening and drops open connections: clients get "connection refused". */
  async refuse(): Promise<void> {
    await new Promise<void>((r) => {
      this.server.close(() => r());
      for (const s of this.sockets) s.destroy();
    });
  }

  /** Listens again on the same port. */
  accept(): Promise<void> {
    return this.listen(this.port, "127.0.0.1");
  }

  /** Resolves when pred() holds, checked after every request; rejects after timeoutMs. */
  waitFor(pred: () => boolean, timeoutMs = 20000, what = "condition"): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (pred()) {
          cleanup();
          resolve();
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`partner sink: timed out after ${timeoutMs} ms waiting for ${what} (${this.requests.length} requests so far)`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.listeners.delete(check);
      };
      this.listeners.add(check);
    });
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** A sink on a free loopback port with the test certificate (or another one). */
export async function startSink(c: { cert: string; key: string } = testCert()): Promise<PartnerSink> {
  return PartnerSink.start({ cert: c.cert, key: c.key });
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { port: { type: "string" }, cert: { type: "string" }, key: { type: "string" } } });
  if (!values.cert || !values.key) throw new Error("usage: partner-sink --port P --cert FILE --key FILE");
  const sink = await PartnerSink.start({
    cert: readFileSync(values.cert, "utf8"),
    key: readFileSync(values.key, "utf8"),
    port: Number(values.port ?? 18443),
  });
  process.stdout.write(`partner sink listening on ${sink.url}\n`);
  sink.onRequest = (r) => {
    const b = r.body as {
      timestamp?: string;
      devices?: Array<{ device_id: string; metrics: Record<string, number> }>;
      event_id?: string;
      status?: string;
    };
    if (b?.devices) {
      const summary = b.devices.map((d) => {
        const m = d.metrics;
        const pick = ["power_w", "soc_pct", "energy_import_wh", "state"].filter((k) => k in m).map((k) => `${k}=${m[k]}`);
        return `${d.device_id}{${pick.join(" ")}}`;
      });
      process.stdout.write(`POST ${r.path} ${b.timestamp} ${summary.join(" ")}\n`);
    } else {
      process.stdout.write(`POST ${r.path} ${b?.event_id ?? ""} ${b?.status ?? ""} ${r.raw.slice(0, 200)}\n`);
    }
  };
  await untilSignal();
  await sink.stop();
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    process.stderr.write(`partner-sink: ${(e as Error).message}\n`);
    process.exit(1);
  });
}

/** The config's `partner` block for a gateway that calls back to `sink` (X-Partner-Key: k). */
export function partnerTo(sink: PartnerSink, over: { headers?: Array<{ name: string; value: string }>; timeout_ms?: number } = {}) {
  return {
    headers: [{ name: "X-Partner-Key", value: "k" }],
    execution_url: `${sink.url}/exec`,
    data_push_url: sink.url,
    data_push_path: "telemetry",
    ca_file: testCert().certFile,
    ...over,
  };
}
