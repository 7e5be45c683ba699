// Connection limits of both HTTPS listeners (the API, and the status page's own): a request
// (headers and body) must arrive whole within requestTimeoutMs of its first byte, and so must
// the TLS handshake; an idle keep-alive connection is closed after idleMs; at most perSource
// open connections per source address (IPv6 per /64) and `total` in all, among the sources
// the listener serves at all (ConnectionGate, connection-gate.ts).
// Why these figures, and why the timeouts are checked every second: docs/security.md
// ("Connection limits").

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
