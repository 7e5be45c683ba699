// Who holds the connection slots of an HTTPS listener. Every connection passes the gate as
// it is accepted, before TLS (the gate wraps the server's own connection listeners, which
// start the handshake), in this order:
// - a source on none of the listener's allowlists is destroyed at once: it never holds a
//   slot, so sources the listener would answer 403 cannot take the slots from those it serves;
// - at most `perSource` connections per source (IPv6 per /64);
// - at most `total` in all; when they are taken, the newcomer's slot comes from the biggest
//   holder, whose oldest idle connection (else its oldest) is closed, as long as that
//   holder has at least two more than the newcomer would: an allowlisted client always
//   finds a slot, and sources that hold as many as one another do not churn.
// Refusals are counted per reason and logged at most once a minute, naming the sources.
// Why: docs/security.md ("Connection limits").
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Server } from "node:https";
import type { Socket } from "node:net";
import type { Logger } from "../log.js";
import type { MetricFamily } from "../metrics.js";
import type { ConnectionLimits } from "./connection-limits.js";
import { sourceKey } from "./throttle.js";

const WARN_EVERY_MS = 60_000;
/** Sources named in one log line at most (the count says how many more). */
const NAMED_SOURCES = 16;

type Refusal = "not_allowed" | "per_source" | "total";

interface Conn {
  readonly socket: Socket;
  readonly key: string;
  /** Its latest request's response: the connection is busy while that is not ended (HTTP/1.1 answers in order). */
  res: ServerResponse | null;
  released: boolean;
}

export class ConnectionGate {
  private readonly bySource = new Map<string, Set<Conn>>();
  /** By the TCP socket under a request's TLS socket. */
  private readonly bySocket = new WeakMap<Socket, Conn>();
  private open = 0;
  private evicted = 0;
  private readonly refused: Record<Refusal, number> = { not_allowed: 0, per_source: 0, total: 0 };
  /** Refusals since the last log line, by source (at most NAMED_SOURCES named) and reason. */
  private readonly pending = new Map<string, number>();
  private pendingReasons: Partial<Record<Refusal, number>> = {};
  private pendingOther = 0;
  private lastWarn = -Infinity;

  /** `allowed(ip)`: whether any allowlist of the listener holds the source address. */
  constructor(
    private readonly limits: ConnectionLimits,
    private readonly log: Logger,
    private readonly listener: string,
    private readonly allowed: (ip: string) => boolean,
    private readonly now: () => number = Date.now,
  ) {}

  install(server: Server): void {
    const inner = server.listeners("connection") as Array<(s: Socket) => void>;
    server.removeAllListeners("connection");
    server.on("connection", (socket: Socket) => {
      if (this.admit(socket)) for (const l of inner) l.call(server, socket);
    });
    // Which connections are idle: a request in progress makes its connection busy. Only the
    // latest response is kept (responses end in order), so no listener is added per request.
    server.on("request", (req: IncomingMessage, res: ServerResponse) => {
      const tcp = (req.socket as Socket & { _parent?: Socket })._parent ?? req.socket;
      const c = this.bySocket.get(tcp);
      if (c) c.res = res;
    });
  }

  private admit(socket: Socket): boolean {
    const ip = socket.remoteAddress ?? "";
    const key = sourceKey(ip);
    if (!this.allowed(ip)) return this.refuse(socket, "not_allowed", key);
    const mine = this.bySource.get(key)?.size ?? 0;
    if (mine >= this.limits.perSource) return this.refuse(socket, "per_source", key);
    if (this.open >= this.limits.total && !this.evictFor(mine)) return this.refuse(socket, "total", key);
    const c: Conn = { socket, key, res: null, released: false };
    let set = this.bySource.get(key);
    if (!set) this.bySource.set(key, (set = new Set()));
    set.add(c);
    this.bySocket.set(socket, c);
    this.open++;
    socket.once("close", () => this.release(c));
    return true;
  }

  private release(c: Conn): void {
    if (c.released) return;
    c.released = true;
    this.open--;
    c.res = null;
    const set = this.bySource.get(c.key);
    set?.delete(c);
    if (set?.size === 0) this.bySource.delete(c.key);
  }

  /** Frees a slot for a source holding `mine`: the biggest holder's oldest idle connection (else its oldest), if it holds 2 more. */
  private evictFor(mine: number): boolean {
    let biggest: Set<Conn> | undefined;
    for (const set of this.bySource.values()) if (!biggest || set.size > biggest.size) biggest = set;
    if (!biggest || biggest.size < mine + 2) return false;
    let victim: Conn | undefined;
    for (const c of biggest) {
      victim ??= c;
      if (!c.res || c.res.writableEnded) {
        victim = c;
        break;
      }
    }
    if (!victim) return false;
    this.release(victim);
    victim.socket.destroy();
    this.evicted++;
    return true;
  }

  private refuse(socket: Socket, why: Refusal, key: string): false {
    socket.destroy();
    this.refused[why]++;
    this.pendingReasons[why] = (this.pendingReasons[why] ?? 0) + 1;
    if (this.pending.has(key) || this.pending.size < NAMED_SOURCES) this.pending.set(key, (this.pending.get(key) ?? 0) + 1);
    else this.pendingOther++;
    this.warn();
    return false;
  }

  /** At most one line a minute: a flood of refusals must not become a flood of log lines. */
  private warn(): void {
    const now = this.now();
    if (now - this.lastWarn < WARN_EVERY_MS) return;
    this.lastWarn = now;
    this.log.warn(
      {
        listener: this.listener,
        open: this.open,
        sources: [...this.pending].map(([k, n]) => `${k} (${n})`).join(", "),
        ...(this.pendingOther ? { other_sources_refusals: this.pendingOther } : {}),
        reasons: { ...this.pendingReasons },
      },
      "connections refused at accept (further refusals within a minute only counted in sitegate_http_connections_refused_total)",
    );
    this.pending.clear();
    this.pendingReasons = {};
    this.pendingOther = 0;
  }

  metrics(): MetricFamily[] {
    const labels = { listener: this.listener };
    return [
      { name: "sitegate_http_connections", help: "open HTTPS connections", type: "gauge", values: [{ labels, value: this.open }] },
      {
        name: "sitegate_http_connections_refused_total",
        help: "HTTPS connections destroyed at accept (source on no allowlist, per-source or total limit)",
        type: "counter",
        values: (Object.keys(this.refused) as Refusal[]).map((reason) => ({ labels: { ...labels, reason }, value: this.refused[reason] })),
      },
      {
        name: "sitegate_http_connections_evicted_total",
        help: "HTTPS connections of the biggest holder closed to give an allowlisted newcomer a slot (total limit)",
        type: "counter",
        values: [{ labels, value: this.evicted }],
      },
    ];
  }
}
