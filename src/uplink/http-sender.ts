// POSTs JSON callbacks to the partner over HTTPS with the configured headers,
// User-Agent, Idempotency-Key and a request timeout. Any 2xx settles a message; a
// redirect is followed once, to the same origin only (scheme, host and port): the
// partner headers are credentials, and nothing of a callback goes to a host the config
// did not name. The answer is classified here, once, so the
// lanes decide retries from one table (classify()). On node:https with a keep-alive agent:
// undici cost ~4 MiB of resident memory for one POST path (docs/sizing.md, where the memory goes).
import type { IncomingMessage, RequestOptions } from "node:http";
import { SitegateError } from "../errors.js";
import { Agent, request } from "node:https";
import { urlToHttpOptions } from "node:url";
import { createSecureContext, rootCertificates } from "node:tls";
import { readFileSync } from "node:fs";
import type { Outcome } from "../delivery/lane.js";
import { VERSION } from "../version.js";

export interface SendResult {
  ok: boolean;
  status?: number;
  error?: string;
  /** From a 429's or 503's Retry-After header (seconds or an HTTP date), in ms. */
  retryAfterMs?: number;
}

/**
 * What an answer is to a lane (delivery/lane.ts): `ok` any 2xx; `transient` 408, 429,
 * 5xx, timeout, network; `auth` 401, 403, 404 (the endpoint or our credentials are wrong,
 * not the message: the lane holds); `rejected` (final: dead-lettered at once) any other
 * answer, and a redirect that is not followed.
 */
export function classify(r: SendResult): Outcome {
  if (r.ok) return "ok";
  const s = r.status;
  if (s === undefined) return "transient";
  if (s === 408 || s === 429 || s >= 500) return "transient";
  if (s === 401 || s === 403 || s === 404) return "auth";
  return "rejected";
}

/** Retry-After: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(v: string | string[] | undefined, now = Date.now()): number | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  if (!s) return undefined;
  if (/^\s*\d+\s*$/.test(s)) return Number(s) * 1000;
  const t = Date.parse(s);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}

export interface SenderOptions {
  headers: Array<{ name: string; value: string }>;
  timeoutMs: number;
  /** PEM file of an extra CA trusted besides the system's (a bench sink's certificate). */
  caFile?: string;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Parsed URLs kept at the most: the data push's, one per lane, and a few redirect targets. */
const MAX_TARGETS = 32;

/** A request past partner.timeout_ms is recorded as TIMEOUT. */
function timeoutError(ms: number): SitegateError {
  return new SitegateError("TIMEOUT", `no answer within ${ms} ms`, { transient: true });
}

export class HttpSender {
  private readonly agent: Agent;
  private readonly headers: Record<string, string>;
  private readonly targets = new Map<string, RequestOptions>();

  constructor(private readonly opts: SenderOptions) {
    // An extra CA: one TLS context for every connection (a `ca` option would parse the
    // ~140 system roots again per connection and make the agent's pool key 200 KiB long).
    const secureContext = opts.caFile ? createSecureContext({ ca: [...rootCertificates, readFileSync(opts.caFile, "utf8")] }) : undefined;
    // Up to 4 data pushes in flight plus the callback lanes: 8 connections per origin, kept
    // open between pushes; an idle socket is closed after 30 s.
    this.agent = new Agent({
      ...(secureContext ? { secureContext } : {}),
      keepAlive: true,
      maxSockets: 8,
      maxFreeSockets: 8,
      timeout: 30_000,
      scheduling: "lifo",
    });
    this.headers = {};
    for (const h of opts.headers) this.headers[h.name] = h.value;
  }

  async post(url: string, body: string, idempotencyKey: string): Promise<SendResult> {
    const first = await this.once(url, body, idempotencyKey);
    if (!first.location) return first.result;
    // One redirect, POSTed again with the same body and key (a callback is never a GET).
    let next: URL;
    try {
      next = new URL(first.location, url);
    } catch {
      return { ok: false, status: first.result.status, error: `HTTP ${first.result.status} to an unreadable location` };
    }
    if (next.origin !== new URL(url).origin)
      return {
        ok: false,
        status: first.result.status,
        error: `HTTP ${first.result.status} to another origin (${next.origin}) not followed: callbacks go only to the configured origin`,
      };
    const second = await this.once(next.href, body, idempotencyKey);
    if (second.location)
      return { ok: false, status: second.result.status, error: `HTTP ${second.result.status}: a second redirect is not followed` };
    return second.result;
  }

  private async once(url: string, body: string, idempotencyKey: string): Promise<{ result: SendResult; location?: string }> {
    let res: IncomingMessage;
    try {
      res = await this.exchange(url, body, idempotencyKey);
    } catch (e) {
      const err = e as Error & { code?: string };
      return { result: { ok: false, error: err.code ?? err.name ?? String(e) } };
    }
    const status = res.statusCode ?? 0;
    if (status >= 200 && status < 300) return { result: { ok: true, status } };
    const result: SendResult = { ok: false, status, error: `HTTP ${status}` };
    if (status === 429 || status === 503) {
      const ra = parseRetryAfter(res.headers["retry-after"]);
      if (ra !== undefined) result.retryAfterMs = ra;
    }
    const loc = res.headers.location;
    if (REDIRECTS.has(status) && loc) return { result, location: loc };
    return { result };
  }

  /** Host, port and path of a URL, parsed once: under --jitless a URL parse per POST shows. */
  private target(url: string): RequestOptions {
    let t = this.targets.get(url);
    if (!t) {
      if (this.targets.size >= MAX_TARGETS) this.targets.clear();
      t = urlToHttpOptions(new URL(url));
      this.targets.set(url, t);
    }
    return t;
  }

  /**
   * One POST; resolves once the answer's body has been read (up to 64 KiB, the rest
   * dropped). The whole exchange has timeout_ms: one plain timer, cheaper than an AbortSignal.
   */
  private exchange(url: string, body: string, idempotencyKey: string): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = request({
        ...this.target(url),
        method: "POST",
        agent: this.agent,
        headers: {
          ...this.headers,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          "user-agent": `sitegate/${VERSION}`,
          "idempotency-key": idempotencyKey,
        },
      });
      const timer = setTimeout(() => req.destroy(timeoutError(this.opts.timeoutMs)), this.opts.timeoutMs).unref();
      const answered = (res: IncomingMessage) => {
        clearTimeout(timer);
        resolve(res);
      };
      req.once("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
      req.once("response", (res) => {
        let seen = 0;
        res.on("data", (chunk: Buffer) => {
          seen += chunk.length;
          // A partner that answers with a huge body gets its connection closed, not our memory.
          if (seen > 64 * 1024) res.destroy();
        });
        res.once("end", () => answered(res));
        res.once("close", () => answered(res));
        res.once("error", () => answered(res));
      });
      // A string body goes out with the head in one write (one TLS record), a Buffer in a second one.
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
