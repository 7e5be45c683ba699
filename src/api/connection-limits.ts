// Connection limits of both HTTPS listeners (the API, and the status page's own): a request
// (headers and body) must arrive whole within requestTimeoutMs of its first byte, and so must
// the TLS handshake; an idle keep-alive connection is closed after idleMs; at most perSource
// open connections per source address (IPv6 per /64) and `total` in all. A connection beyond
// either count is destroyed as it is accepted, before TLS, so it costs no handshake.
// Why these figures, and why the timeouts are checked every second: docs/security.md
// ("Connection limits").
import type { Server } from "node:https";
import type { Socket } from "node:net";
import type { Logger } from "../log.js";
import type { MetricFamily } from "../metrics.js";
import { sourceKey } from "./throttle.js";

export interface ConnectionLimits {
  /** The TLS handshake, and then each request with its body, within this long of its first byte (ms). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this long (ms). */
  idleMs: number;
  /** Open connections per source address (IPv6: per /64). */
  perSource: number;
  /** Open connections of the listener in all. */
  total: number;
  /** How often Node looks for requests over their time (ms): a slow request lives at most this much longer. */
  checkIntervalMs: number;
}

export const CONNECTION_LIMITS: ConnectionLimits = {
  requestTimeoutMs: 30_000,
  idleMs: 5_000,
  perSource: 64,
  total: 512,
  checkIntervalMs: 1_000,
};

export function connectionLimits(over: Partial<ConnectionLimits> = {}): ConnectionLimits {
  return { ...CONNECTION_LIMITS, ...over };
}

/**
 * The idle time split into what the Keep-Alive header announces and Node's buffer after it
 * (a client that reuses a connection just before the announced end must not meet a close).
 */
function keepAlive(idleMs: number): { keepAliveTimeout: number; keepAliveTimeoutBuffer: number } {
  const buffer = Math.min(1000, Math.floor(idleMs / 5));
  return { keepAliveTimeout: idleMs - buffer, keepAliveTimeoutBuffer: buffer };
}

/** The Node server options (inside fastify's `https`) that carry the limits. */
export function serverTimeoutOptions(l: ConnectionLimits) {
  return {
    requestTimeout: l.requestTimeoutMs,
    // Node refuses a headers timeout longer than the request timeout; they are one limit here.
    headersTimeout: l.requestTimeoutMs,
    connectionsCheckingInterval: l.checkIntervalMs,
    handshakeTimeout: l.requestTimeoutMs,
    ...keepAlive(l.idleMs),
  };
}

/** The same limits in fastify's own options, which it writes onto the server after creating it. */
export function fastifyTimeoutOptions(l: ConnectionLimits) {
  return {
    requestTimeout: l.requestTimeoutMs,
    keepAliveTimeout: keepAlive(l.idleMs).keepAliveTimeout,
    // Inactivity of any kind (a response the client never reads) ends the socket too.
    connectionTimeout: l.requestTimeoutMs,
  };
}

const WARN_EVERY_MS = 60_000;

/**
 * Counts the listener's open connections per source and in all, and destroys one over
 * either limit as it is accepted: the gate runs before TLS (it wraps the server's own
 * connection listeners, which start the handshake).
 */
export class ConnectionGate {
  private readonly bySource = new Map<string, number>();
  private open = 0;
  private refused = 0;
  private lastWarn = -Infinity;

  constructor(
    private readonly limits: ConnectionLimits,
    private readonly log: Logger,
    private readonly listener: string,
  ) {}

  install(server: Server): void {
    const inner = server.listeners("connection") as Array<(s: Socket) => void>;
    server.removeAllListeners("connection");
    server.on("connection", (socket: Socket) => {
      if (this.admit(socket)) for (const l of inner) l.call(server, socket);
    });
  }

  private admit(socket: Socket): boolean {
    const key = sourceKey(socket.remoteAddress ?? "");
    const mine = this.bySource.get(key) ?? 0;
    if (mine >= this.limits.perSource || this.open >= this.limits.total) {
      this.refused++;
      socket.destroy();
      this.warn(
        mine >= this.limits.perSource ? `per-source limit (${this.limits.perSource}) of ${key}` : `limit (${this.limits.total}) in all`,
      );
      return false;
    }
    this.bySource.set(key, mine + 1);
    this.open++;
    socket.once("close", () => {
      this.open--;
      const n = (this.bySource.get(key) ?? 1) - 1;
      if (n > 0) this.bySource.set(key, n);
      else this.bySource.delete(key);
    });
    return true;
  }

  /** At most one line a minute: a flood of refusals must not become a flood of log lines. */
  private warn(which: string): void {
    const now = Date.now();
    if (now - this.lastWarn < WARN_EVERY_MS) return;
    this.lastWarn = now;
    this.log.warn({ listener: this.listener, open: this.open, refused_total: this.refused }, `refusing connections over the ${which}`);
  }

  metrics(): MetricFamily[] {
    const labels = { listener: this.listener };
    return [
      { name: "sitegate_http_connections", help: "open HTTPS connections", type: "gauge", values: [{ labels, value: this.open }] },
      {
        name: "sitegate_http_connections_refused_total",
        help: "HTTPS connections destroyed at accept (per-source or total limit)",
        type: "counter",
        values: [{ labels, value: this.refused }],
      },
    ];
  }
}
