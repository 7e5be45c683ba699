// POSTs JSON callbacks to the partner over HTTPS with the configured headers,
// User-Agent, Idempotency-Key and a request timeout. Only a 200 settles a message;
// the answer to anything else is a failure with a reason to log.
import { rootCertificates } from "node:tls";
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";
import { VERSION } from "../version.js";

export interface SendResult {
  ok: boolean;
  status?: number;
  error?: string;
}

export interface SenderOptions {
  headers: Array<{ name: string; value: string }>;
  timeoutMs: number;
  /** PEM file of an extra CA trusted besides the system's (a bench sink's certificate). */
  caFile?: string;
}

export class HttpSender {
  private readonly agent: Agent;
  private readonly headers: Record<string, string>;

  constructor(private readonly opts: SenderOptions) {
    const ca = opts.caFile ? [...rootCertificates, readFileSync(opts.caFile, "utf8")] : undefined;
    this.agent = new Agent({ connect: { ...(ca ? { ca } : {}), timeout: opts.timeoutMs }, keepAliveTimeout: 30_000, connections: 4 });
    this.headers = {};
    for (const h of opts.headers) this.headers[h.name] = h.value;
  }

  async post(url: string, body: string, idempotencyKey: string): Promise<SendResult> {
    try {
      const res = await request(url, {
        method: "POST",
        dispatcher: this.agent,
        headers: {
          ...this.headers,
          "content-type": "application/json",
          "user-agent": `sitegate/${VERSION}`,
          "idempotency-key": idempotencyKey,
        },
        body,
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
        signal: AbortSignal.timeout(this.opts.timeoutMs),
      });
      await res.body.dump({ limit: 64 * 1024 }).catch(() => {});
      return res.statusCode === 200 ? { ok: true, status: 200 } : { ok: false, status: res.statusCode, error: `HTTP ${res.statusCode}` };
    } catch (e) {
      const err = e as Error & { code?: string; cause?: { code?: string } };
      return { ok: false, error: err.code ?? err.cause?.code ?? err.name ?? String(e) };
    }
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => {});
  }
}
